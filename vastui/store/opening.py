"""``open_store``: the store a ``--db`` names — a SQLite file (the embedded default) or a PostgreSQL URL (a team's
shared store; docs/architecture.md, Store)."""

from __future__ import annotations

from pathlib import Path

from vastui.store.postgres_store import PostgresStore, is_postgres_url
from vastui.store.sqlite_store import SqliteStore
from vastui.store.store import Store


async def open_store(target: str | Path, *, data_dir: Path, operator: str | None = None) -> Store:
    """Open the store at ``target``: a ``postgresql://`` URL is a server (its audit journal, kept should the server
    refuse a record, lives in ``data_dir``), anything else a SQLite file. Every row this process writes names
    ``operator`` (config ``operator``), this host and this pid. Raises StoreError with what failed."""
    store: Store
    if is_postgres_url(target):
        store = await PostgresStore.open(str(target), anchor=data_dir / "team-store")
    else:
        store = await SqliteStore.open(target)
    if operator:
        store.act_as(operator)
    return store
