"""Vast.ai's rate limits: the simulator enforces them as documented, and the client paces itself to them.

Sources (docs/api-notes.md §1.4): vast-ai/docs ``api-reference/rate-limits-and-errors.mdx`` (a minimum interval per
endpoint and identity; 429 with no ``Retry-After``; a plain-text or JSON body, "API requests too frequent" with or
without "endpoint threshold=..."), and the ``x-rate-limit`` of each OpenAPI file under
``api-reference/openapi/yaml/`` (create 4.5 s, destroy 3.0 s, show instance 2.0 s, v1 listing 1.0 s, manage 1.0 s,
prepay 2.0 s, transfer credit 2.5 s, create ssh key 1.0 s; search offers 10 a minute per IP).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.fakes import FakeClock, FakeVastApi
from vastui.approval import Action, Approval, ApprovalRequest, offer_target
from vastui.clock import MarketClock, ScaledClock
from vastui.config import Secret
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.sim.rate_limits import LIMITS, interval_violations
from vastui.sim.realism import Realism
from vastui.vast.client import HttpVastClient
from vastui.vast.pacing import SAFETY, VAST_RULES, Pacer

KEY = "rate-limit-sim-key-4c1d"
AUTH = {"Authorization": f"Bearer {KEY}"}
RATE_LIMITED = Realism(rate_limits=True)


def grant(action: Action, target: str) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="test"), granted_by="test",
                    granted_at=0.0)


def limited_market(clock: Any, *, seed: int = 7, n_machines: int = 360) -> Market:
    return build_market(seed, clock=clock, api_key=KEY, n_machines=n_machines, realism=RATE_LIMITED)


def raw(market: Market) -> httpx.AsyncClient:
    """Plain HTTP to the simulator (no pacing, no retries): what the server answers."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(market)), base_url="http://sim.test")


async def others(market: Market, n: int) -> list[int]:
    """``n`` instances rented on the account outside the client (setup, straight on the market), stopped."""
    free = [m.offer_id for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10]
    body = {"image": "pytorch/pytorch", "disk": 10, "label": "someone-else", "runtype": "ssh"}
    ids, failed = await market.create_many(free[:n], CreateRequest.from_body(body))
    assert len(ids) == n, failed
    await market.set_state(ids, "stopped")
    return ids


# One request of each documented endpoint (an id that does not exist is fine: the limit comes before the route).
ENDPOINTS = {
    "create instance": ("PUT", "/api/v0/asks/1/", {"image": "x", "disk": 10}),
    "destroy instance": ("DELETE", "/api/v0/instances/1/", {}),
    "show instance": ("GET", "/api/v0/instances/1/?owner=me", None),
    "show instances": ("GET", "/api/v1/instances/", None),
    "manage instance": ("PUT", "/api/v0/instances/1/", {"label": "x"}),
    "prepay instance": ("PUT", "/api/v0/instances/prepay/1/", {"amount": 1.0}),
    "transfer credit": ("PUT", "/api/v0/commands/transfer_credit/", {"sender": "me", "recipient": "a@b.c",
                                                                      "amount": 0.0}),
    "create ssh key": ("POST", "/api/v0/ssh/", {"ssh_key": "not a key"}),
}


async def send(http: httpx.AsyncClient, name: str) -> httpx.Response:
    method, path, body = ENDPOINTS[name]
    return await http.request(method, path, headers=AUTH, content=None if body is None else json.dumps(body))


# --- the simulator -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [lim for lim in LIMITS if lim.calls == 1], ids=lambda lim: lim.name)
async def test_the_simulator_refuses_a_request_sooner_than_its_endpoints_interval(limit: Any) -> None:
    # rate-limits-and-errors.mdx: a minimum interval per endpoint and identity, 429, no Retry-After;
    # the interval of each endpoint: its OpenAPI file's x-rate-limit threshold
    clock = FakeClock()
    market = limited_market(clock)
    async with raw(market) as http:
        assert (await send(http, limit.name)).status_code != 429
        clock.advance(limit.per_s * 0.9)
        refused = await send(http, limit.name)
        assert refused.status_code == 429 and "retry-after" not in refused.headers
        assert "API requests too frequent" in refused.text
        clock.advance(limit.per_s)       # a full interval after the refused one (every request counts)
        assert (await send(http, limit.name)).status_code != 429
    assert market.realism.rate_limits and market.rate_limits.refused == 1


