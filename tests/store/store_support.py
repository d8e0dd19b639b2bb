"""Shared constants and raw reads for the store tests (a plain module: conftest modules are not for importing).

The raw reads and writes go over a connection of their own, past the store: what is in the database, whatever the
store would say about it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg

from vastui.store import OfferSnapshot, PostgresStore, Store
from vastui.store.postgres_store import to_postgres

DIGEST = "sha256:workload-a"

# what each backend says when a constraint refuses a row (SQLite: "UNIQUE constraint failed", "FOREIGN KEY
# constraint failed"; PostgreSQL: "violates unique constraint", "violates foreign key constraint")
UNIQUE = "(?i)unique|primary key"
FOREIGN_KEY = "(?i)foreign key"


def integrity(path: Path) -> list[str]:
    """``PRAGMA integrity_check`` on the file, over a connection of its own: ``["ok"]`` for a sound database."""
    with closing(sqlite3.connect(path)) as conn:
        return [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]


def raw_rows(store: Store, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``sql`` (SQLite's dialect, as the tables write it) over a connection of its own to the store's
    database; its rows."""
    if isinstance(store, PostgresStore):
        with psycopg.connect(store.location, autocommit=True) as conn:
            cursor = conn.execute(to_postgres(sql), params)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
    with closing(sqlite3.connect(store.path, isolation_level=None)) as other:
        return [tuple(row) for row in other.execute(sql, params).fetchall()]


def offer_snapshots(store: Store, *, campaign_id: str | None) -> list[OfferSnapshot]:
    """The offer snapshots kept for ``campaign_id`` (None: outside any campaign), in the order written."""
    rows = raw_rows(store, "SELECT campaign_id, offer_id, machine_id, gpu_name, num_gpus, dph_usd, taken_at, "
                           "snapshot_json FROM offer_snapshots WHERE campaign_id IS ? ORDER BY id", (campaign_id,))
    return [OfferSnapshot(*row) for row in rows]
