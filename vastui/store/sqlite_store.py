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
import logging
import sqlite3
from pathlib import Path
from types import TracebackType

import aiosqlite

from vastui.errors import StoreError
from vastui.store.audit import AuditTables, journal_path, reserve_journal
from vastui.store.campaigns import CampaignTables
from vastui.store.hosts import HostTables
from vastui.store.instances import InstanceTables
from vastui.store.kept import KeptRequestTables
from vastui.store.migrations import check_is_vastui, migrate
from vastui.store.runs import RunTables
from vastui.store.screenings import ScreeningTables

log = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT_S = 5.0
_THREAD_STOP_WAIT_S = 5.0  # the worker only has to close a connection that never opened


class SqliteStore(CampaignTables, InstanceTables, RunTables, HostTables, AuditTables, KeptRequestTables,
                  ScreeningTables):
    """Everything vastui keeps: campaigns, intents and instances, runs and telemetry, host knowledge, bad hosts,
    the audit log and receipts, a detached campaign's kept approval requests, and the knobs' screenings. Open it with ``await SqliteStore.open(path)``; close it (or use ``async with``).
    """

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

    async def __aenter__(self) -> SqliteStore:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


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
