"""An API outage during the teardown (issue 11, defect 5): the teardown keeps trying, waiting longer each time, for
as long as instances may exist — the patience is real time, so a scaled clock does not shrink it — and when it
does give up, the receipt and the CLI say exactly what to run."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.campaign.campaign_support import ScriptedMarket, receipt_with
from tests.fakes import FakeClock
from vastui.bench.receipt import render_json, render_markdown
from vastui.campaign.approvers import PlanApprover, PlanTerms
from vastui.campaign.cleanup import MAX_OUTAGE_WAIT_S, PATIENCE_S, teardown
from vastui.campaign.session import CampaignServices, resume_campaign
from vastui.cli.campaign import resume_hint
from vastui.clock import Clock, ScaledClock, clock_scale
from vastui.config import Redactor, Secret
from vastui.events import EventBus
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.turns import LifecycleOdds
from vastui.store import SqliteStore
from vastui.vast.client import HttpVastClient

KEY = "outage-sim-key"
CAMPAIGN = "coutage"
POLL_S = 5.0
OLD_GIVE_UP_S = 60 * POLL_S   # the teardown used to stop after 60 listings, failed or not: about five minutes


@pytest.fixture
def market() -> Market:
    # this market's clock stands still (the client's moves): every realism rule but the rate limits, which measured
    # on a clock that never moves would refuse every second request for ever; its rentals are set-up, not under test
    market = build_market(11, clock=FakeClock(), api_key=KEY, n_machines=60,
                          realism=dataclasses.replace(Realism.vast(), rate_limits=False))
    market.lifecycle_odds = LifecycleOdds.never()
    return market


async def _rent(market: Market, count: int) -> list[int]:
    ids = []
    for index in range(count):
        machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
        body = {"image": "pytorch/pytorch", "disk": 10, "label": f"vastui-{CAMPAIGN}-c{index + 1}-0", "runtype": "ssh"}
        ids.append((await market.create_instance(machine.offer_id, CreateRequest.from_body(body))).id)
    return ids


@pytest.fixture
async def wired(market: Market) -> AsyncIterator[tuple[ScriptedMarket, HttpVastClient, FakeClock]]:
    clock = FakeClock()
    wire = ScriptedMarket(httpx.ASGITransport(app=create_app(market)), clock)
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock, transport=wire) as client:
        yield wire, client, clock


def _approver(clock: Clock, ids: list[int]) -> PlanApprover:
    approver = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset(), max_spend_usd=0.0), clock=clock)
    for instance_id in ids:
        approver.mark_owned(instance_id)
    return approver


async def test_the_teardown_outlasts_an_api_outage_and_proves_every_instance_gone(
        market: Market, wired: tuple[ScriptedMarket, HttpVastClient, FakeClock]) -> None:
    wire, client, clock = wired
    ids = await _rent(market, 4)
    started = clock.now()
    wire.down_until = started + 4 * OLD_GIVE_UP_S  # down from the first destroy on, for twenty minutes

    report = await teardown(client=client, approver=_approver(clock, ids), clock=clock, bus=EventBus(),
                            instance_ids=ids, campaign_id=CAMPAIGN, reason="campaign finished", poll_s=POLL_S)

    assert wire.refused_in_outage > 0
    assert report.is_clean and sorted(g.instance_id for g in report.gone) == ids
    assert market.instance_ids() == []  # the destroys that failed in the outage were sent again once it ended
    outage_waits = [s for s in clock.sleeps if s >= POLL_S]
    assert max(outage_waits) == MAX_OUTAGE_WAIT_S  # it backed off while the API was down...
    assert outage_waits.count(MAX_OUTAGE_WAIT_S) < 4 * OLD_GIVE_UP_S / MAX_OUTAGE_WAIT_S + 1  # ...never beyond 60 s


async def test_an_outage_past_the_patience_ends_the_teardown_with_what_may_still_exist(
        market: Market, wired: tuple[ScriptedMarket, HttpVastClient, FakeClock]) -> None:
    wire, client, clock = wired
    ids = await _rent(market, 2)
    started = clock.now()
    wire.down_until = started + 10 * PATIENCE_S

    report = await teardown(client=client, approver=_approver(clock, ids), clock=clock, bus=EventBus(),
                            instance_ids=ids, campaign_id=CAMPAIGN, reason="campaign finished", poll_s=POLL_S,
                            patience_s=600.0)

    assert not report.is_clean and report.still_alive == ids and report.gone == []
    assert 600.0 <= clock.now() - started <= 600.0 + 2 * MAX_OUTAGE_WAIT_S  # bounded: it did give up
    assert any("gave up" in e for e in report.errors)
    assert market.instance_ids() == ids


async def test_a_scaled_clock_does_not_shrink_the_patience(market: Market) -> None:
    """The defect as found: against a simulator on a scaled clock (x10,000 here), an outage of a fraction of a
    wall second is hours of clock time; the teardown gave up after its 60 quick listings."""
    clock = ScaledClock(scale=10_000.0)
    assert clock_scale(clock) == 10_000.0 and clock_scale(FakeClock()) == 1.0
    wire = ScriptedMarket(httpx.ASGITransport(app=create_app(market)), clock)
    ids = await _rent(market, 2)
    wire.down_until = clock.now() + 3 * PATIENCE_S  # 1.5 clock hours, about half a second of wall time
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock, transport=wire) as client:
        report = await teardown(client=client, approver=_approver(clock, ids), clock=clock, bus=EventBus(),
                                instance_ids=ids, campaign_id=CAMPAIGN, reason="campaign finished", poll_s=POLL_S)
    assert wire.refused_in_outage > 0
    assert report.is_clean and market.instance_ids() == []


def test_a_failed_teardown_names_the_command_that_cleans_up() -> None:
    receipt = receipt_with(leaked=(30000007,))
    args = argparse.Namespace(url="http://127.0.0.1:8765", db="/tmp/vastui run/store.sqlite3", time_scale=300.0,
                              api_key="secret-key-never-printed")
    hint = resume_hint(receipt, args)
    assert hint is not None and "30000007" in hint
    assert hint.endswith(f"Run: vastui campaign resume {receipt.campaign_id} --url http://127.0.0.1:8765 "
                         "--db '/tmp/vastui run/store.sqlite3' --time-scale 300")
    assert "secret-key-never-printed" not in hint
    assert f"`vastui campaign resume {receipt.campaign_id}`" in render_markdown(receipt)
    assert json.loads(render_json(receipt))["resume_command"] == f"vastui campaign resume {receipt.campaign_id}"


def test_a_passed_teardown_asks_for_nothing() -> None:
    receipt = receipt_with(leaked=())
    assert resume_hint(receipt, argparse.Namespace(url=None, db=None, time_scale=1.0)) is None
    assert "campaign resume" not in render_markdown(receipt)
    assert json.loads(render_json(receipt))["resume_command"] is None


async def test_resume_waits_out_an_outage_for_its_listing_then_cleans_up(
        market: Market, wired: tuple[ScriptedMarket, HttpVastClient, FakeClock], tmp_path: Path) -> None:
    """Resume needs one complete listing to reconcile against; it used to give up after five tries (25 s)."""
    wire, client, clock = wired
    ids = await _rent(market, 2)
    store = await SqliteStore.open(tmp_path / "state.sqlite3")
    try:
        await store.save_manifest(digest="sha256:" + "0" * 64, name="w", toml_text="[workload]\n", stored_at=1.0)
        await store.create_campaign(campaign_id=CAMPAIGN, manifest_digest="sha256:" + "0" * 64,
                                    created_at=clock.now(), phase="measuring")
        wire.down_until = clock.now() + OLD_GIVE_UP_S  # five minutes without an answer
        services = CampaignServices(market=client, executor=None, store=store, clock=clock,  # type: ignore[arg-type]
                            bus=EventBus(), redact=Redactor([]), teardown_poll_s=POLL_S)
        report = await resume_campaign(services, campaign_id=CAMPAIGN, approver=_approver(clock, ids))
    finally:
        await store.close()
    assert wire.refused_in_outage > 0
    assert sorted(report.found_instance_ids) == ids and report.teardown.is_clean
    assert market.instance_ids() == []
