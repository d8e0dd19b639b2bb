"""A campaign-sized event stream through the bus into the console, against dropping the events.

What it measures: 8 candidates x 8 GPUs, a GPU sample per GPU and a progress marker per candidate every simulated
second for 30 simulated minutes (plus a block and the standings every 30 s): about 130k events, published on the
``EventBus`` one simulated second at a time. Ours: a headless ``VastuiApp`` follows the campaign (subscription, one
snapshot per burst, the GPUs view redrawn — its 64 rows with their sparklines — after every simulated second, as it
would be at 1 Hz). Baseline, interleaved in the same run: the same stream through the same bus to a subscriber that
drops every event. The campaign's own tracker listens in both (it is the campaign's, not the console's).

It prints events per CPU second for both (the console waits for each picture, so wall time would count its idle
turns of the loop), and the share of one core each needs to keep up with the stream in real time (CPU
seconds over the stream's 1,800 wall seconds at 1 Hz); the baseline's share is what publishing and the campaign's
tracker alone cost.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from timing import parse_options

from vastui.bench.manifest import load_manifest
from vastui.campaign.handle import CampaignResult
from vastui.campaign.plan import Plan, build_plan
from vastui.campaign.snapshot import CampaignSnapshot
from vastui.campaign.tracker import CampaignTracker
from vastui.clock import MonotonicClock
from vastui.events import (
    Band,
    BlockMeasured,
    CampaignStarted,
    CandidatePhaseChanged,
    Event,
    EventBus,
    InstanceRented,
    SampleTaken,
)
from vastui.events_live import ProgressReported, StandingRow, StandingsUpdated
from vastui.sim.offers import offer_row
from vastui.sim.world import generate_world
from vastui.tui.app import VastuiApp
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.vast.models import InstanceListing, Offer, User

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_800_000_000.0
BLOCK_S = 30


class Answers:
    """A broker that is never asked anything (the stream holds no approval requests)."""

    wall = MonotonicClock()

    def approve(self, request_id: str, *, by: str = "") -> bool:
        return False

    def refuse(self, request_id: str, *, by: str = "", reason: str = "") -> bool:
        return False

    def approve_plan(self, *, by: str = "") -> int:
        return 0

    def stop_asking(self, reason: str) -> int:
        return 0


class StreamedCampaign:
    """A ``CampaignSource`` whose events come from the benchmark, folded by the campaign's real tracker."""

    def __init__(self, plan: Plan, bus: EventBus) -> None:
        self.campaign_id = plan.campaign_id
        self.bus = bus
        self.broker = Answers()
        self.is_done = False
        self._tracker = CampaignTracker(plan=plan, workload="bench", created_at=T0)
        self.stop = bus.listen(self._tracker.apply)
        self.now = T0

    def snapshot(self) -> CampaignSnapshot:
        return self._tracker.snapshot(now=self.now, pending=())

    def abort(self, reason: str) -> None:
        pass

    async def result(self, *, abort_if_cancelled: str | None = None) -> CampaignResult:
        await asyncio.Event().wait()   # this campaign never ends; the benchmark cancels the wait
        raise AssertionError("unreachable")


class CannedMarket:
    async def search_offers_body(self, body: Mapping[str, object]) -> list[Offer]:
        return []

    async def list_instances(self) -> InstanceListing:
        return InstanceListing(instances=(), is_complete=True)

    async def get_user(self) -> User:
        return User(id=1, username="bench", email=None, fullname=None, credit=100.0, balance=0.0, can_pay=True,
                    has_billing=True)


