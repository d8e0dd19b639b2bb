"""What only the PostgreSQL backend has: one schema with SQLite's, a server that may hold another program's tables
or refuse the connection, the write lock shared by processes, and the password kept out of every message."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from tests.store.store_support import DIGEST
from vastui.config import without_password
from vastui.errors import StoreError
from vastui.store import SCHEMA_VERSION, PostgresStore, SqliteStore
from vastui.store.postgres_store import to_postgres


async def _sqlite_columns(path: Path) -> dict[str, dict[str, tuple[str, bool]]]:
    async with await SqliteStore.open(path) as store:
        tables = [r[0] for r in await store._read("list", "SELECT name FROM sqlite_master WHERE type = 'table'")]
        out: dict[str, dict[str, tuple[str, bool]]] = {}
        for table in tables:
            rows = await store._read("columns", f"PRAGMA table_info({table})")
            # a primary key is NOT NULL in PostgreSQL whatever SQLite's table_info says of it
            out[table] = {r["name"]: (str(r["type"]), bool(r["notnull"]) or bool(r["pk"])) for r in rows}
        return out


def _postgres_columns(url: str) -> dict[str, dict[str, tuple[str, bool]]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
                            "WHERE table_schema = current_schema() AND table_name <> 'vastui_schema'").fetchall()
    out: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, data_type, nullable in rows:
        out.setdefault(table, {})[column] = (data_type, nullable == "NO")
    return out


SAME_TYPE = {"TEXT": "text", "INTEGER": "bigint", "REAL": "double precision"}


async def test_both_backends_build_the_same_tables_and_columns(pg_url: str, tmp_path: Path) -> None:
    async with await PostgresStore.open(pg_url, anchor=tmp_path / "team") as store:
        assert await store.schema_version() == SCHEMA_VERSION
    lite, pg = await _sqlite_columns(tmp_path / "lite.sqlite3"), _postgres_columns(pg_url)
    assert set(pg) == set(lite) and len(lite) >= 16
    for table, columns in lite.items():
        assert set(pg[table]) == set(columns), table
        for name, (kind, not_null) in columns.items():
            assert pg[table][name] == (SAME_TYPE[kind], not_null), (table, name)


async def test_a_second_open_finds_the_schema_done_and_two_at_once_migrate_once(pg_url: str, tmp_path: Path) -> None:
    first, second = await asyncio.gather(PostgresStore.open(pg_url, anchor=tmp_path / "a"),
                                         PostgresStore.open(pg_url, anchor=tmp_path / "b"))
    try:
        assert await first.schema_version() == await second.schema_version() == SCHEMA_VERSION
        with psycopg.connect(pg_url) as conn:
            versions = [r[0] for r in conn.execute("SELECT version FROM vastui_schema ORDER BY version")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))   # each step once
        # one process's write is the other's to read: a shared store
        await first.save_manifest(digest=DIGEST, name="resnet", toml_text="", stored_at=1.0)
        await second.create_campaign(campaign_id="c1", manifest_digest=DIGEST, created_at=2.0, phase="plan")
        assert [c.campaign_id for c in await first.campaigns()] == ["c1"]
    finally:
        await first.close()
        await second.close()


async def test_writes_from_two_processes_take_turns(pg_url: str, tmp_path: Path) -> None:
    a = await PostgresStore.open(pg_url, anchor=tmp_path / "a")
    b = await PostgresStore.open(pg_url, anchor=tmp_path / "b")
    try:
        await a.save_manifest(digest=DIGEST, name="resnet", toml_text="", stored_at=1.0)
        await a.create_campaign(campaign_id="c1", manifest_digest=DIGEST, created_at=1.0, phase="plan")

        async def phases(store: PostgresStore, tag: str) -> None:
            for i in range(15):
                await store.set_campaign_phase(campaign_id="c1", phase=f"{tag}{i}", at=float(i))

        await asyncio.gather(phases(a, "a"), phases(b, "b"))
        assert len(await a.campaign_phases("c1")) == 31
    finally:
        await a.close()
        await b.close()


async def test_another_program_s_database_is_refused_and_left_alone(pg_url: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY)")
    with pytest.raises(StoreError, match="not a vastui database \\(tables: orders\\)"):
        await PostgresStore.open(pg_url, anchor=tmp_path / "team")
    with psycopg.connect(pg_url) as conn:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables "
                                             "WHERE table_schema = current_schema()")]
    assert tables == ["orders"]


async def test_a_server_that_cannot_be_reached_is_named_without_its_password(tmp_path: Path) -> None:
    url = f"postgresql://team:hunter2-not-shown@/vastui?host={tmp_path / 'no-server-here'}"
    with pytest.raises(StoreError, match="could not connect to the database postgresql://.*@/vastui.*no-server-here"
                       ) as caught:
        await PostgresStore.open(url, anchor=tmp_path / "team")
    assert "hunter2-not-shown" not in str(caught.value) and "hunter2-not-shown" not in str(caught.value.__cause__)


def test_the_sql_the_tables_write_reads_the_same_on_postgres() -> None:
    assert to_postgres("SELECT 1 FROM t WHERE a = ? AND b IS ? AND c IS NOT ?") == (
        "SELECT 1 FROM t WHERE a = %s AND b IS NOT DISTINCT FROM %s AND c IS DISTINCT FROM %s")
    assert to_postgres("INSERT OR IGNORE INTO m (d) VALUES (?)") == "INSERT INTO m (d) VALUES (%s) ON CONFLICT DO NOTHING"
    assert to_postgres("SELECT '100%' FROM t") == "SELECT '100%%' FROM t"
    assert without_password("postgresql://u:p@db.example:5432/team") == "postgresql://u@db.example:5432/team"
    assert without_password("postgresql://db.example/team") == "postgresql://db.example/team"
