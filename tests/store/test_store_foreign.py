"""Another program's SQLite file given as ``--db`` is refused before anything is written to it: no vastui tables
added, no switch to WAL. vastui's own files, new or old, still open."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from vastui.approval import Action, AuditKind, AuditRecord, instance_target
from vastui.cli import main
from vastui.errors import StoreError
from vastui.store import SqliteStore


def foreign_db(path: Path, *, user_version: int = 0) -> Path:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org')")
        conn.execute(f"PRAGMA user_version = {user_version}")
        conn.commit()
    return path


def tables_and_mode(path: Path) -> tuple[list[str], str]:
    with closing(sqlite3.connect(path)) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return tables, mode


@pytest.mark.parametrize("user_version", [0, 3, 42])
async def test_another_programs_database_is_refused_and_left_alone(tmp_path: Path, user_version: int) -> None:
    path = foreign_db(tmp_path / "places.sqlite", user_version=user_version)
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        await SqliteStore.open(path)
    assert str(path) in str(caught.value) and "not a vastui database" in str(caught.value)
    assert "moz_places" in str(caught.value) and "\n" not in str(caught.value)
    assert tables_and_mode(path) == (["moz_places"], "delete")
    assert path.read_bytes() == before


async def test_new_and_existing_vastui_files_still_open(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    record = AuditRecord(at=1.0, kind=AuditKind.CALL, action=Action.DESTROY_INSTANCE, target=instance_target(7),
                         approval_id="a1", granted_by="operator", outcome="ok")
    async with await SqliteStore.open(path) as store:
        await store.record_audit(record)
    async with await SqliteStore.open(path) as store:  # reopening our own: what it holds is still there
        assert await store.audit_records() == [record]
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()  # an empty SQLite file (0 bytes) is fine too: it becomes a vastui store
    async with await SqliteStore.open(empty) as store:
        await store.record_audit(record)
        assert await store.audit_records() == [record]
    tables, mode = tables_and_mode(empty)
    assert "audit_log" in tables and mode == "wal"


def test_leaks_with_another_programs_db_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = foreign_db(tmp_path / "places.sqlite")
    assert main(["leaks", "--db", str(path), "--url", "http://127.0.0.1:9", "--api-key", "k" * 16]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a vastui database" in err
    assert tables_and_mode(path)[0] == ["moz_places"]
