"""Shared pieces of the campaign tests: a fast variant of the example manifest (same workload, shorter blocks), and
a scripted wire in front of the simulator (listings that fail, destroys that never land, an API outage)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import httpx

from vastui.bench.manifest import load_manifest
from vastui.bench.receipt import Receipt, WorkloadIdentity
from vastui.bench.select import decide_profile
from vastui.campaign.plan import build_plan
from vastui.clock import Clock
from vastui.sim.chaos import Chaos
from vastui.sim.hosts import SshHostPool
from vastui.sim.machine import Machine, World
from vastui.sim.market import Market
from vastui.sim.offers import offer_row
from vastui.sim.physics import HostSpec, Precision, Variant, plan_step
from vastui.sim.realism import Realism
from vastui.sim.request_log import RequestRecord
from vastui.sim.truth import Fault
from vastui.sim.world import generate_world
from vastui.store import SqliteStore
from vastui.vast.models import Offer

LISTING_PATH = "/api/v1/instances/"
DESTROY_PATH = re.compile(r"^/api/v0/instances/(\d+)/$")
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "resnet.toml"


def fast_manifest(directory: Path, *, budget_usd: float | None = None, max_candidates: int = 4,
                  tune_precision: bool = False, max_lifetime_s: int | None = None,
                  readiness_min_s: int | None = None) -> Path:
    """The example workload with short warm-up and blocks, so a whole campaign takes seconds of wall time.

    Tuning is off (one value per knob) unless ``tune_precision``: then only fp32 -> bf16 is tried.
    """
    text = EXAMPLE.read_text(encoding="utf-8")
    replacements = {
        r"(?m)^min_s = 30$": "min_s = 10",
        r"(?m)^min_steps = 20$": "min_steps = 5",
        r"(?m)^window = 10$": "window = 5",
        r"(?m)^cap_s = 180$": "cap_s = 60",
        r"(?m)^block_s = 30$": "block_s = 10",
        r"(?m)^block_min_steps = 20$": "block_min_steps = 3",
        r"(?m)^min_blocks = 5$": "min_blocks = 3",
        r"(?m)^winner_min_blocks = 10$": "winner_min_blocks = 5",
        r"(?m)^max_blocks = 30$": "max_blocks = 8",
        r"(?m)^max_candidates = 8$": f"max_candidates = {max_candidates}",
        r"(?m)^latency_max_ms = 2000$": "latency_max_ms = 5000",
        r'(?m)^latency_percentile = "p99"$': 'latency_percentile = "p90"',
    }
    replacements[r"(?m)^batch_sizes = \[64, 128, 256\]$"] = "batch_sizes = [64]"
    replacements[r"(?m)^loaders = \[4, 8\]$"] = "loaders = [4]"
    if not tune_precision:
        replacements[r'(?m)^precisions = \["fp32", "bf16"\]$'] = 'precisions = ["fp32"]'
    if budget_usd is not None:
        replacements[r"(?m)^max_usd = 5.00$"] = f"max_usd = {budget_usd}"
    if max_lifetime_s is not None:
        replacements[r"(?m)^max_instance_lifetime_s = 3600$"] = f"max_instance_lifetime_s = {max_lifetime_s}"
    if readiness_min_s is not None:
        replacements[r"(?m)^readiness_min_s = 600$"] = f"readiness_min_s = {readiness_min_s}"
    for pattern, new in replacements.items():
        text, count = re.subn(pattern, new, text)
        assert count == 1, pattern
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE.with_name("resnet-canary.jsonl"), directory / "resnet-canary.jsonl")
    path = directory / "fast.toml"
    path.write_text(text, encoding="utf-8")
    return path


# Latency allowed between the engine stopping work and the simulator answering the destroy, in simulated seconds:
# at the tests' time scale of 300, 300 s is one second of wall time on a slow machine (the engine stops work
# DESTROY_MARGIN_S before the deadline, so a fast machine has that much more).
DESTROY_SLACK_S = 300.0


def first_destroys(request_log: Iterable[RequestRecord]) -> dict[int, float]:
    """Instance id -> market time of the first destroy the simulator answered with 200."""
    assert getattr(request_log, "dropped", 0) == 0, "the simulator's request log dropped records this test needs"
    first: dict[int, float] = {}
    for request in request_log:
        if request.method == "DELETE" and request.status == 200 and (m := DESTROY_PATH.match(request.path)):
            first.setdefault(int(m.group(1)), request.at)
    return first


async def destroys_past_deadline(db_path: Path, campaign_id: str, destroyed_at: dict[int, float]) -> list[str]:
    """Every rented instance of the campaign whose destroy came later than its approved deadline (plus slack)."""
    store = await SqliteStore.open(db_path)
    try:
        intents = await store.intents(campaign_id=campaign_id)
    finally:
        await store.close()
    late = []
    for intent in intents:
        if intent.instance_id is None or intent.deadline_at is None:
            continue
        at = destroyed_at.get(intent.instance_id)
        if at is None or at > intent.deadline_at + DESTROY_SLACK_S:
            late.append(f"instance {intent.instance_id}: destroyed at {at}, deadline {intent.deadline_at}")
    return late


class ScriptedMarket(httpx.AsyncBaseTransport):
    """Forwards to the simulator; each instance *listing* (a first-page request and the pages after it) follows
    the next entry of ``script`` (then "ok"):

    - ``ok``: as the simulator answers;
    - ``drop``: the first page fails in transit;  ``503``: the first page answers HTTP 503;
    - ``lose-page-2``: the first page arrives, every later page fails in transit;
    - ``hide``: every page arrives without the instances in ``hidden`` (a listing that misses them).

    DELETEs of ids in ``swallowed`` are answered "success" without reaching the simulator (the destroy never lands).
    Until ``down_until`` (on ``clock``) every request fails to connect: an API outage.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, clock: Clock) -> None:
        self.inner = inner
        self.clock = clock
        self.down_until: float | None = None
        self.refused_in_outage = 0
        self.script: list[str] = []
        self.hidden: set[int] = set()
        self.swallowed: set[int] = set()
        self.listings: list[tuple[float, str]] = []  # (time, what that listing got)
        self.destroys: list[int] = []
        self._current = "ok"

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.down_until is not None and self.clock.now() < self.down_until:
            self.refused_in_outage += 1
            raise httpx.ConnectError("connection refused (the API is down)", request=request)
        path = request.url.path
        if request.method == "GET" and path == LISTING_PATH:
            return await self._listing(request)
        match = DESTROY_PATH.match(path)
        if request.method == "DELETE" and match:
            instance_id = int(match.group(1))
            self.destroys.append(instance_id)
            if instance_id in self.swallowed:
                return httpx.Response(200, json={"success": True}, request=request)
        return await self.inner.handle_async_request(request)

    async def _listing(self, request: httpx.Request) -> httpx.Response:
        first_page = "after_token" not in request.url.params
        if first_page:
            self._current = self.script.pop(0) if self.script else "ok"
            self.listings.append((self.clock.now(), self._current))
            if self._current == "drop":
                raise httpx.ConnectError("connection reset by peer", request=request)
            if self._current == "503":
                return httpx.Response(503, json={"success": False, "error": "unavailable"}, request=request)
        elif self._current == "lose-page-2":
            raise httpx.ConnectError("connection reset on a later page", request=request)
        response = await self.inner.handle_async_request(request)
        if self._current != "hide":
            return response
        body = json.loads(await response.aread())
        body["instances"] = [row for row in body["instances"] if row["id"] not in self.hidden]
        return httpx.Response(response.status_code, json=body, request=request)


