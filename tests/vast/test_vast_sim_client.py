"""The client against the simulated marketplace: in-process (ASGI) and over a real loopback socket.

Covers search semantics end to end, the instance lifecycle, pagination over more than one page, an honest
"incomplete" when a page fails, the create reconciliation that never rents twice, the quota 429 and a 429 storm
from the simulator's chaos, and the key kept out of logs on a real socket.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.approval import Action, Approval, ApprovalRequest, instance_target, offer_target
from vastui.config import Secret
from vastui.errors import ApiError, ApprovalRequired, QuotaExceeded
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer
from vastui.vast.client import CreateFailed, CreateUncertain, HttpVastClient
from vastui.vast.models import InstanceStatus, Offer

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()


KEY = "sim-key-0123456789abcdef"
QUERY = "gpu_name=RTX_4090 num_gpus>=2 reliability>0.98"


def grant(action: Action, target: str) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="test"), granted_by="test",
                    granted_at=0.0)


class LossyTransport(httpx.AsyncBaseTransport):
    """Forwards to a real transport; ``fault(request)`` may refuse a request before it is sent ("refuse"),
    lose the answer after the server acted ("lose"), or replace the answer ("502", "500", "garble", "no-id")."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.fault: Callable[[httpx.Request], str | None] = lambda request: None
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        fault = self.fault(request)
        if fault == "refuse":
            raise httpx.ConnectError("connection refused", request=request)
        response = await self.inner.handle_async_request(request)
        await response.aread()
        if fault == "lose":
            raise httpx.ReadTimeout("timed out reading the answer", request=request)
        if fault in ("500", "502"):
            return httpx.Response(int(fault), json={"success": False, "msg": "gateway trouble"})
        if fault == "garble":
            return httpx.Response(200, text="<html>a proxy's error page</html>")
        if fault == "no-id":
            return httpx.Response(200, json={"success": True})
        return response

    def count(self, method: str, prefix: str) -> int:
        return sum(1 for r in self.sent if r.method == method and r.url.path.startswith(prefix))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    return build_market(7, clock=clock, api_key=KEY, realism=KIND)


@pytest.fixture
def lossy(market: Market) -> LossyTransport:
    return LossyTransport(httpx.ASGITransport(app=create_app(market)))


@pytest.fixture
async def client(lossy: LossyTransport, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock, transport=lossy) as c:
        yield c


async def rent(client: HttpVastClient, offer: Offer, label: str) -> int:
    made = await client.create_instance(offer_id=offer.id, image="pytorch/pytorch", disk_gib=10, label=label,
                                        approval=grant(Action.CREATE_INSTANCE, offer_target(offer.id)))
    return made.instance_id


# --- search -------------------------------------------------------------------------------------------------


async def test_search_returns_only_matching_offers_in_order(client: HttpVastClient) -> None:
    offers = await client.search_offers(QUERY, order="dlperf_usd-")
    assert offers, "the seeded world has multi-GPU RTX 4090 offers"
    for offer in offers:
        assert offer.gpu_name == "RTX 4090" and offer.num_gpus >= 2
        assert offer.reliability is not None and offer.reliability > 0.98
        assert offer.is_verified and offer.rentable and not offer.external
    ranks = [offer.dlperf_per_dphtotal for offer in offers]
    assert ranks == sorted(ranks, reverse=True)  # type: ignore[type-var]
    everything = await client.search_offers("verified=any rentable=any external=any", limit=1000)
    expected = {o.id for o in everything if o.gpu_name == "RTX 4090" and o.num_gpus >= 2
                and (o.reliability or 0) > 0.98 and o.is_verified and o.rentable and not o.external}
    assert {o.id for o in offers} == expected


async def test_limit_order_and_gb_multiplier(client: HttpVastClient) -> None:
    offers = await client.search_offers("gpu_ram>=40", order="dph+", limit=7)
    assert len(offers) == 7
    assert all(o.gpu_ram is not None and o.gpu_ram >= 40_000 for o in offers)
    prices = [o.dph_total for o in offers]
    assert prices == sorted(prices)