async def test_each_endpoint_and_the_kind_simulator_are_their_own() -> None:
    # rate-limits-and-errors.mdx: limits are per endpoint; Realism.kind() (the default) has none
    clock = FakeClock()
    market = limited_market(clock)
    async with raw(market) as http:
        for name in ENDPOINTS:
            assert (await send(http, name)).status_code != 429, name
    kind = build_market(7, clock=clock, api_key=KEY, realism=Realism.kind())
    async with raw(kind) as http:
        for _ in range(3):
            assert (await send(http, "create instance")).status_code != 429


async def test_the_429_bodies_are_the_documented_shapes_drawn_from_seeded_dice() -> None:
    # rate-limits-and-errors.mdx: plain text "API requests too frequent" or "...: endpoint threshold=...", or JSON;
    # create_instance.yaml's 429: {"detail": "API requests too frequent endpoint threshold=4.5"};
    # destroy_instance.yaml's 429: {"success": false, "error": "rate_limit_exceeded", "msg": "... threshold=3.0"}
    async def bodies(seed: int) -> list[tuple[str, str]]:
        clock = FakeClock()
        market = limited_market(clock, seed=seed, n_machines=40)
        seen = []
        async with raw(market) as http:
            await send(http, "create instance")
            for _ in range(24):
                refused = await send(http, "create instance")
                assert refused.status_code == 429 and "retry-after" not in refused.headers
                seen.append((refused.headers["content-type"].split(";")[0], refused.text))
        return seen

    seen = await bodies(3)
    assert seen == await bodies(3)      # the same seed draws the same bodies
    shapes = set()
    for media_type, text in seen:
        if media_type == "text/plain":
            assert text in ("API requests too frequent", "API requests too frequent: endpoint threshold=4.5")
            shapes.add(text)
        else:
            body = json.loads(text)
            said = body.get("detail", body.get("msg"))
            assert said == "API requests too frequent endpoint threshold=4.5", body
            shapes.add(" ".join(sorted(body)))
    assert len(shapes) == 4, shapes


async def test_search_is_limited_to_ten_a_minute_per_client_ip() -> None:
    # search_offers.yaml x-rate-limit: 10 requests per minute, per IP address
    clock = FakeClock()
    market = limited_market(clock, n_machines=40)
    async with raw(market) as http:
        for _ in range(10):
            assert (await http.post("/api/v0/bundles/", headers=AUTH, json={"limit": 1})).status_code == 200
            clock.advance(1.0)
        assert (await http.post("/api/v0/bundles/", headers=AUTH, json={"limit": 1})).status_code == 429
        clock.advance(51.0)      # the first of the ten is a minute old
        assert (await http.post("/api/v0/bundles/", headers=AUTH, json={"limit": 1})).status_code == 200


async def test_the_request_log_shows_whether_each_interval_was_kept() -> None:
    # the log records each request's arrival on the market's clock, so a test can judge a client's pace
    clock = FakeClock()
    market = limited_market(clock, n_machines=40)
    async with raw(market) as http:
        await send(http, "show instances")
        clock.advance(1.0)
        await send(http, "show instances")
        assert interval_violations(market.request_log) == []
        clock.advance(0.5)
        await send(http, "show instances")
    (violation,) = interval_violations(market.request_log)
    assert violation.startswith("show instances") and "at most 1 per 1 s" in violation


# --- the client's pace ---------------------------------------------------------------------------------------------


def test_the_client_knows_the_same_limits_as_the_simulator() -> None:
    # both tables are the OpenAPI x-rate-limit thresholds; they are written twice (the client cannot import the
    # simulator), so they must agree
    client = {(r.name, r.method, r.pattern.pattern, r.calls, r.per_s) for r in VAST_RULES}
    server = {(lim.name, lim.method, lim.pattern.pattern, lim.calls, lim.per_s) for lim in LIMITS}
    assert client == server


