"""Fixtures for the store tests: a real SQLite file under tmp_path, opened and closed per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.store.store_support import DIGEST
from vastui.store import SqliteStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "vastui.sqlite3"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(db_path)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def campaign_store(store: SqliteStore) -> SqliteStore:
    """A store holding manifest DIGEST and two active campaigns, c1 and c2."""
    await store.save_manifest(digest=DIGEST, name="resnet", toml_text="name = 'resnet'\n", stored_at=100.0)
    for campaign_id in ("c1", "c2"):
        await store.create_campaign(campaign_id=campaign_id, manifest_digest=DIGEST, created_at=100.0,
                                    phase="plan", budget_usd=20.0, deadline_at=7300.0)
    return store
