"""How good vastui's decisions are, judged by the simulator's hidden truth, against simple strategies.

    python benchmarks/decision_quality.py --markets 30 --seed 1        (minutes to hours of wall time)
    python benchmarks/decision_quality.py --quick                      (two small markets: the smoke test)
    python benchmarks/decision_quality.py --markets 4 --repeat         (and a second campaign on each, a week on)

For each seeded market: the oracle's true cost per accepted unit for every offer the manifest allows (the benchmark
reads the truth; the campaign never does), a full campaign (approved as a printed plan), and on the same market
the choices of: the top ``dlperf_usd`` offer, the cheapest $/h offer, vastui's own prior (the plan's first
candidate, unmeasured), and benchmark-everything on the shortlist (same protocol, no racing — modelled, not run:
its choice is taken as the shortlist's true best, its spend and time priced on its own protocol from the truth,
``EverythingModel``; the older model, the campaign's bills plus every block racing saved, is printed beside it).

Per strategy: regret (true cost of the choice over the oracle's best, minus one) p50/p95/max, the share of markets
within 3 % and 10 %, wrong-output choices; for vastui also spend (and its share of benchmark-everything's, and
what it paid for: loading and traffic, blocks, tuning, the rest of the GPU time), wall time, interval coverage (the true cost, SLO aside, inside each finalist's 95 % interval and inside that interval
narrowed to 90 %, which the summary gives), the end-to-end regret (its choice at the profile tuning left it at,
against the best pair of offer and allowed profile in the market), startup error, whether a certified SLO holds in the truth, the oracle's validation
(measured vs true throughput in units of the host's run-to-run noise) and how varied the market's truth is.
The manifest is the example's with short warm-ups and blocks (so a market takes seconds) and the method's own
shortlist of up to 8 offers, 4 rented at a time. Workloads rotate over a mix: compute-bound, input-bound (one loader), startup-heavy with a short production run,
and multi-GPU offers allowed. The last line is one summary.

The oracle's true cost uses the same billing model and formula as the engine, with the truth's throughput, pull and
readiness; an offer whose true speed or step latency misses the manifest's SLO, or a faulty host (wrong output, stuck
in loading, or dying before the production run is done), costs infinity; a throttling one runs at its throttled speed
after the fault. Warm-up costs what the simulated workload's slower first steps cost.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from vastui.bench.cost import CostInputs, cost_per_accepted_unit
from vastui.bench.manifest import Manifest, load_manifest
from vastui.bench.select import RaceEnd
from vastui.bench.tuning import Profile
from vastui.campaign.candidate import ScreeningPart
from vastui.campaign.charges import bill_of
from vastui.campaign.inherited import largest_batch_held
from vastui.campaign.plan import readiness_deadline_s
from vastui.campaign.prior import DISK_GIB
from vastui.campaign.startup import rates_of
from vastui.events import CandidatePhaseChanged, Event
from vastui.events_live import CampaignPhaseChanged, TuningFinished
from vastui.sim.demo import EXAMPLES_DIR, open_demo
from vastui.sim.images import image_size_mb, is_popular
from vastui.sim.market import Market
from vastui.sim.physics import HostSpec, Precision, Variant, plan_step
from vastui.sim.realism import Realism
from vastui.sim.redraw import LaterMarket, later_market
from vastui.sim.simworkload import WARMUP_SLOWDOWN
from vastui.sim.truth import Fault
from vastui.vast.models import Offer

STRATEGIES = ("vastui", "top dlperf_usd", "cheapest $/h", "vastui prior", "benchmark-everything")
WARMUP_STEPS = 10          # the simulated workload's default warm-up steps
# Simulated seconds per wall second. Every step of the console's own work (an agent start, a record's round trip)
# is wall time the clock bills this many times over; at x120 a slow 2-core machine left most chosen machines no
# time to tune, so the figures were the machine's more than the method's (docs/benchmarks.md). x40 keeps a
# campaign about a minute of wall time.
TIME_SCALE = 40.0
Z90_OVER_Z95 = 1.6449 / 1.9600   # a 95 % interval's half-widths narrowed to 90 % (normal approximation)
REPEAT_KEPT_SHARE = 0.7          # --repeat: the share of hosts still listed a week later (sim/redraw.py)


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    name: str
    edits: dict[str, str]


MIX = (
    WorkloadKind("compute-bound", {}),
    WorkloadKind("input-bound", {r"(?m)^loaders = \[4, 8\]$": "loaders = [1, 4]"}),
    WorkloadKind("startup-heavy", {r"(?m)^units = 20000$": "units = 3000"}),
    WorkloadKind("multi-gpu", {r"(?m)^gpu_counts = \[1\]$": "gpu_counts = [1, 2]"}),
)
# Short warm-ups and blocks, so a market takes seconds; ``--protocol method`` keeps the method's own (the example's).
FAST = {r"(?m)^min_s = 30$": "min_s = 10", r"(?m)^min_steps = 20$": "min_steps = 5", r"(?m)^window = 10$": "window = 5",
        r"(?m)^cap_s = 180$": "cap_s = 60", r"(?m)^block_s = 30$": "block_s = 10",
        r"(?m)^block_min_steps = 20$": "block_min_steps = 3", r"(?m)^min_blocks = 5$": "min_blocks = 3",
        r"(?m)^winner_min_blocks = 10$": "winner_min_blocks = 5", r"(?m)^max_blocks = 30$": "max_blocks = 8"}
# The SLO every market's workload has, whichever protocol measures it.
SLO_EDITS = {r"(?m)^latency_max_ms = 2000$": "latency_max_ms = 5000",
             r'(?m)^latency_percentile = "p99"$': 'latency_percentile = "p90"'}


def write_manifest(directory: Path, kind: WorkloadKind, *, fast: bool = True, fold_canary: bool = False) -> Path:
    text = (EXAMPLES_DIR / "resnet.toml").read_text(encoding="utf-8")
    fold = {r"(?m)^fold_canary = false$": "fold_canary = true"} if fold_canary else {}
    for pattern, new in {**(FAST if fast else {}), **SLO_EDITS, **kind.edits, **fold}.items():
        text, _count = re.subn(pattern, new, text)
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES_DIR / "resnet-canary.jsonl", directory / "resnet-canary.jsonl")
    path = directory / f"{kind.name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _variant(manifest: Manifest, gpus: int) -> Variant:
    """The profile the race measures: the first allowed value of every knob."""
    t = manifest.tuning
    return Variant(batch_size=t.batch_sizes[0] if t.batch_sizes else 32,
                   precision=Precision(t.precisions[0]) if t.precisions else Precision.FP32,
                   loaders=t.loaders[0] if t.loaders else 4, gpus=gpus)


def _as_variant(profile: Profile | None, base: Variant, gpus: int) -> Variant:
    """``profile`` (vastui's) as the simulator's variant, ``base`` for what it leaves unset."""
    if profile is None:
        return base
    return Variant(batch_size=profile.batch_size or base.batch_size,
                   precision=Precision(profile.precision) if profile.precision else base.precision,
                   loaders=profile.loaders or base.loaders, gpus=profile.gpu_count or gpus)


def allowed_variants(manifest: Manifest, gpus: int) -> list[Variant]:
    t = manifest.tuning
    base = _variant(manifest, gpus)
    return [Variant(batch_size=b, precision=Precision(p), loaders=n, gpus=gpus)
            for b in (t.batch_sizes or (base.batch_size,)) for p in (t.precisions or (base.precision.value,))
            for n in (t.loaders or (base.loaders,))]


def tuned_share_of_best(market: Market, offer: Offer, manifest: Manifest, tuned: Variant) -> float:
    """The best true cost of N units the manifest allows on this machine over the cost at the profile vastui leaves
    it at (1 when tuning found the cheapest; 0 for a profile that does not fit or misses the SLO while another meets
    it). Cost, not throughput, is the yardstick: production pays the warm-up and loading too, so the fastest profile
    in steady state need not be the cheapest for N units. When no allowed profile meets the SLO on this machine, the
    costs are compared without it."""
    def costs(apply_slo: bool) -> tuple[float, float]:
        best = min(true_cost(market, offer, manifest, apply_slo=apply_slo, variant=v)
                   for v in allowed_variants(manifest, offer.num_gpus))
        return best, true_cost(market, offer, manifest, apply_slo=apply_slo, variant=tuned)
    best, got = costs(True)
    if not math.isfinite(best):
        best, got = costs(False)
    if not math.isfinite(best):
        return 0.0
    return best / got if math.isfinite(got) else 0.0


def _spec(market: Market, offer: Offer) -> HostSpec:
    return HostSpec.from_machine(next(m for m in market.world.machines if m.machine_id == offer.machine_id))


def allowed_truth(market: Market, offer: Offer, manifest: Manifest, *, top: int = 4) -> str:
    """The best ``top`` allowed profiles on this machine and their true throughput, best first (a tuning miss's
    yardstick: what the search could have found)."""
    spec = _spec(market, offer)
    rows = sorted(((plan_step(spec, v), v) for v in allowed_variants(manifest, offer.num_gpus)),
                  key=lambda sv: -sv[0].units_per_s if sv[0].fits and _within_latency(sv[0].step_s, manifest) else 0.0)
    return ", ".join(f"{v.batch_size}/{v.precision.value}/{v.loaders}: {s.units_per_s:.1f}"
                     + ("" if s.fits else " (does not fit)") for s, v in rows[:top])


def _within_latency(step_s: float, manifest: Manifest) -> bool:
    ceiling = manifest.slo.latency
    return ceiling is None or step_s * 1000.0 <= ceiling.max_ms


def true_loading_s(market: Market, offer: Offer, manifest: Manifest) -> float:
    truth = market.truth_of(offer.machine_id)
    image = manifest.workload.image
    cached = truth.image_cached and is_popular(image)
    return (0.0 if cached else image_size_mb(image) / truth.image_pull_mb_per_s) + truth.readiness_s


def true_throughput(market: Market, offer: Offer, manifest: Manifest, *, variant: Variant | None = None) -> float:
    machine = next(m for m in market.world.machines if m.machine_id == offer.machine_id)
    return plan_step(HostSpec.from_machine(machine), variant or _variant(manifest, offer.num_gpus)).units_per_s


def true_cost(market: Market, offer: Offer, manifest: Manifest, *, apply_slo: bool = True,
              variant: Variant | None = None) -> float:
    """The oracle: C(N) with the truth's speed, pull and readiness; a faulty host is infinitely dear, and so (with
    ``apply_slo``) is one whose true speed or step latency misses the SLO: it is no valid choice. A cost interval is
    a claim about cost, which such a host still has: coverage is judged with ``apply_slo=False``. At the race's
    profile unless ``variant`` says another (one that does not fit the GPU's memory costs infinity)."""
    truth = market.truth_of(offer.machine_id)
    if truth.fault in (Fault.WRONG_OUTPUT, Fault.STUCK_LOADING) or market.runtime_broken(offer.machine_id):
        return math.inf     # no rental on it ever produces a unit
    machine = next(m for m in market.world.machines if m.machine_id == offer.machine_id)
    spec = HostSpec.from_machine(machine)
    variant = variant or _variant(manifest, offer.num_gpus)
    step = plan_step(spec, variant)
    if not step.fits:
        return math.inf
    theta = step.units_per_s
    if apply_slo and not meets_slo(step.units_per_s, step.step_s, manifest):
        return math.inf     # misses the SLO: not a valid choice, whatever it costs
    if truth.fault is Fault.DIES_MID_RUN and truth.fault_after_s is not None and \
            truth.fault_after_s < manifest.production_units / theta:
        return math.inf     # the production run dies before it is done
    if truth.fault is Fault.THROTTLES and truth.fault_after_s is not None:
        work_s = manifest.production_units / theta
        if work_s > truth.fault_after_s:   # the rest of the run at the throttled speed
            slow = plan_step(spec, variant, throttled=True).units_per_s
            done = truth.fault_after_s * theta
            theta = manifest.production_units / (truth.fault_after_s + (manifest.production_units - done) / slow)
    warmup_s = step.compute_s * WARMUP_SLOWDOWN * sum(1.0 - i / WARMUP_STEPS for i in range(WARMUP_STEPS))
    rates = rates_of(offer, disk_gib=DISK_GIB)
    cached = truth.image_cached and is_popular(manifest.workload.image)
    inputs = CostInputs(price_per_hour_usd=rates.gpu_usd_per_hour, startup_s=0.0, warmup_s=warmup_s,
                        loading_s=true_loading_s(market, offer, manifest),
                        storage_usd_per_hour=rates.storage_usd_per_hour, inet_usd_per_gb=rates.inet_down_usd_per_gb,
                        transfer_gb_fixed=0.0 if cached else image_size_mb(manifest.workload.image) / 1000.0)
    return cost_per_accepted_unit(inputs, units=manifest.production_units, throughput_units_per_s=theta)


def meets_slo(units_per_s: float, step_s: float, manifest: Manifest) -> bool:
    slo = manifest.slo
    if slo.throughput_min_units_per_s is not None and units_per_s < slo.throughput_min_units_per_s:
        return False
    return _within_latency(step_s, manifest)


@dataclass(slots=True)
class MarketResult:
    seed: int
    workload: str
    regret: dict[str, float] = field(default_factory=dict)
    wrong: dict[str, bool] = field(default_factory=dict)
    spend_usd: float = 0.0
    everything_usd: float = 0.0          # benchmark-everything on its own protocol (EverythingModel)
    everything_as_rented_usd: float = 0.0   # ... modelled from vastui's own rentals instead (_everything_spend)
    wall_s: float = 0.0
    covered: list[bool] = field(default_factory=list)       # true cost inside the receipt's 95 % interval
    covered90: list[bool] = field(default_factory=list)     # ... inside its 90 % narrowing (normal approximation)
    startup_err: list[float] = field(default_factory=list)
    oracle_z: list[float] = field(default_factory=list)
    spread: list[float] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    slo_certified_wrongly: bool = False
    certified_tuned: bool = False         # the choice's SLO was certified at its tuned profile, not the race's
    tuned_share: float | None = None      # chosen machine: the cheapest allowed cost of N / the cost at its profile
    end_to_end: float = math.inf          # the choice at the profile it is left at, against the best pair
    tuning_trials: int = 0
    passed_over: int = 0                  # shortlisted candidates never rented: they could not beat the leader
    best_unschedulable: bool = False      # the oracle's best offer: its create was refused (scheduling failed)
    screened_best_unschedulable: bool = False   # ... the best offer at the race's profile
    end_to_end_best_unschedulable: bool = False   # ... the best offer at its best allowed profile
    spent_on: dict[str, float] = field(default_factory=dict)   # vastui's bill by what it paid for (SPEND_PARTS)
    note: str = ""
    rented: int = 0                        # shortlisted candidates (or their reserves) vastui rented
    shortlisted: int = 0
    decision_s: float = math.nan           # market seconds from the campaign's start to its teardown (all known)
    everything_decision_s: float = math.nan   # the same for benchmark-everything, modelled (EverythingModel)
    passed_stated: list[float] = field(default_factory=list)    # each passed-over offer's stated chance
    passed_was_best: list[bool] = field(default_factory=list)   # ... whether it was in truth the market's optimum
    passed_beat_choice: list[bool] = field(default_factory=list)   # ... or in truth cheaper than vastui's choice
    race_end: RaceEnd | None = None       # which race rule ended the campaign's race (None: none did)
    stop_missed: bool = False             # it ended within the margin, yet a measured rival was > 3 % cheaper
    # --repeat: the first campaign's store and the same market re-drawn later; the second campaign's result on it
    next_market: tuple[Path, LaterMarket] | None = None
    repeat: MarketResult | None = None
    reverified: int = 0                   # candidates re-verified on an earlier campaign's runs
    inherited: bool = False               # raced at an earlier campaign's screening (none of its own)
    raced_screened: bool = False           # the choice was raced at a screened profile, not the first one
    # the choice at the profile it was raced at against the best offer at the profile the race would measure it at
    # (the screened one, per GPU class; the first profile when nothing was screened): the race's own yardstick
    screened_regret: float = math.inf


# One campaign's wall time past which it is taken for hung (a campaign takes about a minute at x120).
MARKET_WALL_LIMIT_S = 900.0

SPEND_PARTS = ("loading and traffic", "canary, warm-ups and console work", "blocks", "tuning",
               "helping the screening", "waiting for the screening")
# What a candidate done measuring does while the knobs are screened (CandidatePhaseChanged.screening)
SCREENING_PARTS = {ScreeningPart.HELPING: "helping the screening", ScreeningPart.WAITING: "waiting for the screening"}


def _spent_on(outcome: object, manifest: Manifest, tuning_s: dict[str, float],
              screening_s: dict[tuple[str, str], float] | None = None) -> dict[str, float]:
    """The campaign's bill by what it paid for: the disk and the traffic (the pull included); the GPUs while
    blocks ran; while the leader (or the screener) was tuned; while a candidate played the screening's pairs or
    waited, held, for its verdict (``screening_s``: seconds by candidate and part); and the rest of the GPU time
    (the canary, each run's warm-up, the console's own SSH work between runs, the wait for a destroy's answer)."""
    screening_s = screening_s or {}
    parts = dict.fromkeys(SPEND_PARTS, 0.0)
    for run in outcome.runs:  # type: ignore[attr-defined]
        if run.cid not in outcome.billed_usd:  # type: ignore[attr-defined]
            continue
        bill = bill_of(run, manifest=manifest, created_local=None, now=run.ended_at or 0.0)
        gpu_per_s = rates_of(run.candidate.offer, disk_gib=DISK_GIB).gpu_usd_per_hour / 3600.0
        blocks = min(bill.gpu_usd, gpu_per_s * sum(b.block.duration_s for b in run.blocks))
        tuning = min(bill.gpu_usd - blocks, gpu_per_s * tuning_s.get(run.cid, 0.0))
        parts["loading and traffic"] += bill.storage_usd + bill.bandwidth_usd
        parts["blocks"] += blocks
        parts["tuning"] += tuning
        rest = bill.gpu_usd - blocks - tuning
        for part in SCREENING_PARTS.values():
            share = min(rest, gpu_per_s * screening_s.get((run.cid, part), 0.0))
            parts[part] += share
            rest -= share
        parts["canary, warm-ups and console work"] += rest
    return parts


def _regret(cost: float, best: float) -> float:
    return math.inf if not math.isfinite(cost) else cost / best - 1.0


def _race_variant_of(manifest: Manifest, outcome: object) -> Callable[[Offer], Variant]:
    """The profile the race measures an offer at: the screened one (or the inherited one of an earlier campaign)
    with the batch its GPU class is known to hold (screening.py), or the first profile when nothing was screened."""
    screening = getattr(outcome, "screening", None)
    inherited = getattr(outcome, "inherited", None)   # an earlier campaign's screening, raced at (inherited.py)

    def race_variant(offer: Offer) -> Variant:
        first = _variant(manifest, offer.num_gpus)
        if inherited is not None:
            return _as_variant(inherited.profile_for(gpu_ram_mb=offer.gpu_ram, gpu_count=offer.num_gpus), first,
                               offer.num_gpus)
        if screening is None:
            return first
        profile = screening.profile
        batch = largest_batch_held(gpu_ram_mb=offer.gpu_ram, precision=profile.precision,
                                   wanted=profile.batch_size or first.batch_size, fallback=first.batch_size,
                                   seen=screening.batches_seen())
        return _as_variant(replace(profile, batch_size=batch, gpu_count=offer.num_gpus), first, offer.num_gpus)

    return race_variant


def _screened_regret(market: Market, manifest: Manifest, outcome: object, eligible: list[Offer], chosen: Offer,
                     raced: Variant) -> tuple[float, int]:
    """The choice at the profile it was raced at, against the best eligible offer at the profile the race would
    have measured it at (``_race_variant_of``); and that offer's id."""
    race_variant = _race_variant_of(manifest, outcome)
    best, best_id = min((true_cost(market, o, manifest, variant=race_variant(o)), o.id) for o in eligible)
    return _regret(true_cost(market, chosen, manifest, variant=raced), best), best_id


def _everything_spend(outcome: object, manifest: Manifest, market: Market,
                      tuning_s: dict[str, float] | None = None) -> float:
    """Benchmark-everything's spend: what each shortlisted candidate was billed in the campaign, plus the blocks
    racing saved it (every candidate measured to max_blocks) at its GPU and disk price; a candidate the campaign
    never rented (passed over, or the race ended first) is priced at the median rented candidate's billed hours at
    its own rates, the hours the leader spent tuning left out (benchmark-everything tunes one machine too, the one
    already counted), plus its image download unless its host has the image."""
    tuning_s = tuning_s or {}
    billed_usd = outcome.billed_usd  # type: ignore[attr-defined]
    total, hours = 0.0, []
    for run in outcome.runs:  # type: ignore[attr-defined]
        if run.cid not in billed_usd:
            continue
        rates = rates_of(run.candidate.offer, disk_gib=DISK_GIB)
        missing = max(0, manifest.measure.max_blocks - len(run.blocks)) if run.passed_gate else 0
        per_hour = rates.gpu_usd_per_hour + rates.storage_usd_per_hour
        cost = billed_usd[run.cid] + missing * manifest.measure.block_s * per_hour / 3600
        total += cost
        if run.passed_gate and per_hour > 0:
            hours.append(cost / per_hour - tuning_s.get(run.cid, 0.0) / 3600.0)
    for run in outcome.runs:  # type: ignore[attr-defined]
        if run.cid in billed_usd or not hours:
            continue
        offer = run.candidate.offer
        rates = rates_of(offer, disk_gib=DISK_GIB)
        cached = market.truth_of(offer.machine_id).image_cached and is_popular(manifest.workload.image)
        download = 0.0 if cached else image_size_mb(manifest.workload.image) / 1000.0 * rates.inet_down_usd_per_gb
        total += statistics.median(hours) * (rates.gpu_usd_per_hour + rates.storage_usd_per_hour) + download
    return total


@dataclass(frozen=True, slots=True)
class EverythingModel:
    """Benchmark-everything priced on its own protocol, not on vastui's rentals: every shortlisted offer rented,
    ``max_instances`` at a time in rank order, each living for its true loading (pull and readiness), its SSH
    session's start and the canary, ``min_runs`` runs and ``max_blocks`` blocks; a faulty host only until its fault
    shows (a wrong output at the canary, a stuck one at the readiness deadline, a dying one when it dies). Then it
    tunes one machine, its choice, one knob at a time: each other value of each knob a paired trial of
    2 x ``min_pairs`` blocks, each block its own short run (a run's start without its warm-up). What a step of the protocol takes beyond its blocks (the SSH
    start, the canary, a run's start and warm-up and the console's work around it: the time between one run's last
    block and the next run's first) is the median vastui measured for that step on the same market: the same steps
    of the same tool, counted as often as this protocol takes them; the wait for a destroy's answer is left out, so
    the model errs cheap and vastui's share of it errs high."""

    usd: float
    decision_s: float


def _everything_model(outcome: object, manifest: Manifest, market: Market, chosen: Offer,
                      phases: dict[tuple[str, str], float], tuning_s: dict[str, float]) -> EverythingModel:
    runs = outcome.runs  # type: ignore[attr-defined]
    screener = outcome.screening.screener if outcome.screening is not None else None  # type: ignore[attr-defined]

    def median_of(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    ssh = median_of([s for (cid, phase), s in phases.items() if phase == "ssh"])
    canary = median_of([s for (cid, phase), s in phases.items() if phase == "canary"])
    # a run's cost beyond its blocks (its start, its warm-up, the console's work around it): the time between one
    # run's last block and the next run's first, from candidates that did nothing else between their runs (not
    # the screener, nor a machine that played the screening's pairs, nor a tuned one); every candidate's if none
    busy = {screener, *tuning_s} | {cid for trial in (outcome.screening.tuning.trials  # type: ignore[attr-defined]
                                                    if outcome.screening is not None else ())  # type: ignore[attr-defined]
                                    for cid, _pairs in trial.pairs_on}
    gaps: dict[bool, list[float]] = {True: [], False: []}
    for r in runs:
        blocks = sorted(r.blocks, key=lambda b: b.start_t)
        for before, after in itertools.pairwise(blocks):
            if after.block.run != before.block.run:
                gaps[r.cid not in busy].append(after.start_t - before.end_t)
    per_run = median_of(gaps[True] or gaps[False])
    # a tuning trial's short run: the same start, its warm-up left out (it skips its first steps instead of waiting
    # for them to settle; leaving all of it out errs cheap)
    per_short_run = max(0.0, per_run - median_of([r.warmup_s for r in runs if r.warmup_s is not None]))
    m, t = manifest.measure, manifest.tuning
    usd, free_at = 0.0, [0.0] * manifest.budget.max_instances
    for run in runs:
        offer = run.candidate.offer
        truth = market.truth_of(offer.machine_id)
        loading = true_loading_s(market, offer, manifest)
        life = loading + ssh + canary + m.min_runs * per_run + m.max_blocks * m.block_s
        if truth.fault is Fault.STUCK_LOADING:
            life = readiness_deadline_s(manifest, predicted_pull=run.candidate.predicted_pull_s)
        elif truth.fault is Fault.WRONG_OUTPUT or market.runtime_broken(offer.machine_id):
            life = loading + ssh + canary
        elif truth.fault is Fault.DIES_MID_RUN and truth.fault_after_s is not None:
            life = min(life, loading + truth.fault_after_s)
        if offer.id == chosen.id:   # and it tunes its choice
            trials = sum(max(0, len(values) - 1) for values in (t.batch_sizes, t.precisions, t.loaders))
            life += trials * 2 * t.min_pairs * (m.block_s + per_short_run)
        rates = rates_of(offer, disk_gib=DISK_GIB)
        cached = truth.image_cached and is_popular(manifest.workload.image)
        download = 0.0 if cached else image_size_mb(manifest.workload.image) / 1000.0 * rates.inet_down_usd_per_gb
        usd += life * (rates.gpu_usd_per_hour + rates.storage_usd_per_hour) / 3600.0 + download
        start = min(free_at)
        free_at[free_at.index(start)] = start + life
    return EverythingModel(usd=usd, decision_s=max(free_at))


async def one_market(seed: int, kind: WorkloadKind, work: Path, *, scale: float, fast: bool = True,
                     realism: Realism | None = None, repeat: bool = False, later: LaterMarket | None = None,
                     db_path: Path | None = None, fold_canary: bool = False) -> MarketResult:
    manifest_path = write_manifest(work / f"m{seed}", kind, fast=fast, fold_canary=fold_canary)
    manifest = load_manifest(manifest_path)
    out = MarketResult(seed, kind.name)
    async with open_demo(seed=seed, time_scale=scale, data_dir=work / f"d{seed}", manifest_path=manifest_path,
                         realism=realism, later=later, db_path=db_path) as demo:
        market = demo.market
        offers = await demo.client.search_offers(manifest.shortlist.query, order="dlperf_usd-", limit=400)
        excluded = {e.offer_id for e in demo.plan.excluded if getattr(e, "offer_id", None) is not None}
        eligible = [o for o in offers if o.id not in excluded] or offers
        costs = {o.id: true_cost(market, o, manifest) for o in eligible}
        best = min(costs.values())
        wrong = {m.machine_id for m in market.world.machines if market.truth_of(m.machine_id).fault is Fault.WRONG_OUTPUT}
        shortlist = [c.offer for c in demo.plan.candidates]
        by_id = {o.id: o for o in [*eligible, *shortlist]}
        for o in shortlist:
            costs.setdefault(o.id, true_cost(market, o, manifest))
        simple = {"top dlperf_usd": max(eligible, key=lambda o: o.dlperf_per_dphtotal or 0.0),
                  "cheapest $/h": min(eligible, key=lambda o: o.dph_total),
                  "vastui prior": shortlist[0],
                  "benchmark-everything": min(shortlist, key=lambda o: costs[o.id])}
        for name, offer in simple.items():
            out.regret[name] = _regret(costs[offer.id], best)
            out.wrong[name] = offer.machine_id in wrong
        for model in {o.gpu_name for o in eligible}:
            thetas = [true_throughput(market, o, manifest) / o.num_gpus for o in eligible
                      if o.gpu_name == model and o.num_gpus == 1]
            if len(thetas) >= 3:
                out.spread.append(max(thetas) / min(thetas) - 1.0)
        tuning_from: dict[str, float] = {}
        tuning_s: dict[str, float] = {}
        phase_from: dict[str, tuple[str, float]] = {}
        phases: dict[tuple[str, str], float] = {}    # (candidate, phase): seconds in it, the first time
        screening_from: dict[str, tuple[str | None, float]] = {}
        screening_s: dict[tuple[str, str], float] = {}   # (candidate, SCREENING_PARTS part): seconds in it

        def on_event(event: Event) -> None:
            if isinstance(event, CandidatePhaseChanged) and event.candidate in phase_from:
                was, since = phase_from.pop(event.candidate)
                phases.setdefault((event.candidate, was), event.at - since)
                doing, since = screening_from.pop(event.candidate)
                if doing is not None:
                    key = (event.candidate, SCREENING_PARTS[ScreeningPart(doing)])
                    screening_s[key] = screening_s.get(key, 0.0) + event.at - since
            if isinstance(event, CandidatePhaseChanged):
                phase_from[event.candidate] = (event.phase, event.at)
                screening_from[event.candidate] = (event.screening, event.at)
            if isinstance(event, CandidatePhaseChanged) and event.phase == "tuning":
                tuning_from[event.candidate] = event.at
            elif isinstance(event, TuningFinished) and event.candidate in tuning_from:
                # (a screener tuned again as the leader: both spells count)
                tuning_s[event.candidate] = tuning_s.get(event.candidate, 0.0) + event.at - tuning_from.pop(
                    event.candidate)

        stages: dict[str, float] = {}

        def on_stage(event: Event) -> None:
            if isinstance(event, CampaignPhaseChanged):
                stages.setdefault(event.phase, event.at)

        stop_listening = demo.services.bus.listen(on_event)
        stop_stages = demo.services.bus.listen(on_stage)
        started = time.monotonic()
        result = await demo.start(plan_approved=True).result(abort_if_cancelled="benchmark interrupted")
        out.wall_s = time.monotonic() - started
        stop_listening()
        stop_stages()
        receipt, outcome = result.receipt, result.outcome
        if "running" in stages and "teardown" in stages:
            out.decision_s = stages["teardown"] - stages["running"]
        everything = _everything_model(outcome, manifest, market, simple["benchmark-everything"], phases, tuning_s)
        out.everything_decision_s = everything.decision_s
        out.rented, out.shortlisted = len(outcome.billed_usd), len(outcome.runs)
        out.spend_usd = receipt.campaign_cost_usd
        out.everything_usd = everything.usd
        out.everything_as_rented_usd = _everything_spend(outcome, manifest, market, tuning_s)
        out.spent_on = _spent_on(outcome, manifest, tuning_s, screening_s)
        out.passed_over = len(outcome.passed_over)
        out.race_end = outcome.race_end
        out.stop_missed = _stop_missed(outcome, receipt.decision.chosen, market, manifest)
        # Passed-over offers against the truth at the profile the race would have measured them at (the screened
        # one per GPU class when a screening ran: the chances were stated after it), and the choice as raced.
        race_variant = _race_variant_of(manifest, outcome)
        at_race = {o.id: true_cost(market, o, manifest, variant=race_variant(o)) for o in eligible}
        best_at_race = min(at_race.values())
        chosen_run = next((r for r in outcome.runs if r.cid == receipt.decision.chosen), None)
        chosen_true = math.inf
        if chosen_run is not None:
            offer = chosen_run.candidate.offer
            chosen_true = true_cost(market, offer, manifest, variant=_as_variant(
                chosen_run.race_profile, _variant(manifest, offer.num_gpus), offer.num_gpus))
        for passed in outcome.passed_over:   # a reserve may have taken its slot: the offer is what was passed over
            offer = by_id.get(passed.offer_id) or next(r.candidate.offer for r in outcome.runs
                                                       if r.cid == passed.candidate_id)
            own = at_race[offer.id] if offer.id in at_race else true_cost(market, offer, manifest,
                                                                          variant=race_variant(offer))
            out.passed_stated.append(passed.probability)
            out.passed_was_best.append(math.isfinite(own) and own <= best_at_race * (1.0 + 1e-9))
            out.passed_beat_choice.append(own < chosen_true)
        chosen = next((r for r in outcome.runs if r.cid == receipt.decision.chosen), None)
        best_offer = min(costs, key=lambda oid: costs[oid])
        in_shortlist = any(o.id == best_offer for o in shortlist)
        out.note = (f"decision: {receipt.decision.chosen or 'none'} ({receipt.decision.reason}); "
                    f"oracle best {'in' if in_shortlist else 'not in'} the shortlist")
        if outcome.screening is not None:
            screened = outcome.screening
            out.note += (f"; screened on {screened.screener}: {screened.profile.describe()} ("
                         + " | ".join(k.describe() for k in screened.knobs)
                         + (f"; stopped: {screened.tuning.stopped_early}" if screened.tuning.stopped_early else "")
                         + ")")
        if outcome.lifted:   # raced at a change the screening left open, short of the floor without it
            out.note += "; lifted: " + " | ".join(outcome.lifted)
        screened_best: int | None = None   # the best offer at the race's profile, and end to end
        e2e_best: int | None = None
        if chosen is None:
            out.regret["vastui"], out.wrong["vastui"] = math.inf, False
        else:
            offer = chosen.candidate.offer
            truth = market.truth_of(offer.machine_id)
            out.note += f"; chosen host's fault: {truth.fault}, run-to-run noise {100 * truth.noise_cv:.1f} %"
            out.regret["vastui"] = _regret(costs.get(offer.id) or true_cost(market, offer, manifest), best)
            out.wrong["vastui"] = offer.machine_id in wrong
            # The race's profile: the first, or the screened one the choice was raced at (screening.py).
            raced = _as_variant(chosen.race_profile, _variant(manifest, offer.num_gpus), offer.num_gpus)
            out.raced_screened = raced != _variant(manifest, offer.num_gpus)
            out.screened_regret, screened_best = _screened_regret(market, manifest, outcome, eligible, offer, raced)
            profile = raced
            if outcome.tuning is not None and outcome.tuned_candidate == chosen.cid:
                out.tuning_trials = len(outcome.tuning.trials)
                profile = _as_variant(outcome.tuning.profile, raced, offer.num_gpus)
            # The SLO is judged at the profile it was certified at: the race's, or the tuned one's.
            certified_at = profile if chosen.cid in outcome.certified_tuned else raced
            step = plan_step(_spec(market, offer), certified_at)
            out.slo_certified_wrongly = receipt.decision.slo_met and not meets_slo(step.units_per_s, step.step_s,
                                                                                   manifest)
            out.certified_tuned = chosen.cid in outcome.certified_tuned
            out.tuned_share = tuned_share_of_best(market, offer, manifest, profile)
            best_pair, pair_offer, pair_variant = min(
                ((true_cost(market, o, manifest, variant=v), o, v) for o in eligible
                 for v in allowed_variants(manifest, o.num_gpus)), key=lambda t: t[0])
            out.end_to_end = _regret(true_cost(market, offer, manifest, variant=profile), best_pair)
            e2e_best = pair_offer.id
            if out.end_to_end > 0.03:   # a miss: which machine was best at its best, and what became of it
                raced_at = _race_variant_of(manifest, outcome)(pair_offer)
                pair_run = next((r for r in outcome.runs if r.candidate.offer.id == pair_offer.id), None)
                out.note += (f"; end-to-end best: offer {pair_offer.id} ({pair_offer.gpu_name}"
                             + (f", {pair_run.cid} {pair_run.phase}" if pair_run is not None else ", not shortlisted")
                             + f") at {pair_variant.batch_size}/{pair_variant.precision.value}/{pair_variant.loaders}"
                             f"/{pair_variant.gpus} ${1e3 * best_pair:.4g}/1k, at the race's profile "
                             f"{raced_at.batch_size}/{raced_at.precision.value}/{raced_at.loaders} "
                             f"${1e3 * true_cost(market, pair_offer, manifest, apply_slo=False, variant=raced_at):.4g}/1k;"
                             f" the choice at its profile ${1e3 * true_cost(market, offer, manifest, variant=profile):.4g}/1k")
            out.note += f"; profile's cost {100 * out.tuned_share:.0f} % of the best allowed ({out.tuning_trials} trials"
            if outcome.tuning is None or outcome.tuned_candidate != chosen.cid:
                out.note += f"; tuned: {outcome.tuned_candidate or 'none'}"
            elif outcome.tuning.stopped_early:
                out.note += f"; stopped: {outcome.tuning.stopped_early}"
            out.note += ")"
            if out.tuned_share < 0.95 and outcome.tuning is not None and outcome.tuned_candidate == chosen.cid:
                out.note += "; trials: " + " | ".join(trial.describe() for trial in outcome.tuning.trials)
                out.note += (f"; truth (batch/precision/loaders: units/s) at the start "
                             f"{plan_step(_spec(market, offer), _variant(manifest, offer.num_gpus)).units_per_s:.1f}, "
                             f"best allowed {allowed_truth(market, offer, manifest)}")
        # the marketplace refused every create of these offers during the campaign: no strategy could have
        # rented them then (docs/api-notes.md, cancel_unavail); the headline still counts them, the summary says so
        creates = [r for r in market.request_log if r.method == "PUT" and r.path.startswith("/api/v0/asks/")]
        unschedulable = ({t for r in creates if r.status == 400 for t in r.target_ids}
                         - {t for r in creates if r.status == 200 for t in r.target_ids})   # asked again and rented
        out.best_unschedulable = best_offer in unschedulable
        out.screened_best_unschedulable = screened_best in unschedulable
        out.end_to_end_best_unschedulable = e2e_best in unschedulable
        if out.best_unschedulable:
            out.note += f"; the oracle's best offer {best_offer} could not be scheduled when the campaign rented it"
        if not out.regret["vastui"] <= 0.03:   # a miss: say what became of the oracle's best and of the choice
            for run in outcome.runs:
                if run.candidate.offer.id == best_offer or run.cid == receipt.decision.chosen:
                    role = "oracle best" if run.candidate.offer.id == best_offer else "chosen"
                    out.note += f"; {role} {run.cid} ({run.phase}, {run.measured_runs} runs): {run.detail}"
                    row = next((c for c in receipt.candidates if c.candidate_id == run.cid), None)
                    if row is not None and row.cost_per_unit is not None and row.throughput is not None:
                        c, t, st = row.cost_per_unit, row.throughput, row.startup
                        # the truth at the profile the claim names (its blocks'), as coverage judges it
                        gpus = run.candidate.offer.num_gpus
                        at = _as_variant(run.race_profile, _variant(manifest, gpus), gpus)
                        true_usd = true_cost(market, run.candidate.offer, manifest, apply_slo=False, variant=at)
                        out.note += (f" [cost/1k ${1e3 * c.point:.4g} ({1e3 * c.low:.4g}-{1e3 * c.high:.4g}), "
                                     f"true ${1e3 * true_usd:.4g}; {t.point:.1f} ({t.low:.1f}-{t.high:.1f}) units/s, true "
                                     f"{true_throughput(market, run.candidate.offer, manifest, variant=at):.1f}; "
                                     f"pull {st.pull_s}, "
                                     f"readiness {st.readiness_s}, init {st.workload_init_s}, warm-up {st.warmup_s}, "
                                     f"true loading {true_loading_s(market, run.candidate.offer, manifest):.1f}]")
        for row in receipt.candidates:
            run = next(r for r in outcome.runs if r.cid == row.candidate_id)
            offer = run.candidate.offer
            truth = market.truth_of(offer.machine_id)
            if row.cost_per_unit is not None and run.blocks and math.isfinite(row.cost_per_unit.point):
                # judged at the profile the claim names: the one its blocks were measured at
                at = _as_variant(run.race_profile, _variant(manifest, offer.num_gpus), offer.num_gpus)
                truth_cost = true_cost(market, offer, manifest, apply_slo=False, variant=at)
                c = row.cost_per_unit
                out.covered.append(c.low <= truth_cost <= c.high)
                out.covered90.append(c.point - Z90_OVER_Z95 * (c.point - c.low) <= truth_cost
                                     <= c.point + Z90_OVER_Z95 * (c.high - c.point))
                out.runs.append(run.measured_runs)
                measured = statistics.median(b.throughput_units_per_s for b in run.blocks)
                out.oracle_z.append((measured / true_throughput(market, offer, manifest, variant=at) - 1.0)
                                    / truth.noise_cv)
            startup = run.startup_parts().production_startup_s
            if startup is not None and truth.fault is Fault.NONE:
                true_s = true_loading_s(market, offer, manifest)
                out.startup_err.append(abs(startup - true_s) / true_s if true_s > 0 else 0.0)
        del by_id
        out.reverified = sum(1 for c in demo.plan.candidates if c.reverified is not None)
        out.inherited = demo.plan.inherited is not None
        if repeat:   # the same market a week later, most hosts kept, on this campaign's store
            out.next_market = (demo.db_path, later_market(market, seed=seed, kept_share=REPEAT_KEPT_SHARE))
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    k = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    if math.isinf(ordered[hi]) or math.isinf(ordered[lo]):
        return ordered[hi]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def _stop_missed(outcome: object, chosen_cid: str | None, market: Market, manifest: Manifest) -> bool:
    """The indifference stop's promise broken: the race ended within the margin, yet the chosen machine was in truth
    more than 3 % dearer than a rival it measured, each at the profile it was raced at (the screened one, when a
    screening ran), a rival that misses the SLO there being no better choice (docs/method.md, Stopping)."""
    if outcome.race_end is not RaceEnd.WITHIN_MARGIN:  # type: ignore[attr-defined]
        return False
    runs = outcome.runs  # type: ignore[attr-defined]

    def true_of(run: object, *, apply_slo: bool) -> float:
        offer = run.candidate.offer  # type: ignore[attr-defined]
        first = _variant(manifest, offer.num_gpus)
        raced = _as_variant(run.race_profile, first, offer.num_gpus)  # type: ignore[attr-defined]
        return true_cost(market, offer, manifest, apply_slo=apply_slo, variant=raced)

    chosen = next((r for r in runs if r.cid == chosen_cid), None)
    rivals = [true_of(r, apply_slo=True) for r in runs if r.blocks and r.cid != chosen_cid]
    return chosen is not None and bool(rivals) and true_of(chosen, apply_slo=False) > 1.03 * min(rivals)


def _stop_lines(results: list[MarketResult]) -> list[str]:
    """Which rule ended each race, and the indifference stop's misses against the promise of at most 5 %."""
    ends = [r.race_end for r in results]
    within = sum(e is RaceEnd.WITHIN_MARGIN for e in ends)
    counts = ", ".join(f"{end} {sum(e is end for e in ends)}" for end in RaceEnd if any(e is end for e in ends))
    return [f"- the race ended by: {counts or 'none'}" + (f", never (measuring ran out) {ends.count(None)}"
                                                           if None in ends else ""),
            f"- indifference-stop misses (ended within 3 %, yet a measured rival in truth > 3 % cheaper than the "
            f"choice): {sum(r.stop_missed for r in results)} of {within} (the rule promises at most 5 %)"]


def _waves_lines(results: list[MarketResult]) -> list[str]:
    """Rentals, time to decision, and the passed-over offers' stated chances against the oracle."""
    stated = [p for r in results for p in r.passed_stated]
    best = sum(b for r in results for b in r.passed_was_best)
    beat = sum(b for r in results for b in r.passed_beat_choice)
    expected = sum(stated)
    times = _finite(r.decision_s / 60 for r in results)
    everything = _finite(r.everything_decision_s / 60 for r in results)
    return [
        f"- rentals: {sum(r.rented for r in results)} of {sum(r.shortlisted for r in results)} shortlisted "
        f"candidates; time to decision (simulated minutes, campaign start to teardown): vastui median "
        f"{_pct(times, 50):.1f}, p90 {_pct(times, 90):.1f}; benchmark-everything (modelled) median "
        f"{_pct(everything, 50):.1f}, p90 {_pct(everything, 90):.1f}",
        f"- passed over by the calibrated prior: {len(stated)} offers, stated chances summing to {expected:.2f} "
        f"(mean {100 * expected / max(1, len(stated)):.1f} %); judged at the profile the race measures (screened "
        f"per GPU class when a screening ran), in truth the market's optimum: {best}; in truth "
        f"cheaper than vastui's choice: {beat} (the stated chance is of beating the measured leader, so at most "
        f"~{expected:.2f} + {2 * math.sqrt(max(expected, 0.25)):.2f} such offers are expected)",
    ]


def report(results: list[MarketResult], *, protocol: str = "fast") -> str:
    lines = [f"# decision quality over {len(results)} markets "
             f"(workloads: {', '.join(sorted({r.workload for r in results}))}; protocol: {protocol})", "",
             "| strategy | regret p50 | p95 | max | within 3 % | within 10 % | wrong-output choices |",
             "|---|---|---|---|---|---|---|"]
    for name in STRATEGIES:
        regrets = [r.regret[name] for r in results]
        lines.append(f"| {name} | {100 * _pct(regrets, 50):.1f} % | {100 * _pct(regrets, 95):.1f} % | "
                     f"{100 * max(regrets):.1f} % | {100 * sum(g <= 0.03 for g in regrets) / len(regrets):.0f} % | "
                     f"{100 * sum(g <= 0.10 for g in regrets) / len(regrets):.0f} % | "
                     f"{sum(r.wrong[name] for r in results)} |")
    spend = sum(r.spend_usd for r in results)
    everything = sum(r.everything_usd for r in results)
    as_rented = sum(r.everything_as_rented_usd for r in results)
    covered = [c for r in results for c in r.covered]
    covered90 = [c for r in results for c in r.covered90]
    errors = [e for r in results for e in r.startup_err]
    zs = [abs(z) for r in results for z in r.oracle_z]
    spreads = [s for r in results for s in r.spread]
    runs = [n for r in results for n in r.runs]
    shares = [r.tuned_share for r in results if r.tuned_share is not None]
    ends = [r.end_to_end for r in results]
    trials = [r.tuning_trials for r in results if r.tuned_share is not None]
    lines += ["",
              f"- vastui spend: ${spend:.2f} ({100 * spend / everything:.0f} % of benchmark-everything's ${everything:.2f});"
              f" wall time {statistics.fmean(r.wall_s for r in results):.1f} s per campaign; "
              f"{sum(r.passed_over for r in results)} shortlisted offers passed over unrented (their chance of "
              f"beating the measured leader was below the miss probability)",
              "- where vastui's spend went: " + ", ".join(
                  f"{part} {100 * sum(r.spent_on.get(part, 0.0) for r in results) / max(spend, 1e-12):.0f} %"
                  for part in SPEND_PARTS)
              + f"; benchmark-everything is modelled on its own protocol (EverythingModel: every shortlisted offer "
                f"rented for its true loading, the canary, min_runs runs and max_blocks blocks, its choice tuned; each "
                f"step's overhead as vastui measured it); modelled from vastui's own "
                f"rentals instead (their bills plus the blocks racing saved, as before): ${as_rented:.2f}, vastui "
                f"{100 * spend / max(as_rented, 1e-12):.0f} % of it",
              f"- interval coverage (true cost inside the finalist's 95 % cost interval): "
              f"{sum(covered)}/{len(covered)} = {100 * sum(covered) / max(1, len(covered)):.0f} %; inside its 90 % "
              f"narrowing: {100 * sum(covered90) / max(1, len(covered90)):.0f} %; "
              f"runs per measured finalist: median {statistics.median(runs) if runs else 0:g}, "
              f"{sum(n >= 2 for n in runs)}/{len(runs)} with >= 2",
              f"- tuning on the chosen machine: its profile's true cost of N units within 5 % of the cheapest the "
              f"manifest allows there in {sum(s >= 0.95 for s in shares)}/{len(shares)} = "
              f"{100 * sum(s >= 0.95 for s in shares) / max(1, len(shares)):.0f} % of markets (median share "
              f"{100 * _pct(shares, 50):.0f} %; trials per tuned choice: median "
              f"{statistics.median(trials) if trials else 0:g})",
              f"- end to end (the chosen machine at the profile vastui leaves it at, against the best machine at its "
              f"best allowed profile, which only tuning every candidate could find): regret p50 "
              f"{100 * _pct(ends, 50):.1f} %, p95 {100 * _pct(ends, 95):.1f} %, within 3 % in "
              f"{100 * sum(e <= 0.03 for e in ends) / len(ends):.0f} %, within 10 % in "
              f"{100 * sum(e <= 0.10 for e in ends) / len(ends):.0f} %",
              f"- SLO certified for a choice whose truth misses it (at the profile certified): "
              f"{sum(r.slo_certified_wrongly for r in results)} of {len(results)} markets; choices certified at "
              f"their tuned profile: {sum(r.certified_tuned for r in results)}",
              f"- startup error |measured - true| / true: median {100 * _pct(errors, 50):.0f} %, "
              f"p90 {100 * _pct(errors, 90):.0f} % over {len(errors)} rentals",
              f"- oracle validation: measured vs true throughput, |error| / host noise CV: median {_pct(zs, 50):.2f}, "
              f"p90 {_pct(zs, 90):.2f} over {len(zs)} measured candidates",
              f"- market variety: true 1-GPU throughput spread within a GPU model (max/min - 1): median "
              f"{100 * _pct(spreads, 50):.0f} %, p90 {100 * _pct(spreads, 90):.0f} % over {len(spreads)} models "
              f"(docs/simulator.md: up to ~35 % between hosts of one model)"]
    regrets = [r.regret["vastui"] for r in results]
    available = [r.regret["vastui"] for r in results if not r.best_unschedulable]
    screened = [r.screened_regret for r in results]
    lines.append(f"- at the race's own profile (the choice as raced, against the best offer at the profile the race "
                 f"would measure it at: screened per GPU class, else the first): regret p50 "
                 f"{100 * _pct(screened, 50):.1f} %, p95 {100 * _pct(screened, 95):.1f} %, within 3 % in "
                 f"{100 * sum(g <= 0.03 for g in screened) / len(screened):.0f} %; raced at a screened profile in "
                 f"{sum(r.raced_screened for r in results)} of {len(results)} markets")
    lines += _waves_lines(results)
    lines += _stop_lines(results)
    lines.append(f"- markets whose oracle best could not be scheduled when the campaign tried to rent it: "
                 f"{len(results) - len(available)}; within 3 % among the others: "
                 f"{100 * sum(g <= 0.03 for g in available) / max(1, len(available)):.0f} % of {len(available)}")
    for what, schedulable in (
            ("at the race's profile", [r.screened_regret for r in results if not r.screened_best_unschedulable]),
            ("end to end", [r.end_to_end for r in results if not r.end_to_end_best_unschedulable])):
        lines.append(f"- {what}, markets whose best could not be scheduled when the campaign tried to rent it: "
                     f"{len(results) - len(schedulable)}; within 3 % among the others: "
                     f"{100 * sum(g <= 0.03 for g in schedulable) / max(1, len(schedulable)):.0f} % of "
                     f"{len(schedulable)}")
    lines += ["", f"summary: vastui within 3 % in {100 * sum(g <= 0.03 for g in regrets) / len(regrets):.0f} % of "
                  f"{len(results)} markets, p95 regret {100 * _pct(regrets, 95):.1f} % (at the race's own profile "
                  f"within 3 % in {100 * sum(g <= 0.03 for g in screened) / len(screened):.0f} %), end to end within 3 % in "
                  f"{100 * sum(e <= 0.03 for e in ends) / len(ends):.0f} %, p95 {100 * _pct(ends, 95):.1f} %, "
                  f"stopping misses {sum(r.stop_missed for r in results)}, coverage "
                  f"{100 * sum(covered90) / max(1, len(covered90)):.0f} %, median startup error "
                  f"{100 * _pct(errors, 50):.0f} %, tuned within 5 % in "
                  f"{100 * sum(s >= 0.95 for s in shares) / max(1, len(shares)):.0f} %, "
                  f"spend {100 * spend / everything:.0f} % of benchmark-everything, "
                  f"time to decision {_pct(_finite(r.decision_s / 60 for r in results), 50):.0f} min (everything "
                  f"{_pct(_finite(r.everything_decision_s / 60 for r in results), 50):.0f}), "
                  f"{sum(r.wrong['vastui'] for r in results)} wrong-output choices"]
    return "\n".join(lines)


async def repeat_market(first: MarketResult, kind: WorkloadKind, work: Path, *, scale: float, fast: bool = True,
                        realism: Realism | None = None) -> MarketResult:
    """The second campaign of ``first``'s workload on its market re-drawn a week later (REPEAT_KEPT_SHARE of the
    hosts kept with their hidden truth, prices moved, new hosts for the rest), planned on the first's store."""
    assert first.next_market is not None
    db_path, later = first.next_market
    second = await one_market(first.seed, kind, work, scale=scale, fast=fast, realism=realism, later=later,
                              db_path=db_path)
    first.repeat = second
    print(f"market {first.seed} again ({kind.name}): vastui regret {100 * second.regret['vastui']:.1f} %, at the "
          f"race's profile {100 * second.screened_regret:.1f} %, end to end {100 * second.end_to_end:.1f} %, spend "
          f"${second.spend_usd:.3f} ({100 * second.spend_usd / max(second.everything_usd, 1e-12):.0f} % of "
          f"benchmark-everything's), rented {second.rented}/{second.shortlisted}, {second.reverified} re-verified"
          f"{', screening inherited' if second.inherited else ''}; {second.note}", file=sys.stderr, flush=True)
    return second


def report_repeat(results: list[MarketResult]) -> str:
    """The second campaigns next to the first: spend as a share of benchmark-everything's on each one's own market,
    regret, how many candidates were re-verified rather than raced from scratch."""
    pairs = [(r, r.repeat) for r in results if r.repeat is not None]
    if not pairs:
        return ""
    firsts = [first for first, _ in pairs]
    seconds = [second for _, second in pairs]

    def share(rs: list[MarketResult]) -> float:
        return 100 * sum(r.spend_usd for r in rs) / max(sum(r.everything_usd for r in rs), 1e-12)

    def quality(rs: list[MarketResult]) -> str:
        # at the race's own profile and end to end: the first-profile regret is infinite wherever the choice runs a
        # half precision that its fp32 misses the SLO at
        def within(regrets: list[float]) -> str:
            return (f"p50 {100 * _pct(regrets, 50):.1f} %, p95 {100 * _pct(regrets, 95):.1f} %, within 3 % in "
                    f"{100 * sum(g <= 0.03 for g in regrets) / len(regrets):.0f} %")
        return (f"at the race's profile {within([r.screened_regret for r in rs])}; end to end "
                f"{within([r.end_to_end for r in rs])}; time to decision "
                f"{_pct(_finite(r.decision_s / 60 for r in rs), 50):.0f} min (everything "
                f"{_pct(_finite(r.everything_decision_s / 60 for r in rs), 50):.0f})")

    return "\n".join([
        "", "", f"## repeat campaigns ({len(pairs)} markets, each re-drawn a week later with "
            f"{100 * REPEAT_KEPT_SHARE:.0f} % of its hosts kept, on the first campaign's store)", "",
        f"- first campaign: spend {share(firsts):.0f} % of benchmark-everything's; {quality(firsts)}",
        f"- second campaign: spend {share(seconds):.0f} % of benchmark-everything's on its market "
        f"(${sum(r.spend_usd for r in seconds):.2f} of ${sum(r.everything_usd for r in seconds):.2f}); "
        f"{quality(seconds)}; {sum(r.reverified for r in seconds)} candidates re-verified on earlier runs, "
        f"{sum(r.passed_over for r in seconds)} passed over unrented",
        # the second campaigns pass over more (a calibrated prior from the start): their stated chances checked too
        f"- second campaign, {_waves_lines(seconds)[1][2:]}",
        "", f"summary (repeat): second campaign spend {share(seconds):.0f} % of benchmark-everything (first "
            f"{share(firsts):.0f} %), at the race's profile within 3 % in "
            f"{100 * sum(r.screened_regret <= 0.03 for r in seconds) / len(seconds):.0f} %, end to end within 3 % in "
            f"{100 * sum(r.end_to_end <= 0.03 for r in seconds) / len(seconds):.0f} %, "
            f"{sum(r.inherited for r in seconds)} of {len(seconds)} raced at an inherited screening"])


async def main_async(markets: int, seed: int, scale: float, *, protocol: str = "fast",
                     realism: Realism | None = None, repeat: bool = False, fold_canary: bool = False) -> str:
    results: list[MarketResult] = []
    hung: list[int] = []
    with tempfile.TemporaryDirectory(prefix="vastui-dq-") as tmp:
        for index in range(markets):
            kind = MIX[index % len(MIX)]
            try:
                # a campaign takes about a minute of wall time; one that never ends is a bug to report, not to
                # wait on for the rest of the run
                result = await asyncio.wait_for(
                    one_market(seed + index, kind, Path(tmp), scale=scale, fast=protocol == "fast",
                               realism=realism, repeat=repeat, fold_canary=fold_canary),
                    timeout=MARKET_WALL_LIMIT_S)
            except TimeoutError:
                hung.append(seed + index)
                print(f"market {seed + index} ({kind.name}): HUNG: no decision after {MARKET_WALL_LIMIT_S / 60:.0f} "
                      f"min of wall time; cancelled", file=sys.stderr, flush=True)
                continue
            results.append(result)
            print(f"market {seed + index} ({kind.name}): vastui regret {100 * result.regret['vastui']:.1f} %, "
                  f"at the race's profile {100 * result.screened_regret:.1f} %, end to end "
                  f"{100 * result.end_to_end:.1f} %, spend ${result.spend_usd:.3f} (everything ${result.everything_usd:.3f}), rented "
                  f"{result.rented}/{result.shortlisted}, decision in {result.decision_s / 60:.0f} min (everything "
                  f"{result.everything_decision_s / 60:.0f}), {result.wall_s:.1f} s; {result.note}",
                  file=sys.stderr, flush=True)
            if repeat:
                await repeat_market(result, kind, Path(tmp), scale=scale, fast=protocol == "fast", realism=realism)
    hung_line = (f"\n\nHUNG: {len(hung)} campaign(s) never ended and were cut after {MARKET_WALL_LIMIT_S / 60:.0f} min "
                 f"of wall time (markets {', '.join(map(str, hung))}); the figures above leave them out"
                 if hung else "")
    if not results:
        return "no campaign ended" + hung_line
    return report(results, protocol=protocol) + report_repeat(results) + hung_line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markets", type=int, default=30, help="how many markets (default 30); workloads rotate")
    parser.add_argument("--seed", type=int, default=1, help="the first market's seed; market i has seed + i")
    parser.add_argument("--time-scale", type=float, default=TIME_SCALE,
                        help=f"simulated seconds per wall second (default {TIME_SCALE:g})")
    parser.add_argument("--quick", action="store_true", help="two markets at a fast clock (the smoke test)")
    parser.add_argument("--protocol", choices=("fast", "method"), default="fast",
                        help="fast (default): 10 s blocks, 8 at most, short warm-ups, so a market takes seconds; "
                             "method: the method's own warm-up and blocks (30 s, 30 at most; several times slower)")
    parser.add_argument("--realism", choices=("vast", "kind"), default="vast",
                        help="how hard the simulated marketplace is (default vast: every rule of docs/api-notes.md; "
                             "kind: every rule off, to tell what the rules cost)")
    parser.add_argument("--repeat", action="store_true",
                        help="after each market's campaign, a second one on the same market re-drawn a week later "
                             f"({100 * REPEAT_KEPT_SHARE:.0f} %% of hosts kept, prices moved) on the first's store")
    parser.add_argument("--fold-canary", action="store_true",
                        help="the manifest's [correctness] fold_canary on: the canary is the first phase of each "
                             "candidate's first measuring run (first campaigns only)")
    args = parser.parse_args(argv)
    markets, scale = (2, 300.0) if args.quick else (args.markets, args.time_scale)
    print(asyncio.run(main_async(markets, args.seed, scale, protocol=args.protocol,
                                 realism=Realism.named(args.realism), repeat=args.repeat,
                                 fold_canary=args.fold_canary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
