"""Migrations: a database written at every older schema version opens with the current code, its data intact."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path

import aiosqlite
import pytest

from tests.store.store_support import integrity, offer_snapshots
from vastui.approval import Action
from vastui.errors import StoreError
from vastui.store import SCHEMA_VERSION, IntentStatus, RunStatus, SqliteStore
from vastui.store.migrations import MIGRATIONS, Migration, migrate, schema_version
from vastui.store.records import CampaignOwner


async def _seed_v1(conn: aiosqlite.Connection) -> None:
    """Rows as the v1 code wrote them (bad_hosts had no expiry column yet)."""
    statements: list[tuple[str, tuple[object, ...]]] = [
        ("INSERT INTO manifests VALUES ('d1', 'resnet', 'name = \"resnet\"', 1.0)", ()),
        ("INSERT INTO campaigns VALUES ('c1', 'd1', 1.0, 'measure', 2.0, 20.0, 7201.0, NULL)", ()),
        ("INSERT INTO campaign_phases (campaign_id, phase, at, note) VALUES ('c1', 'plan', 1.0, NULL)", ()),
        ("INSERT INTO offer_snapshots (campaign_id, offer_id, machine_id, gpu_name, num_gpus, dph_usd, taken_at, "
         "snapshot_json) VALUES ('c1', 501, 7, 'RTX 4090', 1, 0.4, 1.5, '{\"id\": 501}')", ()),
        ("INSERT INTO intents (campaign_id, offer_id, label, created_at, status, instance_id, bound_at) "
         "VALUES ('c1', 501, 'vastui:c1', 2.0, 'bound', 9001, 2.5)", ()),
        ("INSERT INTO instance_transitions (instance_id, state, at, detail) VALUES (9001, 'running', 3.0, NULL)", ()),
        ("INSERT INTO runs (campaign_id, instance_id, machine_id, gpu_name, num_gpus, workload_digest, variant_json, "
         "started_at, status, throughput_units_per_s, finished_at) "
         "VALUES ('c1', 9001, 7, 'RTX 4090', 1, 'd1', '{}', 4.0, 'ok', 812.5, 9.0)", ()),
        ("INSERT INTO gpu_samples (run_id, at, gpu_index, util_pct) VALUES (1, 5.0, 0, 97.0)", ()),
        ("INSERT INTO progress (run_id, at, units_done, units_accepted, latencies_json) "
         "VALUES (1, 5.0, 64.0, 64.0, '[0.5]')", ()),
        ("INSERT INTO bad_hosts (machine_id, reason, evidence_json, recorded_at, campaign_id) "
         "VALUES (8, 'wrong output', '{}', 6.0, 'c1')", ()),
        ("INSERT INTO audit_log (at, kind, action, target, approval_id, granted_by, outcome, campaign_id) "
         "VALUES (2.0, 'call', 'create_instance', 'offer:501', 'a1', NULL, 'created 9001', 'c1')", ()),
        ("INSERT INTO receipts (campaign_id, created_at, json_text, markdown_text) VALUES ('c1', 9.5, '{}', '# r')",
         ()),
    ]
    await conn.execute("BEGIN")
    for sql, params in statements:
        await conn.execute(sql, params)
    await conn.execute("COMMIT")


async def _seed_v2(conn: aiosqlite.Connection) -> None:
    """Rows as the v2 code wrote them: v1's (its bad host's expiry column left NULL: a flag that never lapses)."""
    await _seed_v1(conn)


async def _seed_v3(conn: aiosqlite.Connection) -> None:
    """Rows as the v3 code wrote them: v2's, and the process that ran campaign c1."""
    await _seed_v2(conn)
    await conn.execute("INSERT INTO campaign_owners VALUES ('c1', 'h0', 7, '', 3.0)")


async def _seed_v4(conn: aiosqlite.Connection) -> None:
    """Rows as the v4 code wrote them: v3's, and an approval request of c1 its broker kept and nobody answered."""
    await _seed_v3(conn)
    await conn.execute(
        "INSERT INTO kept_requests (campaign_id, request_id, action, target, summary, asked_at, expires_at, state) "
        "VALUES ('c1', 'r9', 'destroy_instance', 'instance:9001', 'destroy 9001', 4.0, 904.0, 'pending')")


async def _seed_v5(conn: aiosqlite.Connection) -> None:
    """Rows as the v5 code wrote them: v4's, and the screening campaign c1 kept (no writer on any row yet)."""
    await _seed_v4(conn)
    await conn.execute("INSERT INTO screenings (campaign_id, workload_digest, screened_at, json_text) "
                       "VALUES ('c1', 'd1', 3.5, '{\"profile\": {}}')")


async def _seed_v6(conn: aiosqlite.Connection) -> None:
    """The rows the v6 code added to v5's (``_build_old`` writes those first): a ruled-out intent naming its writer."""
    await conn.execute("INSERT INTO intents (campaign_id, offer_id, label, status, created_at, resolved_at, operator, "
                       "host, pid) VALUES ('c1', 503, 'vastui:c1:v6', 'ruled_out', 5.0, 5.5, 'bo', 'ws-1', 42)")


# One seed per older non-empty schema version: adding a migration step without a seed for the version it
# leaves behind fails test_every_old_version_has_a_seed. Seeds up to v5 write every row (by position: the tables
# had no added columns yet); from v6 on a seed adds its rows to the previous version's, migrated.
LAST_WHOLE_SEED = 5
SEEDS: dict[int, Callable[[aiosqlite.Connection], Awaitable[None]]] = {
    1: _seed_v1, 2: _seed_v2, 3: _seed_v3, 4: _seed_v4, 5: _seed_v5, 6: _seed_v6}


