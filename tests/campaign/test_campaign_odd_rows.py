"""One odd row in an instance listing never hides the rest of it.

The row is reported (by its id where readable) and the other rows are used: teardown still proves the readable
instances gone. A row whose id is readable keeps that id present, so nothing is proven gone for it; a row with no
readable id could be any instance, so the listing is incomplete. Against the simulator in-process (ASGI), with a
transport that spoils rows of the marketplace's real answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.campaign.approvers import PlanApprover, PlanTerms
from vastui.campaign.cleanup import teardown
from vastui.campaign.watch import LeakVerdict, find_leaks
from vastui.config import Secret
from vastui.events import EventBus, Notice
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.store import SqliteStore
from vastui.vast.client import HttpVastClient

KEY = "odd-rows-key-0099"
CAMPAIGN = "codd"
LISTING = "/api/v1/instances/"
DESTROY = re.compile(r"^/api/v0/instances/(\d+)/$")
Row = dict[str, object]


class Spoiler(httpx.AsyncBaseTransport):
    """Forwards to the simulator; every listing row passes through ``spoil`` (which may change it in place or
    replace it); DELETEs of ids in ``swallowed`` are answered "success" without reaching the simulator."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.spoil: Callable[[Row], object] = lambda row: row
        self.swallowed: set[int] = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        match = DESTROY.match(request.url.path)
        if request.method == "DELETE" and match and int(match.group(1)) in self.swallowed:
            return httpx.Response(200, json={"success": True}, request=request)
        response = await self.inner.handle_async_request(request)
        if request.method != "GET" or request.url.path != LISTING:
            return response
        body = json.loads(await response.aread())
        body["instances"] = [self.spoil(row) for row in body["instances"]]
        return httpx.Response(response.status_code, json=body, request=request)


def spoil_field(instance_id: int, **fields: object) -> Callable[[Row], object]:
    def spoil(row: Row) -> object:
        return {**row, **fields} if row["id"] == instance_id else row
    return spoil


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    return build_market(11, clock=clock, api_key=KEY, n_machines=40)


@pytest.fixture
def wire(market: Market) -> Spoiler:
    return Spoiler(httpx.ASGITransport(app=create_app(market)))


@pytest.fixture
async def client(wire: Spoiler, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock, transport=wire,
                              max_attempts=1) as c:
        yield c


async def rent(market: Market, count: int) -> list[int]:
    ids = []
    for n in range(count):
        machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
        body = {"image": "pytorch/pytorch", "disk": 10, "label": f"vastui-{CAMPAIGN}-c{n}-0", "runtype": "ssh"}
        ids.append((await market.create_instance(machine.offer_id, CreateRequest.from_body(body))).id)
    return ids


def approver(clock: FakeClock, ids: list[int]) -> PlanApprover:
    plan = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset(), max_spend_usd=0.0), clock=clock)
    for instance_id in ids:
        plan.mark_owned(instance_id)
    return plan


@pytest.mark.parametrize("odd", [{"dph_total": "cheap"}, {"ports": [1, 2]}, {"actual_status": 7},
                                 {"num_gpus": {"n": 1}}, {"ssh_port": True}])
async def test_an_odd_row_is_reported_by_its_id_and_the_others_are_used(market: Market, wire: Spoiler,
                                                                         client: HttpVastClient,
                                                                         odd: Row) -> None:
    a, b, c = await rent(market, 3)
    wire.spoil = spoil_field(b, **odd)
    listing = await client.list_instances()
    assert listing.is_complete, listing.error
    assert sorted(i.id for i in listing.instances) == [a, c]
    assert [row.id for row in listing.unreadable] == [b] and listing.unreadable[0].label == f"vastui-{CAMPAIGN}-c1-0"
    assert next(iter(odd)) in listing.unreadable[0].reason and "\n" not in listing.unreadable[0].reason
    assert listing.present_ids == {a, b, c}


@pytest.mark.parametrize("nameless", [lambda row: "junk", lambda row: None, lambda row: [row],
                                      lambda row: {**row, "id": "eleven"}, lambda row: {**row, "id": None}])
async def test_a_row_without_a_readable_id_makes_the_listing_incomplete(
        market: Market, wire: Spoiler, client: HttpVastClient, nameless: Callable[[Row], object]) -> None:
    a, b = await rent(market, 2)
    wire.spoil = lambda row: nameless(row) if row["id"] == b else row
    listing = await client.list_instances()
    assert not listing.is_complete and "readable id" in (listing.error or "")
    assert [i.id for i in listing.instances] == [a]  # the readable row is still used


async def test_teardown_proves_the_readable_instances_gone_and_not_the_odd_one(
        market: Market, wire: Spoiler, client: HttpVastClient, clock: FakeClock) -> None:
    a, b, c = await rent(market, 3)
    wire.spoil = spoil_field(b, dph_total="cheap", label=f"vastui-{CAMPAIGN}-c1-0")
    wire.swallowed = {b}  # b's destroy never lands: it is still listed, and its row is still odd
    bus = EventBus()
    notices = bus.subscribe()
    report = await teardown(client=client, approver=approver(clock, [a, b, c]), clock=clock, bus=bus,
                            instance_ids=[a, b, c], campaign_id=CAMPAIGN, reason="test", poll_s=5.0, max_rounds=6)
    assert sorted(g.instance_id for g in report.gone) == [a, c]
    assert report.still_alive == [b] and not report.is_clean
    assert market.instance_ids() == [b]
    texts = []
    while not notices.empty():
        event = notices.get_nowait()
        if isinstance(event, Notice):
            texts.append(event.text)
    assert any(f"instance {b}: unreadable row" in text for text in texts), texts


async def test_an_odd_row_whose_instance_is_gone_from_the_market_is_still_not_proven_gone(
        market: Market, wire: Spoiler, client: HttpVastClient, clock: FakeClock) -> None:
    (a,) = await rent(market, 1)
    wire.spoil = spoil_field(a, start_date="yesterday")
    wire.swallowed = {a}
    report = await teardown(client=client, approver=approver(clock, [a]), clock=clock, bus=EventBus(),
                            instance_ids=[a], campaign_id=CAMPAIGN, reason="test", poll_s=5.0, max_rounds=4)
    assert report.gone == [] and report.still_alive == [a]


async def test_the_leak_watcher_judges_the_other_rows_and_says_unknown(market: Market, wire: Spoiler,
                                                                       client: HttpVastClient, clock: FakeClock,
                                                                       tmp_path: Path) -> None:
    a, b = await rent(market, 2)
    wire.spoil = spoil_field(b, gpu_util="busy")
    async with await SqliteStore.open(tmp_path / "v.sqlite3") as store:
        report = await find_leaks(market=client, store=store, clock=clock)
    assert report.verdict is LeakVerdict.UNKNOWN
    assert {leak.instance_id for leak in report.leaks} == {a}  # a is judged (no campaign owns it)
    assert f"instance {b}: unreadable row" in report.summary() and report.listed_count == 2
