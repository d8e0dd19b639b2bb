"""Fixtures for the store tests: every table's tests run on both backends — a real SQLite file under tmp_path, and
a fresh database on a real PostgreSQL server (tests/pg_server.py) — opened and closed per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.store.store_support import DIGEST
from vastui.store import PostgresStore, SqliteStore, Store


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "vastui.sqlite3"


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, db_path: Path, tmp_path: Path) -> AsyncIterator[Store]:
    """The store on each backend in turn."""
    if request.param == "sqlite":
        opened: Store = await SqliteStore.open(db_path)
    else:
        url = request.getfixturevalue("pg_url")
        opened = await PostgresStore.open(url, anchor=tmp_path / "data" / "team")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def sqlite_store(db_path: Path) -> AsyncIterator[SqliteStore]:
    """The SQLite store alone, for what only a file has (WAL, pragmas, a second process on the file)."""
    opened = await SqliteStore.open(db_path)
    try:
        yield opened
    finally:
        await opened.close()


async def _with_campaigns(store: Store) -> Store:
    await store.save_manifest(digest=DIGEST, name="resnet", toml_text="name = 'resnet'\n", stored_at=100.0)
    for campaign_id in ("c1", "c2"):
        await store.create_campaign(campaign_id=campaign_id, manifest_digest=DIGEST, created_at=100.0,
                                    phase="plan", budget_usd=20.0, deadline_at=7300.0)
    return store


@pytest.fixture
async def campaign_store(store: Store) -> Store:
    """A store (each backend) holding manifest DIGEST and two active campaigns, c1 and c2."""
    return await _with_campaigns(store)


@pytest.fixture
async def sqlite_campaign_store(sqlite_store: SqliteStore) -> SqliteStore:
    """The SQLite store holding manifest DIGEST and two active campaigns, c1 and c2."""
    await _with_campaigns(sqlite_store)
    return sqlite_store