def receipt_with(*, leaked: tuple[int, ...], campaign_id: str = "cfeedbee") -> Receipt:
    """A receipt of a campaign that chose nothing, with ``leaked`` instances left (none: its teardown passed)."""
    manifest = load_manifest(EXAMPLE)
    return Receipt(campaign_id=campaign_id, created_at=1_800_000_000.0,
                   workload=WorkloadIdentity.from_manifest(manifest), units=manifest.production_units,
                   warmup_policy="-", candidates=(), decision=decide_profile([], units=manifest.production_units),
                   approvals=(), destroyed=(), leaked_instance_ids=leaked, campaign_cost_usd=0.0)


class ManualClock:
    """A clock that moves only when the test advances it; ``sleep`` really waits for that."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._tick = asyncio.Event()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._tick.set()
        self._tick = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        target = self._now + max(0.0, seconds)
        while self._now < target:
            await self._tick.wait()


_DAY_S = 86_400.0


def market_of(machines: list[Machine]) -> object:
    """Stands in for ``build_market_with_hosts``: the same real market and SSH hosts, over these machines (listed
    from the clock's now) instead of a seeded world."""

    def build(seed: int, *, clock: Clock, hosts_dir: Path, chaos: Chaos | None, api_key: str,
              realism: Realism | None) -> tuple[Market, SshHostPool]:
        now = clock.now()
        listed = [dataclasses.replace(m, start_date=now - _DAY_S, end_date=now + 30 * _DAY_S) for m in machines]
        pool = SshHostPool(base_dir=hosts_dir, clock=clock, realism=realism, seed=seed)
        market = Market(World(seed=seed, generated_at=now, machines=listed), clock=clock, api_key=api_key,
                        host_provider=pool, chaos=chaos, realism=realism)
        pool.on_host_died = market.mark_offline
        return market, pool

    return build


# Hand-built markets (a test's own machines, served by the real market and SSH hosts: ``market_of``).
HAND_BUILT_AT = 1_800_000_000.0
FIRST_PROFILE = Variant(batch_size=64, precision=Precision.FP32, loaders=4, gpus=1)   # the fast manifest's


def steady_shortlisted(tmp_path: Path, *, units_per_s: float) -> Machine:
    """The fast manifest's first shortlisted machine of the seed-7 world, made steady (1 % run-to-run noise),
    fault-free, quick to ready and compute-bound at ``units_per_s`` at the first profile."""
    world = generate_world(7, n_machines=120, now=HAND_BUILT_AT)
    offers = [Offer.from_api(offer_row(m, now=HAND_BUILT_AT, rented=False), where="row") for m in world.machines]
    plan = build_plan(campaign_id="chand", manifest=load_manifest(fast_manifest(tmp_path / "plain")), offers=offers,
                      knowledge=(), bad_hosts=())
    base = world.machine(plan.candidates[0].offer.machine_id)
    truth = dataclasses.replace(base.truth, data_units_per_s_per_loader=1e6, max_loaders=64, pcie_gb_per_s=64.0,
                                disk_mb_per_s=1e5, noise_cv=0.01, fault=Fault.NONE, fault_after_s=None,
                                readiness_s=30.0)
    speed = plan_step(HostSpec.from_machine(dataclasses.replace(base, truth=truth)), FIRST_PROFILE).units_per_s
    truth = dataclasses.replace(truth, compute_units_per_s=truth.compute_units_per_s * units_per_s / speed)
    return dataclasses.replace(base, rented=False, rentable=True, truth=truth)


def twin(machine: Machine, *, speed: float = 1.0, price: float = 1.0, noise_cv: float | None = None) -> Machine:
    """``machine`` on another host: the same GPU, network and startup, ``speed`` times as fast, ``price`` times the
    price (and its own run-to-run noise, when given)."""
    twin_id = machine.machine_id + 500_000
    truth = dataclasses.replace(machine.truth, machine_id=twin_id,
                                compute_units_per_s=machine.truth.compute_units_per_s * speed,
                                noise_cv=machine.truth.noise_cv if noise_cv is None else noise_cv)
    return dataclasses.replace(machine, offer_id=machine.offer_id + 500_000, machine_id=twin_id,
                               host_id=machine.host_id + 500_000, dph_base=price * machine.dph_base,
                               min_bid=price * machine.min_bid, truth=truth)


def edit_manifest(path: Path, replacements: dict[str, str]) -> Path:
    """``path`` rewritten, each pattern (a regular expression) replaced exactly once."""
    text = path.read_text(encoding="utf-8")
    for pattern, new in replacements.items():
        text, count = re.subn(pattern, new, text)
        assert count == 1, pattern
    path.write_text(text, encoding="utf-8")
    return path
