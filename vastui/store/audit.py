"""The audit log: every approval granted or declined and every mutating call, append-only.

``SqliteStore`` satisfies ``vastui.approval.AuditSink`` through ``record_audit``.
"""

from __future__ import annotations

import sqlite3

from vastui.approval import Action, AuditRecord
from vastui.store.base import StoreBase

_COLUMNS = "at, kind, action, target, approval_id, granted_by, outcome, campaign_id"


def _record(row: sqlite3.Row) -> AuditRecord:
    return AuditRecord(
        at=row["at"],
        kind=row["kind"],
        action=Action(row["action"]),
        target=row["target"],
        approval_id=row["approval_id"],
        granted_by=row["granted_by"],
        outcome=row["outcome"],
        campaign_id=row["campaign_id"],
    )


class AuditTables(StoreBase):
    """The append-only audit log."""

    async def record_audit(self, record: AuditRecord) -> None:
        """Append one audit record (the ``AuditSink`` protocol)."""
        async with self._write(f"record the audit of {record.action} on {record.target}") as tx:
            await tx.execute(
                f"INSERT INTO audit_log ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record.at, record.kind, str(record.action), record.target, record.approval_id, record.granted_by,
                 record.outcome, record.campaign_id),
            )

    async def audit_records(self, *, campaign_id: str | None = None) -> list[AuditRecord]:
        """The audit log of one campaign, or all of it (``campaign_id=None``), in the order written."""
        where, params = ("WHERE campaign_id = ?", (campaign_id,)) if campaign_id is not None else ("", ())
        rows = await self._read("read the audit log", f"SELECT {_COLUMNS} FROM audit_log {where} ORDER BY id", params)
        return [_record(row) for row in rows]
