"""A create slower than the client's timeout: the marketplace finishes it after the client stopped waiting.

The client must not rule the rent out on the first listing after the timeout — the instance may not be listed yet.
It looks again, and when the label is still missing it says "possibly created" (the intent stays open and its cost
reserved), never "nothing was rented". Only a request that never left (connection refused) is ruled out at once.
"""

from __future__ import annotations

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.approval import Action, Approval, ApprovalRequest, offer_target
from vastui.config import Secret
from vastui.errors import CreateFailed, CreateUncertain
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.vast.client import RECONCILE_LOOKS, HttpVastClient
from vastui.vast.models import CreatedInstance

KEY = "sim-key-slow-create-0001"
LISTING = "/api/v1/instances/"


class SlowCreate(httpx.AsyncBaseTransport):
    """The create reaches the marketplace, but its work lands only when the ``lands_at``-th listing is asked for;
    the client is told its read timed out (what httpx raises after ``timeout_s``) and never sees the answer."""

    def __init__(self, inner: httpx.AsyncBaseTransport, *, lands_at: int | None) -> None:
        self.inner, self.lands_at = inner, lands_at
        self.held: httpx.Request | None = None
        self.listings = 0

    async def land(self) -> None:
        assert self.held is not None
        held, self.held = self.held, None
        response = await self.inner.handle_async_request(held)
        await response.aread()
        assert response.status_code == 200, response.text

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PUT" and request.url.path.startswith("/api/v0/asks/"):
            await request.aread()
            self.held = httpx.Request(request.method, request.url, headers=request.headers,
                                      content=request.content)
            raise httpx.ReadTimeout("timed out waiting for the answer", request=request)
        if request.method == "GET" and request.url.path == LISTING:
            self.listings += 1
            if self.held is not None and self.listings == self.lands_at:
                await self.land()
        return await self.inner.handle_async_request(request)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    return build_market(7, clock=clock, api_key=KEY)


async def _rent(transport: httpx.AsyncBaseTransport, clock: FakeClock, label: str) -> CreatedInstance:
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=transport) as client:
        offer_id = (await client.search_offers("num_gpus>=1"))[0].id
        approval = Approval(ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(offer_id),
                                            summary="test"), granted_by="test", granted_at=0.0)
        return await client.create_instance(offer_id=offer_id, image="img", disk_gib=10, label=label,
                                            approval=approval)


async def test_a_create_listed_only_on_a_later_look_is_found_by_label(clock: FakeClock, market: Market) -> None:
    slow = SlowCreate(httpx.ASGITransport(app=create_app(market)), lands_at=2)
    made = await _rent(slow, clock, "slow-1")
    assert made.reconciled and market.instance_ids() == [made.instance_id]
    assert slow.listings == 2 and clock.sleeps, "it waited on the clock before looking again"


async def test_a_create_not_listed_yet_is_possibly_created_never_ruled_out(clock: FakeClock,
                                                                          market: Market) -> None:
    slow = SlowCreate(httpx.ASGITransport(app=create_app(market)), lands_at=None)
    with pytest.raises(CreateUncertain) as caught:
        await _rent(slow, clock, "slow-2")
    assert not isinstance(caught.value, CreateFailed)
    assert caught.value.label == "slow-2" and "possibly billing" in caught.value.message
    assert "\n" not in caught.value.message
    assert slow.listings == RECONCILE_LOOKS
    await slow.land()  # the marketplace finishes the create: the instance "nothing was rented" would have leaked
    assert len(market.instance_ids()) == 1


async def test_a_create_that_never_left_is_ruled_out_by_one_listing(clock: FakeClock, market: Market) -> None:
    class Refused(httpx.AsyncBaseTransport):
        def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
            self.inner, self.listings = inner, 0

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.method == "PUT":
                raise httpx.ConnectError("connection refused", request=request)
            self.listings += request.url.path == LISTING
            return await self.inner.handle_async_request(request)

    refused = Refused(httpx.ASGITransport(app=create_app(market)))
    with pytest.raises(CreateFailed, match="never reached the marketplace"):
        await _rent(refused, clock, "slow-3")
    assert refused.listings == 1 and market.instance_ids() == []