async def test_the_pacer_spaces_each_endpoint_on_the_injected_clock() -> None:
    # create_instance.yaml: one create per 4.5 s; destroy_instance.yaml: one destroy per 3.0 s
    clock = FakeClock()
    pacer = Pacer(clock=clock)
    for _ in range(3):
        async with pacer.turn("PUT", "/api/v0/asks/9/"):
            pass
    async with pacer.turn("DELETE", "/api/v0/instances/9/"):   # another endpoint does not wait for creates
        pass
    async with pacer.turn("GET", "/api/v0/users/current"):      # no documented limit: never waits
        pass
    assert clock.sleeps == pytest.approx([4.5 * SAFETY, 4.5 * SAFETY])


async def test_the_pacer_counts_from_the_answer_not_the_send() -> None:
    # an answer comes after its request arrived: waiting from it keeps arrivals apart whatever the network does
    clock = FakeClock()
    pacer = Pacer(clock=clock)
    async with pacer.turn("GET", "/api/v1/instances/"):
        clock.advance(0.7)              # the answer takes 0.7 s
    async with pacer.turn("GET", "/api/v1/instances/"):
        pass
    assert clock.sleeps == pytest.approx([1.0 * SAFETY])


async def test_the_pacer_is_not_fooled_when_the_marketplaces_clock_moves_its_own() -> None:
    # the CLI's commands pace on a MarketClock, whose reading jumps when the first answer shows the marketplace's
    # time (docs/api-notes.md §1.3); show_instances.yaml: one page per 1.0 s all the same
    clock = MarketClock(scale=10.0)
    pacer = Pacer(clock=clock)
    async with pacer.turn("GET", "/api/v1/instances/"):
        pass
    local = clock.local_now()         # the answer's time is learnt after its turn ended, as the wire does it
    clock.observe(market_time=clock.now() + 86_400.0, resolution_s=0.0, sent_local=local, received_local=local)
    async with pacer.turn("GET", "/api/v1/instances/"):
        pass
    assert clock.now() - clock.local_now() > 80_000 and pacer.waited_s > 0.5


@pytest.fixture
def api() -> FakeVastApi:
    return FakeVastApi()


@pytest.fixture
async def scripted(api: FakeVastApi) -> AsyncIterator[tuple[HttpVastClient, FakeClock]]:
    clock = FakeClock()
    async with HttpVastClient(base_url="http://vast.test", api_key=Secret(KEY), clock=clock,
                              transport=api.transport()) as client:
        yield client, clock


async def test_a_429_without_retry_after_waits_the_threshold_its_body_names(
        scripted: tuple[HttpVastClient, FakeClock], api: FakeVastApi) -> None:
    # rate-limits-and-errors.mdx: no Retry-After; "API requests too frequent: endpoint threshold=..."
    client, clock = scripted
    api.script += [httpx.Response(429, text="API requests too frequent: endpoint threshold=7"),
                   httpx.Response(200, json={"instances": [], "next_token": None})]
    listing = await client.list_instances()
    assert listing.is_complete
    assert clock.sleeps == pytest.approx([7 * SAFETY])
    api.script.append(httpx.Response(200, json={"instances": [], "next_token": None}))
    await client.list_instances()        # the longer threshold is kept to from now on
    assert clock.sleeps == pytest.approx([7 * SAFETY, 7 * SAFETY])


async def test_a_429_that_names_nothing_waits_the_documented_interval(
        scripted: tuple[HttpVastClient, FakeClock], api: FakeVastApi) -> None:
    # show_instance.yaml: threshold 2.0 s; a 429 body may be plain "API requests too frequent"
    client, clock = scripted
    api.script += [httpx.Response(429, text="API requests too frequent")] * 3
    api.script.append(httpx.Response(200, json={"instances": None}))
    assert await client.show_instance(5) is None
    assert clock.sleeps == pytest.approx([2.0 * SAFETY] * 3)


