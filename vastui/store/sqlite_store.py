"""``SqliteStore``: the one store of a vastui process, over one aiosqlite connection to one SQLite file.

Durability choice: WAL with ``synchronous=FULL``. In WAL mode ``NORMAL`` already survives a killed process (committed
pages sit in the OS cache), but it can lose the last commits on a power cut or kernel crash. The writes that matter
most here are create intents, written before money is spent: an intent lost after the create call went out is an
instance nobody knows to destroy. FULL costs one WAL fsync per commit; telemetry is batched, so that is a few
fsyncs a second at most. ``busy_timeout`` lets a second vastui process (``vastui leaks`` beside a campaign) wait
for the writer instead of failing, and every write starts with ``BEGIN IMMEDIATE`` so it takes the write lock up
front and never deadlocks upgrading a read lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

from vastui.config import Redactor
from vastui.errors import StoreError
from vastui.store.audit import journal_path, reserve_journal
from vastui.store.base import Params, Row, Transaction
from vastui.store.migrations import check_is_vastui, migrate
from vastui.store.store import Store

log = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT_S = 5.0
_THREAD_STOP_WAIT_S = 5.0  # the worker only has to close a connection that never opened


class SqliteTransaction(Transaction):
    """A write transaction on the SQLite connection."""

    __slots__ = ("_conn",)

    def __init__(self, conn: aiosqlite.Connection, redact: Redactor) -> None:
        super().__init__(redact)
        self._conn = conn

    async def execute(self, sql: str, params: Params = ()) -> aiosqlite.Cursor:
        return await self._conn.execute(sql, self._guard(params))

    async def insert(self, sql: str, params: Params = (), *, key: str = "id") -> int:
        cursor = await self.execute(sql, params)
        row_id = cursor.lastrowid   # an INTEGER PRIMARY KEY is the rowid, whatever ``key`` names it
        if row_id is None:  # pragma: no cover - sqlite always sets it after an INSERT
            raise StoreError("the database did not return the new row's id")
        return row_id

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        await self._conn.executemany(sql, [self._guard(row) for row in rows])

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return list(await self._conn.execute_fetchall(sql, tuple(params)))

    async def ids_follow(self, table: str, column: str) -> None:
        return None   # an INTEGER PRIMARY KEY always goes on from the largest id in the table


class SqliteStore(Store):
    """The store in one SQLite file, over one aiosqlite connection: the embedded default. Open it with
    ``await SqliteStore.open(path)``; close it (or use ``async with``).
    """

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        super().__init__(path)
        self._conn = conn

    @classmethod
    async def open(cls, path: Path | str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> SqliteStore:
        """Open (creating if needed) the database file, set WAL, FULL sync, foreign keys and busy timeout,
        and migrate it to the current schema. Raises StoreError with what failed."""
        db_path = Path(path)
        try:
            db_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            blocker = next((p for p in db_path.parents if p.exists() and not p.is_dir()), None)
            why = f"{blocker} is a file, not a folder" if blocker is not None else exc.strerror
            raise StoreError(f"could not create the folder for the database {db_path}: {why}") from exc
        pending = aiosqlite.connect(str(db_path), isolation_level=None)
        try:
            conn = await pending
        except sqlite3.Error as exc:
            # On a failed connect aiosqlite queues the stop of its worker thread without waiting for it; wait
            # here, so the thread never outlives the event loop that asked (it would fail setting its result).
            await asyncio.to_thread(pending._thread.join, _THREAD_STOP_WAIT_S)
            raise StoreError(f"could not open the database {db_path}: {exc}", title="Database error") from exc
        try:
            conn.row_factory = sqlite3.Row
            await _configure(conn, db_path, busy_timeout_s)
            await migrate(conn)
        except BaseException:
            await conn.close()
            raise
        store = cls(conn, db_path)
        try:
            await store.replay_audit_journal()   # what a full disk or a closed store kept aside last time
        except StoreError as exc:
            log.warning("the audit journal stays for the next start: %s", exc.message)
        try:
            reserve_journal(journal_path(db_path))   # its space, taken now: a full disk later cannot refuse it
        except OSError as exc:
            log.warning("no space reserved for the audit journal beside %s: %s", db_path, exc.strerror)
        return store

    async def _close_connection(self) -> None:
        try:
            await self._conn.close()
        except (sqlite3.Error, ValueError) as exc:
            raise StoreError(f"could not close the database {self._path}: {exc}") from exc

    @asynccontextmanager
    async def _write(self, what: str) -> AsyncIterator[Transaction]:
        """One ``BEGIN IMMEDIATE`` … ``COMMIT``: the write lock taken up front, never upgraded from a read's."""
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
                yield SqliteTransaction(self._conn, self._redactor)
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

    async def _read(self, what: str, sql: str, params: Params = ()) -> list[Row]:
        async with self._lock:
            self._check_open(what)
            try:
                return list(await self._conn.execute_fetchall(sql, tuple(params)))
            except (sqlite3.Error, ValueError) as exc:
                raise self._failure(what, exc) from exc

    async def schema_version(self) -> int:
        """The schema version the database is at (``PRAGMA user_version``)."""
        row = await self._read_one("read the schema version", "PRAGMA user_version")
        return int(row[0]) if row is not None else 0


async def _configure(conn: aiosqlite.Connection, db_path: Path, busy_timeout_s: float) -> None:
    try:
        await conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        await check_is_vastui(conn, db_path)
        mode = list(await conn.execute_fetchall("PRAGMA journal_mode = WAL"))[0][0]
        await conn.execute("PRAGMA synchronous = FULL")
        await conn.execute("PRAGMA foreign_keys = ON")
        foreign_keys = list(await conn.execute_fetchall("PRAGMA foreign_keys"))[0][0]
    except sqlite3.Error as exc:
        raise StoreError(f"could not configure the database {db_path}: {exc}", title="Database error") from exc
    if str(mode).lower() != "wal":
        raise StoreError(f"could not switch the database {db_path} to WAL mode (it stays in {mode!r} mode)")
    if foreign_keys != 1:
        raise StoreError(f"could not turn on foreign keys for the database {db_path}")
