"""What every table stands on: one write transaction at a time, secrets redacted, errors translated.

Every write goes through ``_write`` (one transaction), every read through ``_read``; a backend holds one asyncio
lock around both, because concurrent tasks sharing one connection would otherwise interleave their statements
inside each other's transactions. Every text parameter of every write passes the secret guard first. The driver's
errors become ``StoreError`` in the backend (``sqlite_store``, ``postgres_store``) and nowhere else.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from vastui.config import Redactor, Secret
from vastui.errors import StoreError
from vastui.store.records import Writer

Params = Sequence[Any]


class Row(Protocol):
    """One row as the tables read it: by column name or by position (``sqlite3.Row``, ``postgres_store.Row``)."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    """What a statement's result says beyond its rows: how many rows it changed."""

    @property
    def rowcount(self) -> int: ...


class Transaction(abc.ABC):
    """The handle a write gets inside its transaction; every str parameter passes the secret guard. The SQL is
    SQLite's, with ``?`` placeholders; a backend speaking another dialect translates it (``postgres_store``)."""

    __slots__ = ("_redact",)

    def __init__(self, redact: Redactor) -> None:
        self._redact = redact

    def _guard(self, params: Params) -> tuple[Any, ...]:
        return tuple(self._redact(p) if isinstance(p, str) else p for p in params)

    @abc.abstractmethod
    async def execute(self, sql: str, params: Params = ()) -> Cursor: ...

    @abc.abstractmethod
    async def insert(self, sql: str, params: Params = (), *, key: str = "id") -> int:
        """Run an INSERT and return the new row's ``key`` (its integer primary key)."""

    @abc.abstractmethod
    async def executemany(self, sql: str, rows: Iterable[Params]) -> None: ...

    @abc.abstractmethod
    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    @abc.abstractmethod
    async def ids_follow(self, table: str, column: str) -> None:
        """After rows were written with their ids given: the next id ``table.column`` generates comes after the
        largest (SQLite's INTEGER PRIMARY KEY does so by itself; a PostgreSQL identity keeps its own sequence)."""


class StoreBase(abc.ABC):
    """Locking, error translation and the secret guard shared by every table; a backend (``SqliteStore``,
    ``PostgresStore``) supplies the connection: ``_write``, ``_read``, ``close`` and ``schema_version``.

    ``path`` is where the store's local files live (the SQLite file itself; for a server database, a file name in
    the data directory that only anchors the audit journal); ``location`` is what messages name."""

    def __init__(self, path: Path, *, location: str | None = None) -> None:
        self._path = path
        self._location = location if location is not None else str(path)
        self._lock = asyncio.Lock()
        self._redactor = Redactor()
        self._closed = False
        self._writer = Writer(operator="", host=socket.gethostname(), pid=os.getpid())

    @property
    def path(self) -> Path:
        """The database file, or the local anchor of a server database's audit journal."""
        return self._path

    @property
    def location(self) -> str:
        """Where the data lives, as the operator names it (a file, or a server URL without its password): what
        ``--db`` takes to reach this store again."""
        return self._location

    @property
    def writer(self) -> Writer:
        """Who this process writes as: every campaign, intent, kept request and audit record it writes says so."""
        return self._writer

    def act_as(self, operator: str, *, host: str | None = None) -> None:
        """Write as ``operator`` (config ``operator``) from now on; host and pid are this process's (``host``
        names another: a recorded scene replayed here, so its pictures do not depend on this machine's name)."""
        self._writer = replace(self._writer, operator=operator, host=host if host is not None else self._writer.host)

    def _writer_params(self) -> tuple[str | None, str, int]:
        """The (operator, host, pid) columns of a row this process writes (no operator named: NULL)."""
        return (self._writer.operator or None, self._writer.host, self._writer.pid)

    def register_secret(self, secret: Secret | str) -> None:
        """Never write this value: from now on it is replaced by ``<redacted>`` in every text the store writes."""
        self._redactor.add(secret)

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise StoreError(f"could not {what}: the store {self._location} is closed")

    def _failure(self, what: str, exc: BaseException) -> StoreError:
        # ``what`` can carry caller text (a state, a digest): the message passes the same guard as the data. A
        # server's message can run to several lines (its DETAIL and HINT): the first says what failed.
        text = str(exc).strip().splitlines()
        return StoreError(self._redactor(f"could not {what} in {self._location}: {text[0] if text else exc!r}"),
                          title="Database error")

    async def close(self) -> None:
        """Wait for the write in flight, then close the connection (idempotent)."""
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            await self._close_connection()

    @abc.abstractmethod
    async def _close_connection(self) -> None:
        """Close the backend's connection (StoreError when it cannot)."""

    @abc.abstractmethod
    def _write(self, what: str) -> contextlib.AbstractAsyncContextManager[Transaction]:
        """One write transaction; committed when the block ends, rolled back (and translated) when it raises."""

    @abc.abstractmethod
    async def _read(self, what: str, sql: str, params: Params = ()) -> list[Row]:
        """Run one query and return its rows."""

    async def _read_one(self, what: str, sql: str, params: Params = ()) -> Row | None:
        rows = await self._read(what, sql, params)
        return rows[0] if rows else None

    @abc.abstractmethod
    async def schema_version(self) -> int:
        """The schema version the database is at."""


def check_json(text: str, *, field: str) -> str:
    """Return ``text`` if it is JSON; raise StoreError naming the field otherwise."""
    try:
        json.loads(text)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"could not store {field}: it is not valid JSON ({exc})") from exc
    return text
