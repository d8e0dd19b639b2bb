"""Market lifecycle and billing on a FakeClock: loading for the pull time, running, stop/start, destroy, credit,
prepay, host start/stop through the HostProvider hook, faults that keep an instance loading or take it offline."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tests.fakes import FakeClock
from vastui.sim.images import image_size_mb
from vastui.sim.instance import CreateRequest, InstanceState, InstanceStatus
from vastui.sim.machine import Machine, World
from vastui.sim.market import Market
from vastui.sim.market_error import MarketError
from vastui.sim.realism import Realism
from vastui.sim.truth import Fault
from vastui.sim.world import generate_world

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()


BIG_IMAGE = "example/trainer:1"   # unknown image: 6 GB, never pre-cached


class FakeHostProvider:
    """Records host starts and stops; hands out loopback ports like the real pool."""

    def __init__(self) -> None:
        self.started: dict[int, list[str]] = {}
        self.stopped: list[int] = []
        self.key_updates: list[tuple[int, list[str]]] = []
        self._port = 50_000

    async def start_host(self, *, instance_id: int, machine: Machine, authorized_keys: list[str]) -> tuple[str, int]:
        self._port += 1
        self.started[instance_id] = list(authorized_keys)
        return "127.0.0.1", self._port

    async def stop_host(self, *, instance_id: int) -> None:
        self.stopped.append(instance_id)

    def set_authorized_keys(self, *, instance_id: int, authorized_keys: list[str]) -> None:
        self.key_updates.append((instance_id, authorized_keys))


def _free_world(seed: int = 7) -> World:
    world = generate_world(seed, now=FakeClock().now())
    return dataclasses.replace(world, machines=[dataclasses.replace(m, rented=False, rentable=True)
                                                for m in world.machines])


def _request(image: str = BIG_IMAGE, *, disk: float = 20.0, label: str | None = "bench") -> CreateRequest:
    return CreateRequest.from_body({"image": image, "disk": disk, "label": label, "runtype": "ssh_direc ssh_proxy",
                                    "env": {"A": "1", "-p 8080:8080": "1"}})


def _machine(world: World, *, fault: Fault = Fault.NONE, cached: bool | None = None) -> Machine:
    return next(m for m in world.machines if m.truth.fault is fault
                and (cached is None or m.truth.image_cached is cached))


def _status(st: InstanceState) -> InstanceStatus:
    """Read through a call: the state changes behind mypy's back (inside awaited market calls)."""
    return st.status


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def provider() -> FakeHostProvider:
    return FakeHostProvider()


@pytest.fixture
def market(clock: FakeClock, provider: FakeHostProvider) -> Market:
    return Market(_free_world(), clock=clock, api_key="k", initial_credit_usd=100.0, host_provider=provider,
                  realism=KIND)


async def test_loading_lasts_the_pull_time_then_running_with_a_host(market: Market, clock: FakeClock,
                                                                    provider: FakeHostProvider) -> None:
    machine = _machine(market.world)
    market.account.add_key("ssh-ed25519 AAAAaccount op@desk", at=clock.now())
    st = await market.create_instance(machine.offer_id, _request())
    truth = machine.truth
    loading_s = 6000.0 / truth.image_pull_mb_per_s + truth.readiness_s
    assert st.ready_at == pytest.approx(clock.now() + loading_s)
    clock.advance(loading_s - 1)
    row = await market.show_instance(st.id)
    assert row is not None and row["actual_status"] == "loading" and row["ports"] == {}
    assert provider.started == {}
    clock.advance(2)
    row = await market.show_instance(st.id)
    assert row is not None and row["actual_status"] == "running"
    assert provider.started == {st.id: ["ssh-ed25519 AAAAaccount op@desk"]}
    assert row["ssh_host"] == row["public_ipaddr"] == "127.0.0.1"
    assert isinstance(row["ssh_port"], int) and row["ports"]["22/tcp"][0]["HostPort"] == str(row["ssh_port"])
    assert "8080/tcp" in row["ports"]
    assert row["extra_env"] == [["A", "1"]] and row["label"] == "bench"
    assert row["image_runtype"] == "ssh_direc ssh_proxy" and isinstance(row["start_date"], float)


async def test_cached_popular_image_skips_the_pull(market: Market, clock: FakeClock) -> None:
    machine = _machine(market.world, cached=True)
    st = await market.create_instance(machine.offer_id, _request("pytorch/pytorch:2.3.0-cuda12.1"))
    assert st.ready_at == pytest.approx(clock.now() + machine.truth.readiness_s)


async def test_stuck_loading_never_runs(market: Market, clock: FakeClock, provider: FakeHostProvider) -> None:
    machine = _machine(market.world, fault=Fault.STUCK_LOADING)
    st = await market.create_instance(machine.offer_id, _request())
    clock.advance(7 * 86400)
    row = await market.show_instance(st.id)
    assert row is not None and row["actual_status"] == "loading"
    assert provider.started == {}
    assert market.charges_of(st.id).gpu_usd == 0 and market.charges_of(st.id).storage_usd > 0