async def _build_old(path: Path, version: int) -> None:
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await conn.execute("PRAGMA foreign_keys = ON")
        whole = min(version, LAST_WHOLE_SEED)
        assert await migrate(conn, target=whole) == whole
        if whole in SEEDS:
            await SEEDS[whole](conn)
        for later in range(LAST_WHOLE_SEED + 1, version + 1):
            assert await migrate(conn, target=later) == later
            if later in SEEDS:
                await SEEDS[later](conn)


def _schema(path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name").fetchall()
    return [(str(name), " ".join(str(sql).split())) for name, sql in rows]


def test_every_old_version_has_a_seed() -> None:
    assert set(SEEDS) == set(range(1, SCHEMA_VERSION))
    assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))


@pytest.mark.parametrize("version", range(SCHEMA_VERSION + 1))
async def test_each_step_lands_on_its_version(tmp_path: Path, version: int) -> None:
    path = tmp_path / "old.sqlite3"
    await _build_old(path, version)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


@pytest.mark.parametrize("version", range(SCHEMA_VERSION))
async def test_an_old_database_migrates_to_the_same_schema_as_a_new_one(tmp_path: Path, version: int) -> None:
    old, fresh = tmp_path / "old.sqlite3", tmp_path / "fresh.sqlite3"
    await _build_old(old, version)
    async with await SqliteStore.open(old) as store:
        assert await store.schema_version() == SCHEMA_VERSION
    async with await SqliteStore.open(fresh):
        pass
    assert _schema(old) == _schema(fresh)


@pytest.mark.parametrize("version", sorted(SEEDS))
async def test_data_written_by_an_old_version_survives(tmp_path: Path, version: int) -> None:
    path = tmp_path / "old.sqlite3"
    await _build_old(path, version)
    async with await SqliteStore.open(path) as store:
        assert integrity(path) == ["ok"]
        campaign = await store.campaign("c1")
        assert campaign is not None and campaign.phase == "measure" and campaign.is_active
        assert (await store.manifest("d1")) is not None
        [snapshot] = offer_snapshots(store, campaign_id="c1")
        assert snapshot.snapshot_json == '{"id": 501}'
        [owned] = await store.owned_instances(campaign_id="c1")
        assert owned.intent.status is IntentStatus.BOUND and owned.state == "running"
        [host] = await store.host_knowledge(workload_digest="d1")
        best = host.best
        assert best is not None and best.status is RunStatus.OK and best.throughput_units_per_s == 812.5
        assert [s.util_pct for s in await store.gpu_samples(run_id=best.run_id)] == [97.0]
        assert [p.latencies_s for p in await store.progress(run_id=best.run_id)] == [(0.5,)]
        [bad] = await store.bad_hosts(now=1e12)
        assert (bad.machine_id, bad.expires_at, bad.is_expired) == (8, None, False)  # v1 flags never lapse
        assert [b.machine_id for b in await store.active_bad_hosts(now=1e12)] == [8]
        [audit] = await store.audit_records(campaign_id="c1")
        assert audit.action is Action.CREATE_INSTANCE and audit.outcome == "created 9001"
        assert audit.by is None and campaign.by is None and owned.intent.by is None   # written before v6: unknown
        assert (await store.latest_receipt("c1")) is not None
        # and the migrated database takes new writes of the current shape
        entry = await store.record_bad_host(machine_id=9, reason="offline", evidence_json="{}", recorded_at=10.0,
                                            expires_at=20.0)
        assert entry.expires_at == 20.0
        owner = CampaignOwner(campaign_id="c1", host="h", pid=1, pid_started="", claimed_at=11.0)
        await store.claim_campaign(owner)
        assert await store.campaign_owners() == {"c1": owner}
        kept = await store.keep_request(campaign_id="c1", request_id="r1", action="create_instance",
                                        target="offer:501", summary="rent 501", cost_cap_usd=0.5, gpu_name="RTX 4090",
                                        num_gpus=1, dph_usd=0.4, deadline_at=7200.0, asked_at=12.0, expires_at=912.0)
        assert [k.request_id for k in await store.kept_requests("c1")] == ["r9"] * (version >= 4) + ["r1"]
        assert kept.request_id == "r1"
        screening = await store.save_screening(campaign_id="c1", workload_digest="d1", screened_at=13.0,
                                               json_text='{"profile": {}}')
        assert await store.latest_screening(workload_digest="d1") == screening
        store.act_as("ana")
        intent = await store.record_intent(campaign_id="c1", offer_id=502, label="vastui:c1", at=14.0)
        assert intent.by is not None and (intent.by.operator, intent.by.pid) == ("ana", os.getpid())
        alert = await store.raise_alert(alert_key="leak:9001", kind="leak", text="9001 leaked", instance_id=9001,
                                        at=15.0, quiet_s=60.0)
        assert alert is not None and [a.row_id for a in await store.undelivered_alerts()] == [alert.row_id]


async def test_a_failing_step_is_rolled_back_whole(tmp_path: Path) -> None:
    steps = (
        MIGRATIONS[0],
        Migration(2, "broken", ("CREATE TABLE half_done (x INTEGER)", "ALTER TABLE no_such_table ADD COLUMN y")),
    )
    path = tmp_path / "broken.sqlite3"
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        with pytest.raises(StoreError, match="schema version 2 \\(broken\\)"):
            await migrate(conn, steps=steps)
        assert await schema_version(conn) == 1
        tables = {row[0] for row in await conn.execute_fetchall("SELECT name FROM sqlite_master")}
        assert "campaigns" in tables and "half_done" not in tables


async def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer than this vastui knows") as caught:
        await SqliteStore.open(path)
    assert caught.value.title == "Database too new"