# --- lifecycle ----------------------------------------------------------------------------------------------


async def test_rent_label_stop_start_destroy(client: HttpVastClient, market: Market, clock: FakeClock) -> None:
    offer = (await client.search_offers(QUERY, order="dph+"))[0]
    instance_id = await rent(client, offer, "job-1")
    shown = await client.show_instance(instance_id)
    assert shown is not None and shown.label == "job-1" and shown.machine_id == offer.machine_id
    clock.advance(3600)
    running = await client.show_instance(instance_id)
    assert running is not None and running.actual_status is InstanceStatus.RUNNING
    assert running.ssh_endpoint() is not None
    await client.label_instance(instance_id, "job-1b", approval=grant(Action.LABEL_INSTANCE,
                                                                      instance_target(instance_id)))
    await client.stop_instance(instance_id, approval=grant(Action.STOP_INSTANCE, instance_target(instance_id)))
    stopped = await client.show_instance(instance_id)
    assert stopped is not None and stopped.label == "job-1b"
    assert stopped.actual_status is InstanceStatus.STOPPED
    await client.start_instance(instance_id, approval=grant(Action.START_INSTANCE, instance_target(instance_id)))
    user = await client.get_user()
    assert user.credit is not None and user.credit < 500.0
    await client.destroy_instance(instance_id, approval=grant(Action.DESTROY_INSTANCE,
                                                              instance_target(instance_id)))
    assert await client.show_instance(instance_id) is None
    assert market.instance_ids() == []


async def test_renting_a_taken_offer_is_a_clear_error(client: HttpVastClient) -> None:
    offer = (await client.search_offers(QUERY))[0]
    await rent(client, offer, "first")
    with pytest.raises(ApiError) as caught:
        await rent(client, offer, "second")
    assert caught.value.status is not None and 400 <= caught.value.status < 500
    assert caught.value.message


# --- pagination -----------------------------------------------------------------------------------------------


async def test_listing_follows_every_page(client: HttpVastClient, market: Market, lossy: LossyTransport) -> None:
    offers = await client.search_offers("num_gpus=1", order="dph+", limit=30)
    ids = [await rent(client, offer, f"page-test-{i}") for i, offer in enumerate(offers)]
    assert len(ids) == 30
    before = lossy.count("GET", "/api/v1/instances/")
    listing = await client.list_instances()
    assert listing.is_complete and listing.error is None
    assert sorted(inst.id for inst in listing.instances) == sorted(ids) == market.instance_ids()
    pages = [r for r in lossy.sent if r.url.path == "/api/v1/instances/"][before:]
    assert len(pages) == 2
    assert "after_token" not in pages[0].url.params and pages[1].url.params["after_token"]


@pytest.mark.parametrize("fault", ["500", "refuse"])
async def test_a_failed_page_makes_the_listing_incomplete(client: HttpVastClient, lossy: LossyTransport,
                                                          fault: str) -> None:
    for i, offer in enumerate(await client.search_offers("num_gpus=1", order="dph+", limit=27)):
        await rent(client, offer, f"p-{i}")
    lossy.fault = lambda r: fault if "after_token" in r.url.params else None
    listing = await client.list_instances()
    assert not listing.is_complete
    assert len(listing.instances) == 25
    assert listing.error is not None and "page 2" in listing.error


# --- create is never blindly retried ---------------------------------------------------------------------------


def on_create(fault: str) -> Callable[[httpx.Request], str | None]:
    return lambda r: fault if r.method == "PUT" and r.url.path.startswith("/api/v0/asks/") else None


@pytest.mark.parametrize("fault", ["lose", "502", "garble", "no-id"])
async def test_a_lost_create_answer_is_found_by_label(client: HttpVastClient, market: Market,
                                                      lossy: LossyTransport, fault: str) -> None:
    offer = (await client.search_offers(QUERY))[0]
    lossy.fault = on_create(fault)
    made = await client.create_instance(offer_id=offer.id, image="img", disk_gib=10, label="unique-7",
                                        approval=grant(Action.CREATE_INSTANCE, offer_target(offer.id)))
    assert made.reconciled and made.label == "unique-7"
    assert market.instance_ids() == [made.instance_id]  # exactly one rented, and it is the one returned
    assert lossy.count("PUT", "/api/v0/asks/") == 1