async def test_billing_storage_from_creation_gpu_only_while_running(market: Market, clock: FakeClock) -> None:
    machine = _machine(market.world)
    st = await market.create_instance(machine.offer_id, _request(disk=50))
    assert st.ready_at is not None
    loading_s = st.ready_at - clock.now()
    clock.advance(loading_s + 3600)
    await market.refresh()
    storage_dph = machine.storage_cost * 50 / 720
    charges = market.charges_of(st.id)
    assert charges.gpu_usd == pytest.approx(machine.dph_base, rel=1e-6)
    assert charges.storage_usd == pytest.approx(storage_dph * (loading_s + 3600) / 3600, rel=1e-6)
    assert market.account.credit_usd == pytest.approx(100.0 - charges.total_usd, rel=1e-9)
    assert (await market.user())["credit"] == pytest.approx(market.account.credit_usd, abs=1e-5)
    # stopped: storage keeps billing, GPUs do not
    await market.set_state([st.id], "stopped")
    before = market.charges_of(st.id)
    clock.advance(7200)
    await market.refresh()
    after = market.charges_of(st.id)
    assert after.gpu_usd == pytest.approx(before.gpu_usd)
    assert after.storage_usd - before.storage_usd == pytest.approx(storage_dph * 2, rel=1e-6)
    # destroyed: nothing more, and the offer is rentable again
    await market.destroy([st.id])
    gone = market.charges_of(st.id)
    clock.advance(86400)
    await market.refresh()
    assert market.charges_of(st.id) == gone
    assert await market.show_instance(st.id) is None
    offers = await market.search({"rentable": {"eq": True}, "machine_id": {"eq": machine.machine_id}})
    assert [o["id"] for o in offers] == [machine.offer_id]


async def test_second_rent_of_an_offer_is_refused(market: Market) -> None:
    machine = _machine(market.world)
    await market.create_instance(machine.offer_id, _request())
    with pytest.raises(MarketError) as info:
        await market.create_instance(machine.offer_id, _request())
    assert info.value.status == 400 and info.value.code == "no_such_ask" and "rented" in info.value.msg
    with pytest.raises(MarketError) as missing:
        await market.create_instance(1, _request())
    assert missing.value.status == 404
    offers = await market.search({"machine_id": {"eq": machine.machine_id}})
    assert offers[0]["rented"] is True and offers[0]["rentable"] is False


async def test_rent_refusals(market: Market) -> None:
    machine = _machine(market.world)
    with pytest.raises(MarketError, match="disk"):
        await market.create_instance(machine.offer_id, _request(disk=machine.disk_space_gb + 1))
    with pytest.raises(MarketError, match="image"):
        CreateRequest.from_body({"disk": 10})
    low_bid = CreateRequest.from_body({"image": BIG_IMAGE, "price": machine.min_bid / 2})
    with pytest.raises(MarketError, match="below the minimum"):
        await market.create_instance(machine.offer_id, low_bid)
    market.chaos.offer_stolen_rate = 1.0
    with pytest.raises(MarketError, match="just rented"):
        await market.create_instance(machine.offer_id, _request())
    market.chaos.offer_stolen_rate = 0.0
    assert market.is_rented(machine)


async def test_stop_start_restarts_the_host(market: Market, clock: FakeClock, provider: FakeHostProvider) -> None:
    st = await market.create_instance(_machine(market.world).offer_id, _request())
    clock.advance(10_000)
    await market.refresh()
    assert _status(st) is InstanceStatus.RUNNING
    await market.set_state([st.id], "stopped")
    assert provider.stopped == [st.id] and st.host is None
    row = await market.show_instance(st.id)
    assert row is not None and row["actual_status"] == "stopped" and row["intended_status"] == "stopped"
    await market.set_state([st.id], "running")
    assert _status(st) is InstanceStatus.LOADING
    assert st.ready_at == pytest.approx(clock.now() + st.machine.truth.readiness_s)  # image now on the host
    clock.advance(st.machine.truth.readiness_s + 1)
    await market.refresh()
    assert _status(st) is InstanceStatus.RUNNING and st.host == "127.0.0.1"
    with pytest.raises(MarketError, match="Unknown state"):
        await market.set_state([st.id], "paused")
    await market.reboot(st.id)
    assert _status(st) is InstanceStatus.LOADING and provider.stopped == [st.id, st.id]


async def test_prepay_pays_first_at_a_discount(market: Market, clock: FakeClock) -> None:
    st = await market.create_instance(_machine(market.world).offer_id, _request())
    timescale, discount = await market.prepay(st.id, 20.0)
    assert timescale == pytest.approx(20.0 / (st.dph_total * 720))
    assert 0 < discount <= 0.3
    assert market.account.credit_usd == pytest.approx(80.0)
    clock.advance(3600)
    await market.refresh()
    charges = market.charges_of(st.id)
    assert charges.paid_usd == pytest.approx(charges.total_usd * (1 - discount), rel=1e-6)
    assert market.account.credit_usd == pytest.approx(80.0)  # the deposit paid
    with pytest.raises(MarketError, match="Insufficient"):
        await market.prepay(st.id, 1000.0)
    assert (await market.deposit(st.id))["refundable_deposit"] == pytest.approx(20.0 - charges.paid_usd)


