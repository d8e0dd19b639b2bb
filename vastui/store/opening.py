"""``open_store``: the store a ``--db`` names — a SQLite file (the embedded default) or a PostgreSQL URL (a team's
shared store; docs/architecture.md, Store)."""

from __future__ import annotations

from pathlib import Path

from vastui.store.postgres_store import PostgresStore, is_postgres_url
from vastui.store.sqlite_store import SqliteStore
from vastui.store.store import Store


async def open_store(target: str | Path, *, data_dir: Path) -> Store:
    """Open the store at ``target``: a ``postgresql://`` URL is a server (its audit journal, kept should the server
    refuse a record, lives in ``data_dir``), anything else a SQLite file. Raises StoreError with what failed."""
    if is_postgres_url(target):
        return await PostgresStore.open(str(target), anchor=data_dir / "team-store")
    return await SqliteStore.open(target)
