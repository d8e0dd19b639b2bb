"""Shared constants and raw reads for the store tests (a plain module: conftest modules are not for importing)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from vastui.store import OfferSnapshot

DIGEST = "sha256:workload-a"


def integrity(path: Path) -> list[str]:
    """``PRAGMA integrity_check`` on the file, over a connection of its own: ``["ok"]`` for a sound database."""
    with closing(sqlite3.connect(path)) as conn:
        return [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]


def offer_snapshots(path: Path, *, campaign_id: str | None) -> list[OfferSnapshot]:
    """The offer snapshots kept for ``campaign_id`` (None: outside any campaign), in the order written."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT campaign_id, offer_id, machine_id, gpu_name, num_gpus, dph_usd, taken_at, "
                            "snapshot_json FROM offer_snapshots WHERE campaign_id IS ? ORDER BY id", (campaign_id,))
        return [OfferSnapshot(*row) for row in rows]
