"""The simulator's chaos, knob by knob: 429 storms and 5xx bursts in a row, a search quota that runs out, redirects
the client follows, replies held past the client's timeout whose work is still done, and the faults chaos draws
for a rented instance (stuck in loading, offline or exited mid-run, SSH cut, wrong outputs). Each is counted."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.clock import WallClock
from vastui.config import Secret
from vastui.sim.app import create_app
from vastui.sim.chaos import Chaos, InstanceFault
from vastui.sim.instance import CreateRequest, InstanceStatus
from vastui.sim.machine import Machine
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer
from vastui.sim.truth import Fault
from vastui.sim.world import generate_world
from vastui.vast.client import HttpVastClient

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()


KEY = "sk-sim-chaos-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
BODY = {"client_id": "me", "image": "example/trainer:1", "disk": 10, "label": "chaos"}


class DroppingHosts:
    """A host provider that records SSH drops (the real pool cuts every connection of the host)."""

    def __init__(self) -> None:
        self.drops: list[int] = []
        self.stopped: list[int] = []
        self.started: dict[int, Machine] = {}

    async def start_host(self, *, instance_id: int, machine: Machine, authorized_keys: list[str]) -> tuple[str, int]:
        self.started[instance_id] = machine
        return "127.0.0.1", 50_000 + instance_id % 1000

    async def stop_host(self, *, instance_id: int) -> None:
        self.stopped.append(instance_id)

    def drop_connections(self, *, instance_id: int) -> int:
        self.drops.append(instance_id)
        return 1


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def hosts() -> DroppingHosts:
    return DroppingHosts()


@pytest.fixture
def market(clock: FakeClock, hosts: DroppingHosts) -> Market:
    world = generate_world(7, now=clock.now())
    free = dataclasses.replace(world, machines=[dataclasses.replace(m, rented=False, rentable=True, truth=dataclasses
                                                                    .replace(m.truth, fault=Fault.NONE))
                                                for m in world.machines])
    return Market(free, clock=clock, api_key=KEY, initial_credit_usd=1000.0, host_provider=hosts, realism=KIND)


@pytest.fixture
async def api(market: Market) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(market)),
                                 base_url="http://sim.test") as client:
        yield client


def _offer(market: Market, index: int = 0) -> int:
    return market.world.machines[index].offer_id


async def test_a_429_storm_answers_several_requests_in_a_row_each_with_retry_after(
        api: httpx.AsyncClient, market: Market) -> None:
    market.chaos.rate_limit_every_n, market.chaos.rate_limit_storm_len = 3, 2
    answers = [await api.get("/api/v0/users/current", headers=AUTH) for _ in range(8)]
    assert [r.status_code for r in answers] == [200, 200, 429, 429, 200, 429, 429, 200]
    assert all(r.headers["retry-after"] == "0.5" for r in answers if r.status_code == 429)
    assert market.chaos.injected["rate_limited"] == 4


async def test_a_5xx_burst_repeats_its_code_and_applies_nothing(api: httpx.AsyncClient, market: Market) -> None:
    market.chaos.error_5xx_rate, market.chaos.error_5xx_burst_len = 1.0, 3
    first = await api.put(f"/api/v0/asks/{_offer(market)}/", json=BODY, headers=AUTH)
    market.chaos.error_5xx_rate = 0.0  # the burst goes on without the dice
    rest = [await api.put(f"/api/v0/asks/{_offer(market)}/", json=BODY, headers=AUTH) for _ in range(3)]
    assert first.status_code in (502, 503, 504)
    assert [r.status_code for r in rest] == [first.status_code, first.status_code, 200]
    assert len(market.instance_ids()) == 1 and market.chaos.injected["server_error"] == 3


async def test_the_search_quota_runs_out_after_n_searches_and_only_for_searches(
        api: httpx.AsyncClient, market: Market, clock: FakeClock) -> None:
    market.chaos.search_quota_n = 2
    searches = [await api.post("/api/v0/bundles/", json={"limit": 3}, headers=AUTH) for _ in range(3)]
    assert [r.status_code for r in searches] == [200, 200, 429]
    assert searches[2].json()["error"] == "search_quota_exceeded"
    assert int(searches[2].headers["x-ratelimit-reset"]) == int(clock.now() + 3600)
    assert (await api.get("/api/v0/users/current", headers=AUTH)).status_code == 200
    assert market.chaos.injected["search_quota"] == 1


async def test_a_redirect_points_at_the_same_url_and_applies_nothing_until_followed(
        api: httpx.AsyncClient, market: Market) -> None:
    market.chaos.redirect_rate = 1.0
    path = f"/api/v0/asks/{_offer(market)}/"
    moved = await api.put(path, json=BODY, headers=AUTH)
    assert moved.status_code == 307 and moved.headers["location"] == f"http://sim.test{path}"
    assert market.instance_ids() == []
    market.chaos.redirect_rate = 0.0
    assert (await api.put(moved.headers["location"], json=BODY, headers=AUTH)).status_code == 200
    assert len(market.instance_ids()) == 1 and market.chaos.injected["redirect"] == 1


async def test_the_client_follows_chaos_redirects(market: Market, clock: FakeClock) -> None:
    market.chaos.redirect_rate = 0.5
    market.chaos.reseed(3)
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=httpx.ASGITransport(app=create_app(market))) as client:
        for _ in range(6):
            assert (await client.list_instances()).is_complete
    assert market.chaos.injected["redirect"] > 0


@pytest.mark.slow
async def test_a_reply_slower_than_the_client_timeout_is_lost_but_its_work_is_done() -> None:
    world = generate_world(7, now=WallClock().now())
    free = dataclasses.replace(world, machines=[dataclasses.replace(m, rented=False, rentable=True)
                                                for m in world.machines])
    market = Market(free, clock=WallClock(), api_key=KEY, initial_credit_usd=1000.0, realism=KIND,
                    chaos=Chaos(slow_reply_rate=1.0, slow_reply_s=0.6, seed=1))
    async with SimServer(market, poll=False) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=0.2) as raw:
            for index in range(4):  # seed 1 holds some before the work and some after it
                with pytest.raises(httpx.ReadTimeout):
                    await raw.put(f"/api/v0/asks/{_offer(market, index)}/", json=BODY, headers=AUTH)
        async with asyncio.timeout(30):
            while market.requests_in_flight:
                await asyncio.sleep(0.02)
    assert len(market.instance_ids()) == 4 and market.chaos.injected["slow_reply"] == 4


async def test_chaos_can_keep_a_rented_instance_loading_forever(market: Market, clock: FakeClock) -> None:
    market.chaos.stuck_loading_rate = 1.0
    st = await market.create_instance(_offer(market), CreateRequest.from_body(BODY))
    clock.advance(100_000)
    await market.refresh()
    assert st.status is InstanceStatus.LOADING and market.chaos.injected["stuck_loading"] == 1
    assert market.chaos.instance_faults[st.id].fault is InstanceFault.STUCK_LOADING


async def test_chaos_wrong_outputs_live_in_the_rented_machine_only(market: Market, clock: FakeClock,
                                                                   hosts: DroppingHosts) -> None:
    market.chaos.wrong_output_rate = 1.0
    st = await market.create_instance(_offer(market), CreateRequest.from_body(BODY))
    clock.advance(100_000)
    await market.refresh()
    assert hosts.started[st.id].truth.fault is Fault.WRONG_OUTPUT  # what the host's workload reads
    assert market.truth_of(st.machine.machine_id).fault is Fault.NONE  # the listing's machine is unchanged
    assert market.chaos.injected["wrong_output"] == 1


@pytest.mark.parametrize(("knob", "status", "kind"), [("offline_rate", InstanceStatus.OFFLINE, "goes_offline"),
                                                      ("exit_rate", InstanceStatus.EXITED, "exited")])
async def test_chaos_takes_an_instance_down_some_time_after_it_started_running(
        market: Market, clock: FakeClock, hosts: DroppingHosts, knob: str, status: InstanceStatus,
        kind: str) -> None:
    setattr(market.chaos, knob, 1.0)
    market.chaos.fault_after_s = (50.0, 50.0)
    st = await market.create_instance(_offer(market), CreateRequest.from_body(BODY))
    assert st.ready_at is not None
    clock.advance(st.ready_at - clock.now() + 1)
    await market.refresh()
    assert st.status is InstanceStatus.RUNNING and st.id in hosts.started  # the fault counts from running
    clock.advance(60)
    await market.refresh()
    assert st.status is status and st.id in hosts.stopped
    assert market.chaos.injected[kind] == 1
    clock.advance(100)
    await market.refresh()
    assert market.chaos.injected[kind] == 1  # once


async def test_chaos_cuts_a_running_hosts_ssh_once_and_leaves_it_running(market: Market, clock: FakeClock,
                                                                         hosts: DroppingHosts) -> None:
    market.chaos.ssh_cut_rate = 1.0
    market.chaos.fault_after_s = (50.0, 50.0)
    st = await market.create_instance(_offer(market), CreateRequest.from_body(BODY))
    assert st.ready_at is not None
    clock.advance(st.ready_at - clock.now() + 1)
    await market.refresh()
    assert st.status is InstanceStatus.RUNNING and hosts.drops == []  # the fault's time counts from running
    clock.advance(60)
    await market.refresh()
    await market.refresh()
    assert st.status is InstanceStatus.RUNNING and hosts.drops == [st.id]
    assert market.chaos.injected["ssh_cut"] == 1


async def test_a_calm_chaos_injects_nothing_more_and_keeps_its_counts(api: httpx.AsyncClient,
                                                                      market: Market) -> None:
    market.chaos.rate_limit_every_n, market.chaos.error_5xx_rate, market.chaos.redirect_rate = 1, 1.0, 1.0
    assert (await api.get("/api/v0/users/current", headers=AUTH)).status_code == 429
    market.chaos.calm()
    assert [(await api.get("/api/v0/users/current", headers=AUTH)).status_code for _ in range(5)] == [200] * 5
    assert market.chaos.injected["rate_limited"] == 1 and market.chaos.describe() == "nothing"


async def test_creates_and_destroys_can_lose_their_reply_after_the_work_is_done(market: Market) -> None:
    market.chaos.drop_mutation_rate = 1.0
    async with SimServer(market, poll=False) as server:
        async with httpx.AsyncClient(base_url=server.url) as raw:
            with pytest.raises(httpx.RemoteProtocolError):
                await raw.put(f"/api/v0/asks/{_offer(market)}/", json=BODY, headers=AUTH)
            (created,) = market.instance_ids()
            assert (await raw.get("/api/v0/users/current", headers=AUTH)).status_code == 200  # reads are spared
            with pytest.raises(httpx.RemoteProtocolError):
                await raw.delete(f"/api/v0/instances/{created}/", headers=AUTH)
    assert market.instance_ids() == []
    assert market.chaos.injected["create_dropped"] == 1 and market.chaos.injected["destroy_dropped"] == 1


async def test_an_outage_answers_every_request_503_for_its_wall_seconds_then_ends(
        api: httpx.AsyncClient, market: Market) -> None:
    market.chaos.outage_after_n, market.chaos.outage_s = 3, 0.3
    before = [(await api.get("/api/v0/users/current", headers=AUTH)).status_code for _ in range(2)]
    during = [(await api.get("/api/v0/users/current", headers=AUTH)).status_code for _ in range(3)]
    assert before == [200, 200] and during == [503, 503, 503]
    assert market.chaos.injected["outage"] == 1
    async with asyncio.timeout(30):
        while (await api.get("/api/v0/users/current", headers=AUTH)).status_code == 503:
            await asyncio.sleep(0.05)  # waiting for the outage's end, which is wall time by design
    assert market.chaos.injected["outage"] == 1  # one outage, however many requests it refused
