"""Screenings: the profile a campaign's knob screening kept for a workload, so a later campaign of the same workload
races at it without screening again (campaign/screening.py, ``InheritedScreening``; docs/method.md, Repeat
campaigns). Append-only: every campaign's screening is kept, the latest one is what a plan reads."""

from __future__ import annotations

from vastui.store.base import Row, StoreBase, check_json
from vastui.store.records import StoredScreening


def _screening(row: Row) -> StoredScreening:
    return StoredScreening(row_id=row["id"], campaign_id=row["campaign_id"], workload_digest=row["workload_digest"],
                           screened_at=row["screened_at"], json_text=row["json_text"])


class ScreeningTables(StoreBase):
    """The ``screenings`` table."""

    async def save_screening(self, *, campaign_id: str, workload_digest: str, screened_at: float,
                             json_text: str) -> StoredScreening:
        """Keep what ``campaign_id``'s screening kept for the workload ``workload_digest``."""
        check_json(json_text, field=f"the screening of campaign {campaign_id}")
        async with self._write(f"save the screening of campaign {campaign_id}") as tx:
            row_id = await tx.insert(
                "INSERT INTO screenings (campaign_id, workload_digest, screened_at, json_text) VALUES (?, ?, ?, ?)",
                (campaign_id, workload_digest, screened_at, json_text))
            row = await tx.fetchone("SELECT * FROM screenings WHERE id = ?", (row_id,))
        assert row is not None
        return _screening(row)

    async def latest_screening(self, *, workload_digest: str, since: float | None = None) -> StoredScreening | None:
        """The most recent screening of the workload (finished at or after ``since``, when given), or None."""
        sql = "SELECT * FROM screenings WHERE workload_digest = ?"
        params: list[object] = [workload_digest]
        if since is not None:
            sql += " AND screened_at >= ?"
            params.append(since)
        row = await self._read_one(f"read the latest screening of workload {workload_digest}",
                                   sql + " ORDER BY screened_at DESC, id DESC LIMIT 1", params)
        return None if row is None else _screening(row)
