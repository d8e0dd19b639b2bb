"""``teardown()`` against the simulated marketplace in-process (ASGI transport, one FakeClock for market and client):
an instance counts as gone only when two successive *complete* listings miss it; a failed or partial listing counts
for nothing either way; what stays listed, or was refused, is reported and makes the teardown unclean."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.campaign.campaign_support import ScriptedMarket
from tests.fakes import FakeClock
from vastui.campaign.approvers import PlanApprover, PlanTerms, RefusingApprover
from vastui.campaign.cleanup import LISTINGS_TO_CONFIRM, PATIENCE_S, TeardownReport, teardown
from vastui.config import Secret
from vastui.events import Event, EventBus, InstanceConfirmedGone, InstanceDestroyed, Notice, Subscription
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.sim.turns import LifecycleOdds
from vastui.vast.client import HttpVastClient

KEY = "cleanup-sim-key-8080"
CAMPAIGN = "cclean"
POLL_S = 5.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    market = build_market(11, clock=clock, api_key=KEY, n_machines=80)
    market.lifecycle_odds = LifecycleOdds.never()   # the rentals are set-up here; the teardown is under test
    return market


@pytest.fixture
def wire(market: Market, clock: FakeClock) -> ScriptedMarket:
    return ScriptedMarket(httpx.ASGITransport(app=create_app(market)), clock)


@pytest.fixture
async def client(wire: ScriptedMarket, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    # One attempt per request, so that one scripted answer is one listing's fate (no retry hides it).
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock, transport=wire,
                              max_attempts=1) as c:
        yield c


@pytest.fixture
def approver(clock: FakeClock) -> PlanApprover:
    return PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset(), max_spend_usd=0.0), clock=clock)


async def rent(market: Market, count: int, *, label: str = f"vastui-{CAMPAIGN}-c1-0") -> list[int]:
    """Rent ``count`` free machines straight on the market (setup, not under test)."""
    ids = []
    for _ in range(count):
        machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
        body = {"image": "pytorch/pytorch", "disk": 10, "label": label, "runtype": "ssh"}
        ids.append((await market.create_instance(machine.offer_id, CreateRequest.from_body(body))).id)
    return ids


def drain(queue: Subscription) -> list[Event]:
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    return events


async def run_teardown(client: HttpVastClient, approver: PlanApprover | RefusingApprover, clock: FakeClock,
                       bus: EventBus, ids: list[int], *, max_rounds: int = 10,
                       patience_s: float = PATIENCE_S) -> TeardownReport:
    return await teardown(client=client, approver=approver, clock=clock, bus=bus, instance_ids=ids,
                          campaign_id=CAMPAIGN, reason="campaign finished", poll_s=POLL_S, max_rounds=max_rounds,
                          patience_s=patience_s)


# --- two successive complete listings --------------------------------------------------------------------------


async def test_instances_are_gone_after_two_successive_complete_listings_miss_them(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    ids = await rent(market, 2)
    for i in ids:
        approver.mark_owned(i)
    bus = EventBus()
    queue = bus.subscribe()

    report = await run_teardown(client, approver, clock, bus, ids)

    assert report.is_clean and not report.still_alive and not report.refused and not report.errors
    assert sorted(wire.destroys) == sorted(ids) and market.instance_ids() == []
    assert LISTINGS_TO_CONFIRM == 2 and len(wire.listings) == 2
    first, second = (at for at, _ in wire.listings)
    assert second - first == POLL_S
    assert {g.instance_id: g.missed_listing_at for g in report.gone} == {i: (first, second) for i in ids}
    events = drain(queue)
    destroyed = [e for e in events if isinstance(e, InstanceDestroyed)]
    gone = [e for e in events if isinstance(e, InstanceConfirmedGone)]
    assert sorted(e.instance_id for e in destroyed) == sorted(ids)
    assert sorted(e.instance_id for e in gone) == sorted(ids)
    assert all(e.listings_missed == 2 and e.at == second and e.campaign_id == CAMPAIGN for e in gone)
    assert events.index(gone[0]) > max(events.index(e) for e in destroyed)


async def test_one_complete_listing_that_misses_an_instance_is_not_proof(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    ids = await rent(market, 1)
    approver.mark_owned(ids[0])
    bus = EventBus()
    queue = bus.subscribe()

    report = await run_teardown(client, approver, clock, bus, ids, max_rounds=1)

    assert market.instance_ids() == []  # it is in fact destroyed...
    assert report.gone == [] and report.still_alive == ids and not report.is_clean  # ...but not yet proven
    assert len(wire.listings) == 1
    assert not [e for e in drain(queue) if isinstance(e, InstanceConfirmedGone)]


@pytest.mark.parametrize("failure", ["drop", "503", "lose-page-2"])
async def test_an_incomplete_listing_in_between_neither_counts_nor_resets(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover, clock: FakeClock,
        failure: str) -> None:
    await rent(market, 30, label="someone-elses-work")  # the campaign's instance lands on the listing's 2nd page
    ids = await rent(market, 1)
    approver.mark_owned(ids[0])
    wire.script = ["ok", failure, "ok"]
    bus = EventBus()
    queue = bus.subscribe()

    report = await run_teardown(client, approver, clock, bus, ids)

    assert [what for _, what in wire.listings] == ["ok", failure, "ok"]
    (first, _), (between, _), (third, _) = wire.listings
    assert report.is_clean and [g.instance_id for g in report.gone] == ids
    # the miss before the failure was kept; a listing's time is when its last page came (pages are paced to the
    # v1 listing's 1.0 s, docs/api-notes.md §1.4), so it is no sooner than its first page went out
    missed = report.gone[0].missed_listing_at
    assert len(missed) == 2 and first <= missed[0] < between <= third <= missed[1], (missed, first, between, third)
    assert between not in report.gone[0].missed_listing_at
    notices = [e for e in drain(queue) if isinstance(e, Notice)]
    assert any(n.level == "warning" and "incomplete" in n.text and between <= n.at < third for n in notices)
    assert len(market.instance_ids()) == 30  # nobody else's instance was touched


@pytest.mark.parametrize("failure", ["drop", "503", "lose-page-2"])
async def test_an_incomplete_listing_does_not_count_as_a_miss(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover, clock: FakeClock,
        failure: str) -> None:
    await rent(market, 30, label="someone-elses-work")
    ids = await rent(market, 1)
    approver.mark_owned(ids[0])
    wire.script = ["ok", failure]

    report = await run_teardown(client, approver, clock, EventBus(), ids, max_rounds=2, patience_s=0.0)

    assert [what for _, what in wire.listings] == ["ok", failure]  # no patience: the failure ends it
    assert report.gone == [] and report.still_alive == ids and not report.is_clean


# --- what stays -----------------------------------------------------------------------------------------------


async def test_an_instance_seen_again_after_a_miss_starts_its_count_over(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    ids = await rent(market, 1)
    approver.mark_owned(ids[0])
    wire.swallowed = {ids[0]}  # the destroy never lands
    wire.hidden = {ids[0]}
    wire.script = ["hide", "ok", "hide"]  # missed, listed again, missed: never two misses in a row
    bus = EventBus()
    queue = bus.subscribe()

    report = await run_teardown(client, approver, clock, bus, ids, max_rounds=3)

    assert [what for _, what in wire.listings] == ["hide", "ok", "hide"]
    assert report.gone == [] and report.still_alive == ids and not report.is_clean
    assert market.instance_ids() == ids
    assert not [e for e in drain(queue) if isinstance(e, InstanceConfirmedGone)]


async def test_an_instance_that_stays_listed_is_reported_still_alive(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    stays, goes = await rent(market, 2)
    approver.mark_owned(stays)
    approver.mark_owned(goes)
    wire.swallowed = {stays}
    started = clock.now()

    report = await run_teardown(client, approver, clock, EventBus(), [stays, goes], max_rounds=4)

    assert report.still_alive == [stays] and [g.instance_id for g in report.gone] == [goes]
    assert not report.is_clean and report.refused == []
    assert market.instance_ids() == [stays]
    assert len(wire.listings) == 4 and clock.now() - started >= 3 * POLL_S  # it kept looking, on the given clock


async def test_an_instance_already_gone_is_proven_gone_by_the_listings(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    ids = await rent(market, 1)
    await market.destroy(ids)  # gone before teardown: the destroy answers 404
    approver.mark_owned(ids[0])

    report = await run_teardown(client, approver, clock, EventBus(), ids)

    assert wire.destroys == ids and report.errors == []
    assert report.is_clean and [g.instance_id for g in report.gone] == ids
    assert len(report.gone[0].missed_listing_at) == 2


# --- refusals ------------------------------------------------------------------------------------------------


async def test_a_destroy_the_approver_refuses_is_not_sent_and_makes_teardown_unclean(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    owned, foreign = await rent(market, 2)
    approver.mark_owned(owned)  # the approver only destroys what the campaign created
    bus = EventBus()
    queue = bus.subscribe()

    report = await run_teardown(client, approver, clock, bus, [owned, foreign])

    assert report.refused == [foreign] and not report.is_clean
    assert [g.instance_id for g in report.gone] == [owned] and report.still_alive == []
    assert wire.destroys == [owned] and market.instance_ids() == [foreign]
    destroyed = [e.instance_id for e in drain(queue) if isinstance(e, InstanceDestroyed)]
    assert destroyed == [owned]


async def test_a_destroy_for_another_campaign_is_refused(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    ids = await rent(market, 1)
    approver.mark_owned(ids[0])
    report = await teardown(client=client, approver=approver, clock=clock, bus=EventBus(), instance_ids=ids,
                            campaign_id="some-other-campaign", reason="x", poll_s=POLL_S, max_rounds=3)
    assert report.refused == ids and not report.is_clean and wire.destroys == []
    assert market.instance_ids() == ids


async def test_a_refusing_approver_leaves_every_instance_refused_without_aborting_teardown(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, clock: FakeClock) -> None:
    """``RefusingApprover`` (no terminal, no approving flag) refuses every request; teardown must still go through
    every id and report each one refused, not stop at the first with an exception."""
    ids = await rent(market, 2)
    report = await run_teardown(client, RefusingApprover("no terminal to ask"), clock, EventBus(), ids)
    assert sorted(report.refused) == sorted(ids) and not report.is_clean
    assert wire.destroys == [] and market.instance_ids() == sorted(ids)


async def test_a_lost_destroy_is_sent_again_while_the_instance_stays_listed(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    (instance_id,) = await rent(market, 1)
    approver.mark_owned(instance_id)
    wire.swallowed = {instance_id}  # the first destroy is answered "success" but never lands
    forward = wire.handle_async_request

    async def second_destroy_lands(request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE" and wire.destroys.count(instance_id) >= 1:
            wire.swallowed.clear()
        return await forward(request)

    wire.handle_async_request = second_destroy_lands  # type: ignore[method-assign]
    report = await run_teardown(client, approver, clock, EventBus(), [instance_id], max_rounds=10)

    assert wire.destroys.count(instance_id) == 2, "a destroy that did not land must be sent again, once"
    assert [g.instance_id for g in report.gone] == [instance_id] and report.is_clean
    assert market.instance_ids() == []


async def test_an_id_destroyed_before_teardown_is_proven_gone_without_a_second_destroy(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    earlier, now_ = await rent(market, 2)
    approver.mark_owned(earlier)
    approver.mark_owned(now_)
    await market.destroy([earlier])  # its candidate's destroy went out (and landed) during the campaign
    sent_at = clock.now()

    report = await teardown(client=client, approver=approver, clock=clock, bus=EventBus(),
                            instance_ids=[earlier, now_], campaign_id=CAMPAIGN, reason="campaign finished",
                            poll_s=POLL_S, max_rounds=10, already_destroyed=[earlier])

    assert wire.destroys == [now_], "no second destroy (nor its approval) for an id destroyed before"
    assert sorted(g.instance_id for g in report.gone) == [earlier, now_] and report.is_clean
    assert all(len(g.missed_listing_at) == 2 for g in report.gone)
    assert report.destroy_sent_at == {now_: sent_at}


async def test_an_id_destroyed_before_but_still_listed_gets_its_destroy_sent_again(
        market: Market, client: HttpVastClient, wire: ScriptedMarket, approver: PlanApprover,
        clock: FakeClock) -> None:
    (instance_id,) = await rent(market, 1)
    approver.mark_owned(instance_id)  # "destroyed before", but that destroy never landed: it still bills

    report = await teardown(client=client, approver=approver, clock=clock, bus=EventBus(),
                            instance_ids=[instance_id], campaign_id=CAMPAIGN, reason="campaign finished",
                            poll_s=POLL_S, max_rounds=10, already_destroyed=[instance_id])

    assert wire.destroys == [instance_id] and market.instance_ids() == []
    assert [g.instance_id for g in report.gone] == [instance_id] and report.is_clean
    assert list(report.destroy_sent_at) == [instance_id]
