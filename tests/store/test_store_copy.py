"""Copying an operator's SQLite store into a team's PostgreSQL store (``vastui migrate``): every table, ids and
writers kept, a second operator's store renumbered where the team's ids are taken, a store copied twice refused,
and the copy atomic."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from vastui.approval import Action, AuditKind, AuditRecord
from vastui.cli import main
from vastui.errors import StoreError
from vastui.store import GpuSample, OfferSnapshot, PostgresStore, ProgressRecord, RunStatus, SqliteStore, Store
from vastui.store.copying import COPIED_TABLES, copy_store
from vastui.store.records import CampaignOwner


async def seed(store: Store, campaign_id: str, *, instance_id: int, operator: str, runs: int = 2) -> None:
    """A row in every table, as a finished campaign of ``operator`` leaves them (and a watch's round and alert)."""
    store.act_as(operator, host=f"{operator}-laptop")
    digest = f"sha256:{campaign_id}"
    await store.save_manifest(digest=digest, name="resnet", toml_text="name = 'resnet'\n", stored_at=1.0)
    await store.save_manifest(digest="sha256:shared", name="common", toml_text="name = 'common'\n", stored_at=1.0)
    await store.create_campaign(campaign_id=campaign_id, manifest_digest=digest, created_at=1.0, phase="planned",
                                budget_usd=5.0)
    await store.claim_campaign(CampaignOwner(campaign_id=campaign_id, host=f"{operator}-laptop", pid=4242,
                                             pid_started="99", claimed_at=1.5, operator=operator))
    await store.set_campaign_phase(campaign_id=campaign_id, phase="measuring", at=2.0)
    await store.save_offer_snapshots([OfferSnapshot(campaign_id=campaign_id, offer_id=instance_id + 7, machine_id=70,
                                                    gpu_name="RTX 4090", num_gpus=1, dph_usd=0.4, taken_at=2.0,
                                                    snapshot_json='{"id": 1}')])
    intent = await store.record_intent(campaign_id=campaign_id, offer_id=instance_id + 7, label=f"vastui-{campaign_id}",
                                       at=2.5, deadline_at=99.0)
    await store.bind_intent(intent_id=intent.intent_id, instance_id=instance_id, at=3.0)
    await store.record_transition(instance_id=instance_id, state="running", at=3.5)
    for index in range(runs):
        run = await store.start_run(campaign_id=campaign_id, instance_id=instance_id, machine_id=70,
                                    gpu_name="RTX 4090", num_gpus=1, workload_digest=digest, variant_json="{}",
                                    started_at=4.0 + index)
        await store.add_measurements(
            progress=[ProgressRecord(run_id=run.run_id, at=4.5 + index, units_done=64.0 * (index + 1),
                                     units_accepted=64.0, latencies_s=(0.5,))],
            samples=[GpuSample(run_id=run.run_id, at=4.5 + index, gpu_index=0, util_pct=90.0 + index)])
        await store.finish_run(run_id=run.run_id, status=RunStatus.OK, at=5.0 + index,
                               throughput_units_per_s=100.0 + index)
    await store.record_bad_host(machine_id=71, reason="wrong output", evidence_json="{}", recorded_at=6.0, expires_at=None,
                                campaign_id=campaign_id)
    await store.record_audit(AuditRecord(at=6.5, kind=AuditKind.CALL, action=Action.DESTROY_INSTANCE,
                                         target=f"instance:{instance_id}", approval_id="a1", granted_by=None, outcome="ok",
                                         campaign_id=campaign_id))
    await store.record_gone(instance_id=instance_id, missed_listing_at=(7.0, 7.5), at=7.5)
    await store.keep_request(campaign_id=campaign_id, request_id="r1", action="create_instance", target="offer:1",
                             summary="rent", cost_cap_usd=0.5, gpu_name="RTX 4090", num_gpus=1, dph_usd=0.4,
                             deadline_at=99.0, asked_at=2.2, expires_at=902.2)
    await store.save_screening(campaign_id=campaign_id, workload_digest=digest, screened_at=5.5,
                               json_text='{"profile": {}}')
    await store.save_receipt(campaign_id=campaign_id, created_at=8.0, json_text="{}", markdown_text="# receipt")
    await store.finish_campaign(campaign_id=campaign_id, phase="finished", at=8.0)
    await store.record_watch_round(checked_at=9.0, verdict="clean", listed_count=0, leaked_count=0, unowned_count=0,
                                   burn_usd_per_h=0.0, credit_usd=10.0, error=None)
    await store.raise_alert(alert_key=f"leak:{instance_id}", kind="leak", text="a leak", instance_id=instance_id,
                            at=9.0, quiet_s=60.0)


def sqlite_rows(path: Path, table: str, order: str) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]


async def store_rows(store: Store, table: str, order: str) -> list[dict[str, Any]]:
    rows = await store._read(f"read {table}", f"SELECT * FROM {table} ORDER BY {order}")
    return [{name: row[name] for name in row.keys()} for row in rows]


def order_of(table: str, key: str | None) -> str:
    return key or {"manifests": "digest", "destroy_evidence": "instance_id"}.get(table, "campaign_id")


def test_the_copy_names_every_table_of_the_schema(tmp_path: Path) -> None:
    async def tables() -> set[str]:
        async with await SqliteStore.open(tmp_path / "s.sqlite3"):
            pass
        with closing(sqlite3.connect(tmp_path / "s.sqlite3")) as conn:
            return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {table for table, _ in COPIED_TABLES} == asyncio.run(tables())