def plan_of(candidates: int) -> Plan:
    manifest = load_manifest(ROOT / "examples" / "resnet.toml")
    world = generate_world(7, n_machines=200, now=T0)
    offers = [Offer.from_api(offer_row(m, now=T0, rented=False)) for m in world.machines]
    plan = build_plan(campaign_id="cbench", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
    assert len(plan.candidates) >= candidates, len(plan.candidates)
    return plan


def stream(plan: Plan, *, candidates: int, gpus: int, seconds: int) -> list[list[Event]]:
    """The events of each simulated second, built before timing."""
    cids = [c.candidate_id for c in plan.candidates[:candidates]]
    cid = plan.campaign_id
    first: list[Event] = [CampaignStarted(at=T0, campaign_id=cid, workload="bench", manifest_digest="d")]
    for n, c in enumerate(plan.candidates[:candidates]):
        first += [InstanceRented(at=T0, campaign_id=cid, candidate=c.candidate_id, offer_id=c.offer.id,
                                 instance_id=1000 + n, dph_total=c.offer.dph_total),
                  CandidatePhaseChanged(at=T0, campaign_id=cid, candidate=c.candidate_id, phase="measuring")]
    seconds_out = [first]
    for t in range(seconds):
        at = T0 + t + 1
        events: list[Event] = []
        for n, c in enumerate(cids):
            starved = n == 0
            for g in range(gpus):
                util = 35.0 + (t + g) % 7 if starved else 92.0 + (t + g) % 5
                events.append(SampleTaken(at=at, campaign_id=cid, candidate=c, gpu_index=g, util_pct=util,
                                          mem_used_mib=18_000.0 + g, mem_total_mib=24_564.0,
                                          power_w=120.0 + util * 3, instance_id=1000 + n, purpose="race"))
            events.append(ProgressReported(at=at, campaign_id=cid, candidate=c, instance_id=1000 + n, purpose="race",
                                           units=100, accepted=100, data_wait_s=0.4 if starved else 0.02,
                                           compute_s=0.6 if starved else 0.98, steps=3, units_total=100 * (t + 1),
                                           accepted_total=100 * (t + 1)))
            if (t + 1) % BLOCK_S == 0:
                events.append(BlockMeasured(at=at, campaign_id=cid, candidate=c, block_index=(t + 1) // BLOCK_S,
                                            throughput_units_per_s=100.0 + n, data_wait_share=0.4 if starved else 0.02,
                                            gpu_util_pct=90.0))
        if (t + 1) % BLOCK_S == 0:
            rows = tuple(StandingRow(c, (t + 1) // BLOCK_S, 100.0 + n, Band(0.001, 0.0009, 0.0011), "met", True, None)
                         for n, c in enumerate(cids))
            events.append(StandingsUpdated(at=at, campaign_id=cid, leader=cids[0], rows=rows, spent_usd=0.01 * t,
                                           reserved_usd=1.0, budget_usd=5.0, finished=False, reason="racing"))
        seconds_out.append(events)
    return seconds_out


@dataclass(frozen=True, slots=True)
class Run:
    events: int
    wall_s: float
    cpu_s: float


async def through_console(plan: Plan, chunks: list[list[Event]]) -> Run:
    bus = EventBus(queue_size=100_000)
    source = StreamedCampaign(plan, bus)
    services = ConsoleServices(market=CannedMarket(), clock=_Clock(source), bus=bus)  # type: ignore[arg-type]
    app = VastuiApp(services=services, campaign=source,
                    settings=ConsoleSettings(live=False, initial_view="gpus", campaign_redraw_s=0.0))
    async with app.run_test(size=(160, 48), headless=True) as pilot:
        while app.state.campaign is None:
            await pilot.pause()
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        for chunk in chunks:
            source.now = chunk[-1].at if chunk else source.now
            for event in chunk:
                bus.publish(event)
            while (picture := app.state.campaign) is None or picture.snapshot.seq < bus.last_seq:
                await pilot.pause()   # until the console drew this second
        run = Run(sum(map(len, chunks)), time.perf_counter() - start_wall, time.process_time() - start_cpu)
    source.stop()
    return run


async def dropped(plan: Plan, chunks: list[list[Event]]) -> Run:
    bus = EventBus(queue_size=100_000)
    source = StreamedCampaign(plan, bus)
    subscription = bus.subscribe()
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    for chunk in chunks:
        for event in chunk:
            bus.publish(event)
        while not subscription.empty():
            subscription.get_nowait()   # dropped
        await asyncio.sleep(0)
    run = Run(sum(map(len, chunks)), time.perf_counter() - start_wall, time.process_time() - start_cpu)
    source.stop()
    bus.unsubscribe(subscription)
    return run


class _Clock:
    def __init__(self, source: StreamedCampaign) -> None:
        self._source = source

    def now(self) -> float:
        return self._source.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()   # nothing in the benchmark waits on the campaign's clock


async def main_async(*, quick: bool) -> None:
    candidates, gpus, seconds, repeats = (2, 2, 30, 1) if quick else (8, 8, 1800, 1)   # one run: 1,800 draws
    plan = plan_of(candidates)
    chunks = stream(plan, candidates=candidates, gpus=gpus, seconds=seconds)
    ours: list[Run] = []
    base: list[Run] = []
    for _ in range(repeats):
        ours.append(await through_console(plan, chunks))
        base.append(await dropped(plan, chunks))
    n = ours[0].events
    rate = statistics.median(r.events / r.cpu_s for r in ours)   # per second of one core: waits are not work
    base_rate = statistics.median(r.events / r.cpu_s for r in base)
    share = 100 * statistics.median(r.cpu_s for r in ours) / seconds
    base_share = 100 * statistics.median(r.cpu_s for r in base) / seconds
    print(f"# {candidates} candidates x {gpus} GPUs, 1 Hz for {seconds} simulated s: {n:,} events; median of "
          f"{repeats}; the console draws the GPUs view once per simulated second; baseline drops every event")
    print(f"events.console vs dropped: {rate:,.0f} events/s (baseline {base_rate:,.0f} events/s) -> ratio "
          f"{rate / base_rate:.3g}×")
    print(f"events.console share of one core at 1 Hz vs dropped: {share:.3g} %core (baseline {base_share:.3g} %core) "
          f"-> ratio {share / base_share:.3g}×")


def main() -> None:
    options = parse_options(__doc__)
    asyncio.run(main_async(quick=options.quick))


if __name__ == "__main__":
    main()
