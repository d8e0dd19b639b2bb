"""Destroy before paperwork: an audit record the database refuses goes to a fallback journal beside it, and the next
open folds the journal into the audit log — once, with secrets still redacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vastui.approval import Action, AuditKind, AuditRecord
from vastui.errors import StoreError
from vastui.store import SqliteStore
from vastui.store.audit import FROM_JOURNAL, journal_path

SECRET = "sk-journal-secret-0001"


def _record(n: int, outcome: str = "ok") -> AuditRecord:
    return AuditRecord(at=1000.0 + n, kind=AuditKind.CALL, action=Action.DESTROY_INSTANCE, target=f"instance:{n}",
                       approval_id=f"a{n}", granted_by="own-instance rule", outcome=outcome, campaign_id="c1")


async def test_a_record_the_closed_store_refuses_is_journaled_and_folded_in_at_the_next_open(db_path: Path) -> None:
    store = await SqliteStore.open(db_path)
    store.register_secret(SECRET)
    await store.record_audit(_record(1))
    await store.close()
    await store.record_audit(_record(2, outcome=f"ok, key {SECRET}"))   # the store is closed: into the journal
    await store.record_audit(_record(3))
    lines = journal_path(db_path).read_bytes().split(b"\0", 1)[0].decode().splitlines()
    assert [json.loads(line)["target"] for line in lines] == ["instance:2", "instance:3"]
    assert SECRET not in journal_path(db_path).read_text()

    async with await SqliteStore.open(db_path) as reopened:
        records = await reopened.audit_records()
    assert [r.target for r in records] == ["instance:1", "instance:2", "instance:3"]
    assert records[0].outcome == "ok" and all(r.outcome.endswith(FROM_JOURNAL) for r in records[1:])
    assert SECRET not in records[1].outcome and "<redacted>" in records[1].outcome
    assert set(journal_path(db_path).read_bytes()) == {0}   # emptied, its space still reserved
    async with await SqliteStore.open(db_path) as again:
        assert len(await again.audit_records()) == 3   # folded in once


async def test_a_journal_left_by_a_crash_mid_fold_adds_nothing_twice(db_path: Path) -> None:
    store = await SqliteStore.open(db_path)
    await store.close()
    await store.record_audit(_record(1))
    saved = journal_path(db_path).read_bytes().split(b"\0", 1)[0]
    async with await SqliteStore.open(db_path):
        pass
    journal_path(db_path).write_bytes(saved + b'{"at": 1002.0, "kind": "ca')   # the same line again, and a torn one
    async with await SqliteStore.open(db_path) as reopened:
        assert [r.target for r in await reopened.audit_records()] == ["instance:1"]


async def test_when_the_journal_cannot_be_written_either_the_store_says_so(db_path: Path) -> None:
    store = await SqliteStore.open(db_path)
    await store.close()
    journal_path(db_path).unlink()
    journal_path(db_path).mkdir()   # a folder where the journal should be: no file can be appended there
    with pytest.raises(StoreError, match="fallback journal .* could not be written either"):
        await store.record_audit(_record(1))