async def test_a_429_on_create_is_retried_after_the_interval_and_the_create_goes_through(
        scripted: tuple[HttpVastClient, FakeClock], api: FakeVastApi) -> None:
    # a 429 means the server did nothing (rate-limits-and-errors.mdx): the create is sent again, not given up;
    # create_instance.yaml's 429 body: {"detail": "API requests too frequent endpoint threshold=4.5"}
    client, clock = scripted
    refused = httpx.Response(429, json={"detail": "API requests too frequent endpoint threshold=4.5"})
    api.script += [refused] * 6 + [httpx.Response(200, json={"success": True, "new_contract": 77})]
    made = await client.create_instance(offer_id=12, image="pytorch/pytorch", disk_gib=10, label="rl-1",
                                        approval=grant(Action.CREATE_INSTANCE, offer_target(12)))
    assert made.instance_id == 77 and not made.reconciled
    assert len(api.requests) == 7 and all(r.url.path == "/api/v0/asks/12/" for r in api.requests)
    assert clock.sleeps == pytest.approx([4.5 * SAFETY] * 6)


# --- the client against the rate-limited simulator -----------------------------------------------------------------


async def test_a_listing_of_sixty_instances_finishes_under_rate_limits() -> None:
    # show_instances.yaml: one page per 1.0 s (25 rows a page): 60 instances are three pages, paced
    clock = FakeClock()
    market = limited_market(clock)
    ids = await others(market, 60)
    transport = httpx.ASGITransport(app=create_app(market))
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=transport) as client:
        for _ in range(3):
            listing = await client.list_instances()
            assert listing.is_complete, listing.error
            assert sorted(i.id for i in listing.instances) == sorted(ids)
    pages = [r for r in market.request_log if r.path == "/api/v1/instances/"]
    assert len(pages) == 9 and all(r.status == 200 for r in pages)
    assert interval_violations(market.request_log) == []


async def test_parallel_creates_queue_instead_of_colliding() -> None:
    # create_instance.yaml: one create per 4.5 s per identity; the client's creates share one pace
    clock = ScaledClock(scale=600.0)
    market = limited_market(clock)
    offers = [m.offer_id for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10][:5]
    transport = httpx.ASGITransport(app=create_app(market))
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=transport) as client:
        async with asyncio.timeout(120):    # a guard against a hang, not a speed check
            made = await asyncio.gather(*(
                client.create_instance(offer_id=o, image="pytorch/pytorch", disk_gib=10, label=f"rl-{o}",
                                       approval=grant(Action.CREATE_INSTANCE, offer_target(o))) for o in offers))
    assert sorted(m.offer_id for m in made) == sorted(offers)
    creates = [r for r in market.request_log if r.method == "PUT" and r.path.startswith("/api/v0/asks/")]
    assert len(creates) == 5 and all(r.status == 200 for r in creates)
    assert interval_violations(market.request_log) == []


async def test_two_clients_sharing_a_key_both_get_their_creates_through() -> None:
    # two processes with one key share an identity (rate-limits-and-errors.mdx); neither knows the other's pace,
    # so the server refuses some: each 429 is waited out (threshold or 4.5 s) and sent again
    clock = ScaledClock(scale=60.0)
    market = limited_market(clock)
    offers = [m.offer_id for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10][:6]

    async def rent_three(picked: list[int]) -> list[int]:
        transport = httpx.ASGITransport(app=create_app(market))
        async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                                  transport=transport) as client:
            return [(await client.create_instance(offer_id=o, image="pytorch/pytorch", disk_gib=10, label=f"x{o}",
                                                  approval=grant(Action.CREATE_INSTANCE, offer_target(o)))).offer_id
                    for o in picked]

    async with asyncio.timeout(120):
        first, second = await asyncio.gather(rent_three(offers[:3]), rent_three(offers[3:]))
    assert sorted(first + second) == sorted(offers)
    creates = [r for r in market.request_log if r.method == "PUT" and r.path.startswith("/api/v0/asks/")]
    assert sum(r.status == 200 for r in creates) == 6
    assert any(r.status == 429 for r in creates), "the two clients did collide"