async def test_running_out_of_credit_stops_instances(clock: FakeClock) -> None:
    market = Market(_free_world(), clock=clock, api_key="k", initial_credit_usd=1.0, realism=KIND)
    machine = max((m for m in market.world.machines if m.truth.fault is Fault.NONE), key=lambda m: m.dph_base)
    st = await market.create_instance(machine.offer_id, _request())
    clock.advance(86400)
    row = await market.show_instance(st.id)
    assert row is not None and row["actual_status"] == "stopped" and "credit" in row["status_msg"]
    assert market.account.credit_usd <= 0
    with pytest.raises(MarketError, match="credit"):
        await market.create_instance(_machine(market.world).offer_id, _request())


async def test_host_death_takes_the_instance_offline(market: Market, clock: FakeClock,
                                                     provider: FakeHostProvider) -> None:
    st = await market.create_instance(_machine(market.world).offer_id, _request())
    clock.advance(10_000)
    await market.refresh()
    await market.mark_offline(st.id)
    row = await market.show_instance(st.id)
    assert row is not None and row["actual_status"] == "offline" and provider.stopped == [st.id]
    gpu = market.charges_of(st.id).gpu_usd
    clock.advance(3600)
    await market.refresh()
    assert market.charges_of(st.id).gpu_usd == gpu
    with pytest.raises(MarketError, match="offline"):
        await market.set_state([st.id], "running")


async def test_attached_keys_reach_the_running_host(market: Market, clock: FakeClock,
                                                    provider: FakeHostProvider) -> None:
    st = await market.create_instance(_machine(market.world).offer_id, _request())
    clock.advance(10_000)
    await market.refresh()
    key_id = await market.attach_key(st.id, "ssh-ed25519 AAAAlate late@desk")
    assert provider.key_updates[-1] == (st.id, ["ssh-ed25519 AAAAlate late@desk"])
    await market.detach_key(st.id, key_id)
    assert provider.key_updates[-1] == (st.id, [])
    with pytest.raises(MarketError):
        await market.attach_key(st.id, "not a key")


async def test_background_poll_starts_hosts_without_requests(market: Market, clock: FakeClock,
                                                             provider: FakeHostProvider) -> None:
    st = await market.create_instance(_machine(market.world).offer_id, _request())
    clock.advance(10_000)
    poller = asyncio.create_task(market.run(poll_interval_s=0.01))
    async with asyncio.timeout(5):
        while st.id not in provider.started:
            await asyncio.sleep(0.01)
    await market.aclose()
    await asyncio.wait_for(poller, 5)
    assert provider.stopped == [st.id]


async def test_an_image_pull_is_billed_as_traffic_and_loading_bills_the_disk_only(market: Market,
                                                                                  clock: FakeClock) -> None:
    machine = next(m for m in market.world.machines if m.inet_down_cost > 0 and not m.truth.image_cached
                   and m.truth.fault is Fault.NONE)
    st = await market.create_instance(machine.offer_id, _request())
    size_gb = image_size_mb(st.request.image) / 1000.0
    assert market.charges_of(st.id).bandwidth_usd == pytest.approx(size_gb * machine.inet_down_cost)
    assert st.ready_at is not None
    clock.advance((st.ready_at - clock.now()) / 2)          # still loading: the disk bills, the GPUs do not
    await market.refresh()
    charges = market.charges_of(st.id)
    assert charges.gpu_usd == 0.0 and charges.storage_usd > 0.0


async def test_truth_is_reachable_for_tests_only_by_machine_id(market: Market) -> None:
    machine = market.world.machines[5]
    assert market.truth_of(machine.machine_id) is machine.truth
    assert "truth" not in (await market.search({"machine_id": {"eq": machine.machine_id}}))[0]


async def test_traffic_is_billed_at_the_machine_prices(market: Market) -> None:
    machine = next(m for m in market.world.machines if m.inet_down_cost > 0 and m.truth.fault is Fault.NONE)
    st = await market.create_instance(machine.offer_id, _request())
    credit = market.account.credit_usd
    pulled_usd = market.charges_of(st.id).bandwidth_usd      # the image pull, charged when it started
    amount = await market.charge_traffic(st.id, down_gb=100, up_gb=10)
    assert amount == pytest.approx(100 * machine.inet_down_cost + 10 * machine.inet_up_cost)
    assert market.charges_of(st.id).bandwidth_usd == pytest.approx(pulled_usd + amount)
    assert market.account.credit_usd == pytest.approx(credit - amount - market.charges_of(st.id).storage_usd)
