"""A create whose answer is lost, and whose reconciling listing fails too: the instance may be billing, so its worst
case stays reserved against the budget, and the final teardown finds it by label and destroys it.

The engine runs against the simulated marketplace in-process (ASGI transport, one FakeClock for market, client and
engine); the transport drops exactly the first create's reply and fails the listing that follows it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.fakes import FakeClock
from vastui.bench.manifest import Manifest, load_manifest
from vastui.campaign.approvers import PlanApprover, PlanTerms
from vastui.campaign.candidate import NotRented
from vastui.campaign.engine import CampaignEngine
from vastui.campaign.plan import Plan, build_plan
from vastui.config import Secret
from vastui.errors import RemoteError
from vastui.events import EventBus
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.store import SqliteStore
from vastui.vast.client import HttpVastClient

KEY = "uncertain-sim-key-4242"
CAMPAIGN = "cunsure"


class LosesFirstCreate(httpx.AsyncBaseTransport):
    """Forwards to the simulator, except: the first create is applied and then its reply is lost, and the instance
    listing right after it fails in transit (so the client cannot tell whether it rented)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.creates: list[str] = []
        self._fail_next_listing = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "PUT" and path.startswith("/api/v0/asks/"):
            self.creates.append(path)
            response = await self.inner.handle_async_request(request)
            if len(self.creates) == 1:
                await response.aread()
                self._fail_next_listing = True
                raise httpx.ReadError("connection reset while reading the create's reply", request=request)
            return response
        if request.method == "GET" and path == "/api/v1/instances/" and self._fail_next_listing:
            self._fail_next_listing = False
            raise httpx.ConnectError("connection refused", request=request)
        return await self.inner.handle_async_request(request)


class HostsNeverAnswer:
    """Stands in for SSH to the hosts, which this test never needs to reach: a rent it should not have made
    fails at the SSH gate instead of hanging."""

    def connect(self, host: str, port: int, *, deadline_s: float) -> Any:
        raise RemoteError(f"{host}:{port} never answered")

    def connect_first(self, endpoints: Sequence[tuple[str, int]], *, deadline_s: float) -> Any:
        raise RemoteError(f"{endpoints} never answered")

    def forget_host(self, host: str, port: int) -> int:
        return 0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    return build_market(11, clock=clock, api_key=KEY, n_machines=80)


@pytest.fixture
def wire(market: Market) -> LosesFirstCreate:
    return LosesFirstCreate(httpx.ASGITransport(app=create_app(market)))


@pytest.fixture
async def client(wire: LosesFirstCreate, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock, transport=wire,
                              max_attempts=1) as c:
        yield c


async def _plan(client: HttpVastClient, manifest: Manifest) -> Plan:
    offers = await client.search_offers(manifest.shortlist.query, limit=400)
    return build_plan(campaign_id=CAMPAIGN, manifest=manifest, offers=offers, knowledge=(), bad_hosts=())


async def test_a_possibly_created_instance_keeps_its_budget_and_is_found_by_label(
        tmp_path: Path, market: Market, wire: LosesFirstCreate, client: HttpVastClient, clock: FakeClock) -> None:
    manifest = load_manifest(fast_manifest(tmp_path / "m", max_candidates=2))
    first, second = (await _plan(client, manifest)).candidates[:2]
    # One instance at a time, and a budget with room for the first's worst case but not for both.
    budget = first.max_spend_usd + 0.5 * second.max_spend_usd
    manifest = replace(manifest, budget=replace(manifest.budget, max_usd=budget, max_instances=1))
    plan = replace(await _plan(client, manifest), candidates=(first, second), reserves=())
    approver = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=plan.offer_ids, max_spend_usd=budget),
                            clock=clock)
    async with await SqliteStore.open(tmp_path / "store.sqlite3") as store:
        await store.save_manifest(digest=manifest.digest, name="fast", toml_text="", stored_at=clock.now())
        await store.create_campaign(campaign_id=CAMPAIGN, manifest_digest=manifest.digest, created_at=clock.now(),
                                    phase="planned", budget_usd=budget, deadline_at=clock.now() + 3600.0)
        engine = CampaignEngine(plan=plan, manifest=manifest, market=client, executor=HostsNeverAnswer(),
                                store=store, approver=approver, clock=clock, bus=EventBus(),
                                on_owned=approver.mark_owned, poll_s=10.0, teardown_poll_s=5.0)
        outcome = await engine.run()

    runs = {r.cid: r for r in outcome.runs}
    unsure = runs[first.candidate_id]
    assert unsure.instance_id is None and unsure.uncertain_label is not None
    # the lost create did rent: the marketplace made an instance carrying the label
    assert len(wire.creates) == 1, "the second rent must wait: the first may be billing"
    skipped = runs[second.candidate_id]
    assert skipped.instance_id is None and skipped.not_rented is NotRented.OVER_BUDGET
    # the final teardown found the possibly-created instance by its label, destroyed it and proved it gone
    assert market.instance_ids() == []
    assert len(outcome.teardown.gone) == 1 and outcome.teardown.is_clean
