"""The console's data sources without a console: each fetch against the simulator over HTTP (ASGI) and a real
SQLite store, joined as the views show it — and the module loads without Textual."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.tui.console_support import grant, rent_outside, sim_parts
from vastui.approval import Action, offer_target
from vastui.campaign.adhoc import AdhocOwner
from vastui.errors import VastuiError
from vastui.store import RunStatus
from vastui.tui import sources
from vastui.vast.query import build_search_body

DIGEST = "w" * 16


def test_the_sources_load_without_textual() -> None:
    code = ("import sys, vastui.tui.sources; "
            "print(sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


async def test_instances_are_joined_with_the_store_intents(tmp_path: Path) -> None:
    async with sim_parts(tmp_path) as sim:
        offer = (await sim.client.search_offers("num_gpus=1", order="dph+", limit=1))[0]
        owner = AdhocOwner(store=sim.store, clock=sim.clock)
        intent = await owner.intend(offer_id=offer.id, machine_id=offer.machine_id, dph_usd=offer.dph_total,
                                    deadline_at=sim.clock.now() + 3600.0)
        made = await sim.client.create_instance(offer_id=offer.id, image="pytorch/pytorch", disk_gib=10,
                                                label=intent.label,
                                                approval=grant(Action.CREATE_INSTANCE, offer_target(offer.id)))
        await owner.bound(intent, made.instance_id)
        outside = await rent_outside(sim, label="my-notebook", skip=1)

        page = await sources.instance_page(market=sim.client, store=sim.store, clock=sim.clock)
        assert {i.id for i in page.listing.instances} == {made.instance_id, outside}
        assert set(page.intents) == {made.instance_id}
        assert page.intents[made.instance_id].campaign_id == owner.campaign_id
        bare = await sources.instance_page(market=sim.client, store=None, clock=sim.clock)
        assert bare.intents == {} and len(bare.listing.instances) == 2

        # the ad-hoc campaign that owns the rental is not a past campaign with a receipt
        receipts = await sources.receipt_page(store=sim.store, clock=sim.clock)
        assert receipts.campaigns == ()


async def test_offers_carry_measurements_and_bad_hosts_of_the_latest_workload(tmp_path: Path) -> None:
    async with sim_parts(tmp_path) as sim:
        first, second = (await sim.client.search_offers("", order="dph+", limit=200))[:2]
        now = sim.clock.now()
        store = sim.store
        await store.save_manifest(digest=DIGEST, name="resnet", toml_text="x = 1", stored_at=now - 7200)
        await store.create_campaign(campaign_id="c1", manifest_digest=DIGEST, created_at=now - 7200, phase="done")
        run = await store.start_run(campaign_id="c1", instance_id=None, machine_id=first.machine_id,
                                    gpu_name=first.gpu_name, num_gpus=first.num_gpus, workload_digest=DIGEST,
                                    variant_json="{}", started_at=now - 3700)
        await store.finish_run(run_id=run.run_id, status=RunStatus.OK, at=now - 3600, throughput_units_per_s=100.0)
        await store.record_bad_host(machine_id=second.machine_id, reason="wrong outputs", evidence_json="{}",
                                    recorded_at=now, expires_at=now + 86400)
        body = build_search_body("", order="dph+", limit=200)

        page = await sources.offer_page(market=sim.client, store=store, body=body, workload_digest=None,
                                        clock=sim.clock)
        assert {first.id, second.id} <= {o.id for o in page.offers}
        assert list(page.knowledge) == [(first.machine_id, first.gpu_name, first.num_gpus)]
        assert page.knowledge[(first.machine_id, first.gpu_name, first.num_gpus)].workload_digest == DIGEST
        assert set(page.bad_hosts) == {second.machine_id}
        other = await sources.offer_page(market=sim.client, store=store, body=body, workload_digest="x" * 16,
                                         clock=sim.clock)
        assert other.knowledge == {} and set(other.bad_hosts) == {second.machine_id}
        bare = await sources.offer_page(market=sim.client, store=None, body=body, workload_digest=None,
                                        clock=sim.clock)
        assert bare.knowledge == {} and bare.bad_hosts == {}

        receipts = await sources.receipt_page(store=store, clock=sim.clock)
        assert [(c.campaign_id, c.receipt_markdown) for c in receipts.campaigns] == [("c1", None)]


async def test_account_leaks_and_activity(tmp_path: Path) -> None:
    async with sim_parts(tmp_path) as sim:
        account = await sources.account_page(market=sim.client, store=sim.store)
        assert account.user.credit == 1000.0 and account.transfers == ()
        assert (await sources.account_page(market=sim.client, store=None)).transfers is None

        leaked = await rent_outside(sim, label="vastui-ghost-c1-1")
        mine = await rent_outside(sim, label="my-notebook", skip=1)
        report = await sources.leak_report(market=sim.client, store=sim.store, clock=sim.clock)
        assert report.is_complete
        assert [leak.instance_id for leak in report.leaked] == [leaked]
        assert [leak.instance_id for leak in report.unowned] == [mine]

        # the client audits into the store: the two rents are in the activity, newest first
        activity = await sources.activity_page(store=sim.store, clock=sim.clock)
        creates = [r for r in activity.records if r.action is Action.CREATE_INSTANCE]
        assert creates and [r.at for r in activity.records] == sorted((r.at for r in activity.records), reverse=True)


async def test_a_leak_check_that_listed_nothing_fails_the_source(tmp_path: Path) -> None:
    async with sim_parts(tmp_path, max_attempts=1) as sim:
        assert sim.transport is not None
        sim.transport.fault = lambda request: 500 if "/instances" in request.url.path else None
        with pytest.raises(VastuiError) as caught:
            await sources.leak_report(market=sim.client, store=sim.store, clock=sim.clock)
        assert caught.value.title == "Leaks unknown" and caught.value.message.startswith("leak check: ")
        sim.transport.fault = lambda request: None
        assert (await sources.leak_report(market=sim.client, store=sim.store, clock=sim.clock)).is_complete