async def test_a_create_that_never_arrived_says_nothing_was_rented(client: HttpVastClient, market: Market,
                                                                   lossy: LossyTransport) -> None:
    offer = (await client.search_offers(QUERY))[0]
    lossy.fault = on_create("refuse")
    approval = grant(Action.CREATE_INSTANCE, offer_target(offer.id))
    with pytest.raises(CreateFailed, match="nothing was rented"):
        await client.create_instance(offer_id=offer.id, image="img", disk_gib=10, label="unique-8",
                                     approval=approval)
    assert market.instance_ids() == []
    assert lossy.count("PUT", "/api/v0/asks/") == 1
    with pytest.raises(ApprovalRequired, match="already used"):  # no retry without a new approval
        await client.create_instance(offer_id=offer.id, image="img", disk_gib=10, label="unique-8",
                                     approval=approval)


async def test_a_lost_create_with_an_unreadable_listing_says_possibly_created(
        client: HttpVastClient, market: Market, lossy: LossyTransport) -> None:
    offer = (await client.search_offers(QUERY))[0]
    lossy.fault = lambda r: "lose" if r.method == "PUT" else ("500" if r.url.path == "/api/v1/instances/" else None)
    with pytest.raises(CreateUncertain) as caught:
        await client.create_instance(offer_id=offer.id, image="img", disk_gib=10, label="unique-9",
                                     approval=grant(Action.CREATE_INSTANCE, offer_target(offer.id)))
    assert caught.value.label == "unique-9" and "possibly created" in caught.value.message
    assert len(market.instance_ids()) == 1 and lossy.count("PUT", "/api/v0/asks/") == 1


# --- the simulator's chaos --------------------------------------------------------------------------------------


async def test_quota_429_from_the_simulator(client: HttpVastClient, market: Market, lossy: LossyTransport,
                                            clock: FakeClock) -> None:
    market.chaos.search_quota_exhausted = True
    with pytest.raises(QuotaExceeded, match="Resets at"):
        await client.search_offers(QUERY)
    assert lossy.count("POST", "/api/v0/bundles/") == 1 and clock.sleeps == []


async def test_a_429_storm_is_ridden_out_with_retry_after(client: HttpVastClient, market: Market,
                                                          clock: FakeClock) -> None:
    market.chaos.rate_limit_every_n = 2
    market.chaos.retry_after_s = 0.5
    for _ in range(3):
        assert await client.search_offers(QUERY)
    assert clock.sleeps and all(s == pytest.approx(0.5) for s in clock.sleeps)


# --- over a real loopback socket --------------------------------------------------------------------------------


async def test_over_loopback(clock: FakeClock, market: Market, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with SimServer(market, poll=False) as server:
        async with HttpVastClient(base_url=server.url, api_key=Secret(KEY), clock=clock) as client:
            offer = (await client.search_offers(QUERY, order="dlperf_usd-"))[0]
            instance_id = await rent(client, offer, "loopback-1")
            clock.advance(3600)
            listing = await client.list_instances()
            assert listing.is_complete and [i.id for i in listing.instances] == [instance_id]
            logs = await client.request_logs(instance_id, tail=50)
            assert str(instance_id) in logs
            await client.destroy_instance(instance_id, approval=grant(Action.DESTROY_INSTANCE,
                                                                      instance_target(instance_id)))
            assert (await client.list_instances()).instances == ()
            async with HttpVastClient(base_url=server.url, api_key=Secret("wrong-key-123"), clock=clock) as bad:
                with pytest.raises(ApiError, match="Invalid user key"):
                    await bad.get_user()
    assert caplog.records, "the client logs its requests at DEBUG"
    assert all(KEY not in record.getMessage() for record in caplog.records)
