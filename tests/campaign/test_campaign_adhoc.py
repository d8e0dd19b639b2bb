"""What the console rents by hand belongs to its ad-hoc campaign (``campaign/adhoc.py``) and is judged by the leak
watcher's usual rules: owned while the console that rented it runs and its deadline holds; a leak when that console
is gone, when the deadline passes, or when the ad-hoc campaign finished with it still listed. Real SQLite store,
the simulator over ASGI, the client as the console uses it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.approval import Action, Approval, ApprovalRequest, offer_target
from vastui.campaign.adhoc import ADHOC_PHASE, AdhocOwner, is_adhoc
from vastui.campaign.owner import current_owner
from vastui.campaign.watch import LeakReason, campaign_of_label, find_leaks
from vastui.config import Secret
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.store import SqliteStore
from vastui.vast.client import HttpVastClient

KEY = "adhoc-sim-key-7777"
HOUR = 3600.0
CAP_H = 24.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    return build_market(11, clock=clock, api_key=KEY, n_machines=60)


@pytest.fixture
async def client(market: Market, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=httpx.ASGITransport(app=create_app(market))) as c:
        yield c


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with await SqliteStore.open(tmp_path / "adhoc.sqlite3") as s:
        yield s


async def rent_by_hand(owner: AdhocOwner, client: HttpVastClient, clock: FakeClock) -> int:
    """The console's rent: the intent first, the create under its label, then the binding."""
    offer = (await client.search_offers("num_gpus=1", order="dph+", limit=1))[0]
    intent = await owner.intend(offer_id=offer.id, machine_id=offer.machine_id, dph_usd=offer.dph_total,
                                deadline_at=clock.now() + CAP_H * HOUR)
    approval = Approval(ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(offer.id),
                                        summary="test rent"), granted_by="test", granted_at=clock.now())
    made = await client.create_instance(offer_id=offer.id, image="pytorch/pytorch", disk_gib=10, label=intent.label,
                                        approval=approval)
    await owner.bound(intent, made.instance_id)
    return made.instance_id


async def test_a_hand_rented_instance_is_owned_while_its_console_runs_and_leaks_when_it_dies(
        client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    owner = AdhocOwner(store=store, clock=clock)
    iid = await rent_by_hand(owner, client, clock)
    assert owner.campaign_id is not None
    listed = (await client.list_instances()).find(iid)
    assert listed is not None and campaign_of_label(listed.label) == owner.campaign_id   # a vastui label
    campaign = await store.campaign(owner.campaign_id)
    assert campaign is not None and is_adhoc(campaign) and campaign.phase == ADHOC_PHASE

    report = await find_leaks(market=client, store=store, clock=clock)
    assert report.is_complete and report.leaks == ()          # owned: neither unowned nor leaked

    dead = subprocess.Popen([sys.executable, "-c", "pass"])  # the console that rented it dies without a word
    dead.wait()
    await store.claim_campaign(replace(current_owner(owner.campaign_id, at=clock.now()), pid=dead.pid))
    report = await find_leaks(market=client, store=store, clock=clock)
    assert [(leak.instance_id, leak.reason) for leak in report.leaked] == [(iid, LeakReason.CAMPAIGN_CRASHED)]
    assert "rented it by hand is gone" in report.leaked[0].detail


async def test_left_billing_on_purpose_it_stays_owned_until_its_deadline(
        client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    owner = AdhocOwner(store=store, clock=clock)
    iid = await rent_by_hand(owner, client, clock)
    await owner.close(leaving_billing=True)    # quit: leave it billing
    assert owner.campaign_id not in await store.campaign_owners()
    clock.advance((CAP_H - 1) * HOUR)
    assert (await find_leaks(market=client, store=store, clock=clock)).leaks == ()
    clock.advance(2 * HOUR)
    report = await find_leaks(market=client, store=store, clock=clock)
    assert [(leak.instance_id, leak.reason) for leak in report.leaked] == [(iid, LeakReason.PAST_DEADLINE)]


async def test_an_instance_still_listed_after_its_console_finished_the_ad_hoc_campaign_is_a_leak(
        client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    owner = AdhocOwner(store=store, clock=clock)
    iid = await rent_by_hand(owner, client, clock)
    await owner.close(leaving_billing=False)   # the console believed nothing billed
    report = await find_leaks(market=client, store=store, clock=clock)
    assert [(leak.instance_id, leak.reason) for leak in report.leaked] == [(iid, LeakReason.CAMPAIGN_FINISHED)]