async def test_a_store_copied_into_an_empty_team_store_keeps_every_row_and_id(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "ana.sqlite3"
    async with await SqliteStore.open(path) as source:
        await seed(source, "cana", instance_id=9001, operator="ana")
        async with await PostgresStore.open(pg_url, anchor=tmp_path / "anchor") as team:
            report = await copy_store(source, team)
            assert report.renumbered == []
            for table, key in COPIED_TABLES:
                assert await store_rows(team, table, order_of(table, key)) == sqlite_rows(
                    path, table, order_of(table, key)), table
            # the team's next rows take ids after the copied ones (the server's sequences moved on)
            run = await team.start_run(campaign_id="cana", instance_id=None, machine_id=1, gpu_name="A", num_gpus=1,
                                       workload_digest="sha256:cana", variant_json="{}", started_at=10.0)
            assert run.run_id == max(r["run_id"] for r in sqlite_rows(path, "runs", "run_id")) + 1
            [campaign] = [c for c in await team.campaigns() if c.campaign_id == "cana"]
            assert campaign.by is not None and (campaign.by.operator, campaign.by.host) == ("ana", "ana-laptop")
            assert (await team.campaign_owners())["cana"].operator == "ana"
    assert report.copied["gpu_samples"] == 2 and report.total == sum(
        len(sqlite_rows(path, table, order_of(table, key))) for table, key in COPIED_TABLES)


async def test_a_second_operators_store_is_renumbered_where_ids_are_taken_and_its_runs_keep_their_samples(
        tmp_path: Path, pg_url: str) -> None:
    async with await PostgresStore.open(pg_url, anchor=tmp_path / "anchor") as team:
        for name, campaign_id, instance_id in (("ana", "cana", 9001), ("bo", "cbo", 9002)):
            async with await SqliteStore.open(tmp_path / f"{name}.sqlite3") as source:
                await seed(source, campaign_id, instance_id=instance_id, operator=name, runs=2 + (name == "bo"))
                report = await copy_store(source, team)
        assert "runs" in report.renumbered and report.already_there == {"manifests": 1}   # the shared one
        bo_runs = await team.runs(campaign_id="cbo")
        assert len(bo_runs) == 3 and len({r.run_id for r in await team.runs(campaign_id="cana")} |
                                         {r.run_id for r in bo_runs}) == 5
        for run in bo_runs:
            [sample] = await team.gpu_samples(run_id=run.run_id)
            assert sample.util_pct == 90.0 + (run.started_at - 4.0)   # each sample still with its own run
        owned = {intent.instance_id: intent.campaign_id for intent in
                 [await team.intent_for_instance(9001), await team.intent_for_instance(9002)] if intent is not None}
        assert owned == {9001: "cana", 9002: "cbo"}


async def test_a_store_copied_twice_is_refused_and_nothing_is_written(tmp_path: Path, pg_url: str) -> None:
    async with await SqliteStore.open(tmp_path / "ana.sqlite3") as source:
        await seed(source, "cana", instance_id=9001, operator="ana")
        async with await PostgresStore.open(pg_url, anchor=tmp_path / "anchor") as team:
            await copy_store(source, team)
            before = await store_rows(team, "audit_log", "id")
            with pytest.raises(StoreError, match="already holds campaign\\(s\\) cana"):
                await copy_store(source, team)
            assert await store_rows(team, "audit_log", "id") == before


async def test_a_copy_that_fails_part_way_leaves_the_target_as_it_was(tmp_path: Path, pg_url: str) -> None:
    async with await PostgresStore.open(pg_url, anchor=tmp_path / "anchor") as team:
        async with await SqliteStore.open(tmp_path / "ana.sqlite3") as source:
            await seed(source, "cana", instance_id=9001, operator="ana")
            await copy_store(source, team)
        async with await SqliteStore.open(tmp_path / "bo.sqlite3") as source:
            await seed(source, "cbo", instance_id=9001, operator="bo")   # claims the same instance: refused late
            with pytest.raises(StoreError):
                await copy_store(source, team)
        assert {c.campaign_id for c in await team.campaigns()} == {"cana"}
        assert await team.runs(campaign_id="cbo") == []


async def test_vastui_migrate_copies_the_operators_store_and_never_prints_the_password(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.sqlite3"
    async with await SqliteStore.open(path) as source:
        await seed(source, "cmine", instance_id=9003, operator="cy")
    user, _, rest = pg_url.partition("@")   # the test server trusts its socket: any password is taken
    with_password = f"{user.rstrip(':')}:hunter2-secret@{rest}"
    assert "hunter2-secret" in with_password
    code = await asyncio.to_thread(main, ["migrate", "--from", f"sqlite:{path}", "--to", with_password])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "copied" in out.out and "row ids kept" in out.out and "hunter2" not in out.out + out.err
    async with await PostgresStore.open(pg_url, anchor=tmp_path / "anchor") as team:
        assert [c.campaign_id for c in await team.campaigns()] == ["cmine"]
    again = await asyncio.to_thread(main, ["migrate", "--from", f"sqlite:{path}", "--to", with_password])
    assert again == 1 and "copied before" in capsys.readouterr().err
