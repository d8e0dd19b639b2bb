"""The audit log: every approval granted or declined and every mutating call, append-only.

``SqliteStore`` satisfies ``vastui.approval.AuditSink`` through ``record_audit``.

Destroy before paperwork: when the database refuses a record (a full disk, a store already closed), the record goes
to a fallback journal — JSON lines in a file beside the database — so that the destroy it announces can still go
out with its trace kept; the next ``SqliteStore.open`` folds the journal into the log. The journal's space is
reserved when the store opens (``JOURNAL_RESERVE_BYTES`` of zeros, records written over them), because the disk
that refuses the database refuses a new file beside it too. Only when the journal cannot be written either does
``record_audit`` raise (a rent then does not go out; a destroy of the campaign's own instance still does, see
``HttpVastClient._mutate``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from vastui.approval import Action, AuditKind, AuditRecord
from vastui.errors import StoreError
from vastui.store.base import Row, StoreBase
from vastui.store.records import writer_of

log = logging.getLogger(__name__)

JOURNAL_SUFFIX = ".audit-journal"
JOURNAL_RESERVE_BYTES = 128 * 1024   # about 400 records: every destroy of a campaign and its approval, many times
FROM_JOURNAL = " [kept in the fallback journal while the database could not be written]"

_COLUMNS = "at, kind, action, target, approval_id, granted_by, outcome, campaign_id, operator, host, pid"


def _record(row: Row) -> AuditRecord:
    return AuditRecord(
        at=row["at"],
        kind=AuditKind(row["kind"]),
        action=Action(row["action"]),
        target=row["target"],
        approval_id=row["approval_id"],
        granted_by=row["granted_by"],
        outcome=row["outcome"],
        campaign_id=row["campaign_id"],
        by=by.short if (by := writer_of(row)) is not None else None,
    )


def journal_path(db_path: Path) -> Path:
    """The fallback journal beside a database file."""
    return db_path.with_name(db_path.name + JOURNAL_SUFFIX)


class AuditTables(StoreBase):
    """The append-only audit log."""

    _journal_told = False

    async def record_audit(self, record: AuditRecord) -> None:
        """Append one audit record (the ``AuditSink`` protocol); into the fallback journal when the database
        refuses it. Raises StoreError only when neither could keep it."""
        try:
            async with self._write(f"record the audit of {record.action} on {record.target}") as tx:
                await tx.execute(
                    f"INSERT INTO audit_log ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (record.at, record.kind, str(record.action), record.target, record.approval_id,
                     record.granted_by, record.outcome, record.campaign_id, *self._writer_params()),
                )
        except StoreError as exc:
            self._journal(record, exc)

    def _journal(self, record: AuditRecord, cause: StoreError) -> None:
        path = journal_path(self._path)
        fields = {"at": record.at, "kind": record.kind, "action": str(record.action), "target": record.target,
                  "approval_id": record.approval_id, "granted_by": record.granted_by, "outcome": record.outcome,
                  "campaign_id": record.campaign_id}
        line = json.dumps({k: self._redactor(v) if isinstance(v, str) else v for k, v in fields.items()}) + "\n"
        try:
            _append_in_reserve(path, line.encode("utf-8"))
        except OSError as exc:
            raise StoreError(f"{cause.message}; the fallback journal {path} could not be written either: "
                             f"{exc.strerror}", title="Database error") from cause
        if not self._journal_told:
            self._journal_told = True
            log.warning("audit records go to the fallback journal %s until the next start (%s)", path,
                        cause.message)

    async def replay_audit_journal(self) -> int:
        """Fold the fallback journal into the audit log (records already there are not added twice) and remove
        it; returns how many records it added. A torn last line (a process killed mid-write) is skipped."""
        path = journal_path(self._path)
        try:
            text = path.read_bytes().split(b"\0", 1)[0].decode("utf-8", errors="replace")
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise StoreError(f"could not read the audit journal {path}: {exc.strerror}") from exc
        records = []
        for raw in text.splitlines():
            try:
                data = json.loads(raw)
                records.append(AuditRecord(at=float(data["at"]), kind=AuditKind(data["kind"]),
                                           action=Action(data["action"]), target=str(data["target"]),
                                           approval_id=data["approval_id"], granted_by=data["granted_by"],
                                           outcome=str(data["outcome"]) + FROM_JOURNAL,
                                           campaign_id=data["campaign_id"]))
            except (ValueError, KeyError, TypeError):
                continue
        added = 0
        async with self._write(f"fold the audit journal {path} into the audit log") as tx:
            for r in records:
                known = await tx.fetchone(
                    "SELECT 1 FROM audit_log WHERE at = ? AND kind = ? AND action = ? AND target = ? "
                    "AND approval_id IS ? AND outcome = ?",
                    (r.at, r.kind, str(r.action), r.target, r.approval_id, r.outcome))
                if known is None:
                    added += 1
                    await tx.execute(
                        f"INSERT INTO audit_log ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (r.at, r.kind, str(r.action), r.target, r.approval_id, r.granted_by, r.outcome,
                         r.campaign_id, *self._writer_params()))
        if text:
            reserve_journal(path, fresh=True)
        return added


    async def audit_records(self, *, campaign_id: str | None = None) -> list[AuditRecord]:
        """The audit log of one campaign, or all of it (``campaign_id=None``), in the order written."""
        where, params = ("WHERE campaign_id = ?", (campaign_id,)) if campaign_id is not None else ("", ())
        rows = await self._read("read the audit log", f"SELECT {_COLUMNS} FROM audit_log {where} ORDER BY id", params)
        return [_record(row) for row in rows]

    async def latest_audit_records(self, *, limit: int) -> list[AuditRecord]:
        """The ``limit`` most recent records of the whole audit log, newest first (the console's Activity view)."""
        rows = await self._read("read the latest audit records",
                                f"SELECT {_COLUMNS} FROM audit_log ORDER BY id DESC LIMIT ?", (limit,))
        return [_record(row) for row in rows]


def reserve_journal(path: Path, *, fresh: bool = False) -> None:
    """Make sure the journal's space exists (zeros); ``fresh`` clears what it held (folded into the log)."""
    if not fresh and path.exists():
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | (os.O_TRUNC if fresh else 0), 0o600)
    try:
        os.write(fd, b"\0" * JOURNAL_RESERVE_BYTES)
        os.fsync(fd)
    finally:
        os.close(fd)


def _append_in_reserve(path: Path, data: bytes) -> None:
    """Write ``data`` after the journal's last record: over its reserved zeros while they last, then past them."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        held = b""
        while chunk := os.pread(fd, 65536, len(held)):
            held += chunk
        end = held.find(b"\0")
        os.pwrite(fd, data, len(held) if end < 0 else end)
        os.fsync(fd)
    finally:
        os.close(fd)
