"""A 404 on destroy counts as "gone" only when it says the instance does not exist.

The simulator's own 404 for a missing instance ("no_such_instance") is gone; a 404 from an unknown endpoint (a wrong
base URL, a path the marketplace moved) or a proxy's "Not Found" page says nothing about the instance: it is an
error, the destroy is not counted as sent, and teardown keeps proving it by listings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.approval import Action, Approval, ApprovalRequest, instance_target
from vastui.campaign.approvers import PlanApprover, PlanTerms
from vastui.campaign.cleanup import destroy_with_approval, teardown
from vastui.config import Secret
from vastui.errors import ApiError, NotFound
from vastui.events import EventBus
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.vast.client import HttpVastClient

KEY = "destroy-404-key-0042"
CAMPAIGN = "c404"


class ProxyNotFound(httpx.AsyncBaseTransport):
    """Forwards to the simulator, but DELETEs get a proxy's bare 404 page (the request never reached the API)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            return httpx.Response(404, text="<html><body>404 Not Found</body></html>", request=request)
        return await self.inner.handle_async_request(request)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    return build_market(11, clock=clock, api_key=KEY, n_machines=40)


async def _rent(market: Market) -> int:
    machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
    body = {"image": "pytorch/pytorch", "disk": 10, "label": f"vastui-{CAMPAIGN}-c1-0", "runtype": "ssh"}
    return (await market.create_instance(machine.offer_id, CreateRequest.from_body(body))).id


def _approval(instance_id: int) -> Approval:
    return Approval(ApprovalRequest(action=Action.DESTROY_INSTANCE, target=instance_target(instance_id),
                                    summary="test"), granted_by="test", granted_at=0.0)


@pytest.fixture
async def client(market: Market, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=httpx.ASGITransport(app=create_app(market))) as c:
        yield c


async def test_a_404_that_says_no_such_instance_counts_as_gone(market: Market, client: HttpVastClient,
                                                               clock: FakeClock) -> None:
    instance_id = await _rent(market)
    await client.destroy_instance(instance_id, approval=_approval(instance_id))
    with pytest.raises(NotFound):  # destroyed already: the simulator says there is no such instance
        await client.destroy_instance(instance_id, approval=_approval(instance_id))
    approver = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset(), max_spend_usd=0.0), clock=clock)
    approver.mark_owned(instance_id)
    assert await destroy_with_approval(client=client, approver=approver, instance_id=instance_id,
                                       campaign_id=CAMPAIGN, reason="test")


async def test_a_404_from_an_unknown_endpoint_is_not_gone(market: Market, clock: FakeClock) -> None:
    instance_id = await _rent(market)
    async with HttpVastClient(base_url="http://sim.test/moved", api_key=Secret(KEY), clock=clock,
                              transport=httpx.ASGITransport(app=create_app(market))) as client:
        with pytest.raises(ApiError) as caught:
            await client.destroy_instance(instance_id, approval=_approval(instance_id))
    assert not isinstance(caught.value, NotFound)
    message = caught.value.message
    assert "404" in message and f"instance {instance_id}" in message and "not counted" in message
    assert "\n" not in message and KEY not in message
    assert market.instance_ids() == [instance_id]  # it still bills: nothing may call it gone


async def test_teardown_does_not_count_a_proxy_404_as_a_destroy(market: Market, clock: FakeClock) -> None:
    instance_id = await _rent(market)
    approver = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset(), max_spend_usd=0.0), clock=clock)
    approver.mark_owned(instance_id)
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock, max_attempts=1,
                              transport=ProxyNotFound(httpx.ASGITransport(app=create_app(market)))) as client:
        report = await teardown(client=client, approver=approver, clock=clock, bus=EventBus(),
                                instance_ids=[instance_id], campaign_id=CAMPAIGN, reason="test", poll_s=5.0,
                                max_rounds=4)
    assert instance_id not in report.destroy_sent_at, "a destroy answered by a proxy's 404 was counted as sent"
    assert any("404" in error and str(instance_id) in error for error in report.errors)
    assert report.still_alive == [instance_id] and not report.is_clean
