"""The connection under every table: one aiosqlite connection, one write transaction at a time, secrets redacted.

Every write goes through ``_write`` (one ``BEGIN IMMEDIATE`` … ``COMMIT``), every read through ``_read``; both hold
one asyncio lock, because concurrent tasks sharing one SQLite connection would otherwise interleave their
statements inside each other's transactions. Every text parameter of every write passes the secret guard first.
sqlite3/aiosqlite errors become ``StoreError`` here and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from vastui.config import Redactor, Secret
from vastui.errors import StoreError

Params = Sequence[Any]


class Transaction:
    """The handle a write gets inside its transaction; every str parameter passes the secret guard."""

    __slots__ = ("_conn", "_redact")

    def __init__(self, conn: aiosqlite.Connection, redact: Redactor) -> None:
        self._conn = conn
        self._redact = redact

    def _guard(self, params: Params) -> tuple[Any, ...]:
        return tuple(self._redact(p) if isinstance(p, str) else p for p in params)

    async def execute(self, sql: str, params: Params = ()) -> aiosqlite.Cursor:
        return await self._conn.execute(sql, self._guard(params))

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Run an INSERT and return the new row's id."""
        cursor = await self.execute(sql, params)
        row_id = cursor.lastrowid
        if row_id is None:  # pragma: no cover - sqlite always sets it after an INSERT
            raise StoreError("the database did not return the new row's id")
        return row_id

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        await self._conn.executemany(sql, [self._guard(row) for row in rows])

    async def fetchall(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        return list(await self._conn.execute_fetchall(sql, tuple(params)))

    async def fetchone(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None


class StoreBase:
    """Connection, locking, transactions, error translation and the secret guard shared by every table."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path
        self._lock = asyncio.Lock()
        self._redactor = Redactor()
        self._closed = False

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def register_secret(self, secret: Secret | str) -> None:
        """Never write this value: from now on it is replaced by ``<redacted>`` in every text the store writes."""
        self._redactor.add(secret)

    async def close(self) -> None:
        """Wait for the write in flight, then close the connection (idempotent)."""
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                await self._conn.close()
            except (sqlite3.Error, ValueError) as exc:
                raise StoreError(f"could not close the database {self._path}: {exc}") from exc

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise StoreError(f"could not {what}: the store {self._path} is closed")

    def _failure(self, what: str, exc: BaseException) -> StoreError:
        # ``what`` can carry caller text (a state, a digest): the message passes the same guard as the data.
        return StoreError(self._redactor(f"could not {what} in {self._path}: {exc}"), title="Database error")

    @asynccontextmanager
    async def _write(self, what: str) -> AsyncIterator[Transaction]:
        """One write transaction; committed when the block ends, rolled back (and translated) when it raises."""
        async with self._lock:
            self._check_open(what)
            try:
                await self._conn.execute("BEGIN IMMEDIATE")
            except (sqlite3.Error, ValueError) as exc:
                raise self._failure(what, exc) from exc
            except BaseException:
                # Cancelled (an aborted campaign stops its tasks) while BEGIN ran in the connection's thread: it
                # may still begin a transaction that nobody ends, and every later write would fail. The ROLLBACK
                # is queued behind it on the same thread, so it ends whatever BEGIN started.
                with contextlib.suppress(sqlite3.Error, ValueError):
                    await self._conn.execute("ROLLBACK")
                raise
            try:
                yield Transaction(self._conn, self._redactor)
                await self._conn.execute("COMMIT")
            except BaseException as exc:
                await self._rollback()
                if isinstance(exc, (sqlite3.Error, ValueError)) and not isinstance(exc, StoreError):
                    raise self._failure(what, exc) from exc
                raise

    async def _rollback(self) -> None:
        try:
            if self._conn.in_transaction:
                await self._conn.execute("ROLLBACK")
        except (sqlite3.Error, ValueError):
            # The connection is unusable; the original error is the one worth reporting.
            pass

    async def _read(self, what: str, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Run one query and return its rows."""
        async with self._lock:
            self._check_open(what)
            try:
                return list(await self._conn.execute_fetchall(sql, tuple(params)))
            except (sqlite3.Error, ValueError) as exc:
                raise self._failure(what, exc) from exc

    async def _read_one(self, what: str, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self._read(what, sql, params)
        return rows[0] if rows else None

    async def schema_version(self) -> int:
        """The schema version the database is at (``PRAGMA user_version``)."""
        row = await self._read_one("read the schema version", "PRAGMA user_version")
        return int(row[0]) if row is not None else 0


def check_json(text: str, *, field: str) -> str:
    """Return ``text`` if it is JSON; raise StoreError naming the field otherwise."""
    try:
        json.loads(text)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"could not store {field}: it is not valid JSON ({exc})") from exc
    return text
