"""Tuning inside the leader's deadline, on the campaign clock: a trial that cannot fit is not started, one that runs
out of time is abandoned with its remote run stopped, and the plan's time cap budgets the trials the manifest allows.

The host is the one part faked here (a scripted agent session on a FakeClock); the candidate is a real plan
candidate from a seeded world, and the manifest is the example workload's.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.fakes import FakeClock
from vastui.bench.attribution import Bottleneck, input_gain_bound
from vastui.bench.manifest import Manifest, load_manifest
from vastui.bench.stats import Block, Interval
from vastui.bench.tuning import AbVerdict, Knob, Profile, TuningStep
from vastui.campaign.candidate import CandidateContext, CandidateRun
from vastui.campaign.measure import MeasuredBlock
from vastui.campaign.plan import (
    DESTROY_MARGIN_S,
    TUNING_RUN_OVERHEAD_PRIOR_S,
    TUNING_RUN_STEPS,
    Candidate,
    build_plan,
    candidate_time_cap_s,
    tuning_allowance_s,
)
from vastui.campaign.short_runs import skip_steps, timed_throughput, warmup_lost_s
from vastui.campaign.tuning import (
    PairPlayed,
    TrialPool,
    TuningStop,
    TuningTrial,
    tune,
    value_order,
)
from vastui.events import EventBus, Notice
from vastui.remote.protocol import Progress, Result
from vastui.sim.offers import offer_row
from vastui.sim.world import generate_world
from vastui.vast.models import Offer

NOW = 1_800_000_000.0
STEP_S = 2.0          # simulated seconds per workload step on the fake host
DIGEST = "ab" * 32    # the output every run writes, unless told to go wrong (checked only where a test expects it)
WRONG_DIGEST = "cd" * 32
MARK_EVERY = 10       # steps per progress record


@dataclass
class ScriptedHost:
    """A host whose agent emits a progress record every MARK_EVERY steps, moving the campaign clock as it goes."""

    clock: FakeClock
    started: int = 0
    stopped_early: int = 0
    argv: list[list[str]] = field(default_factory=list)
    speed: dict[int, float] = field(default_factory=dict)    # batch size -> speed-up (1.0 when not named)
    out_of_memory: frozenset[int] = frozenset()             # batch sizes whose runs fail at once
    start_s: float = 0.0                                     # each run's start, before its first step
    input_bound_below: int = 0                               # fewer loaders: every batch at 0.7x (input-bound)
    # when given, the speed-up of a whole profile (batch, precision, loaders), for knobs that pay only together
    profile_speed: Callable[[int, str, int], float] | None = None
    # batch sizes whose runs fail at fp32 only (bf16 halves the memory a step needs)
    out_of_memory_fp32: frozenset[int] = frozenset()
    # a noisy host: the n-th run at bf16 runs at (1 + bf16_gains[n]) x its speed
    bf16_gains: Sequence[float] = ()
    step_ms: dict[int, float] = field(default_factory=dict)  # batch size -> each step's latency (STEP_S when not named)
    # when given, the share of a profile's step time spent waiting for input (none when not)
    profile_wait: Callable[[int, str, int], float] | None = None
    step_s: dict[int, float] = field(default_factory=dict)   # batch size -> simulated seconds a step (STEP_S if not)
    wrong_output: frozenset[str] = frozenset()              # precisions whose runs end with a wrong output digest
    cut_short: frozenset[str] = frozenset()                 # precisions whose runs end (passing) after one marker
    # a noisy host: the n-th run at this batch size runs at (1 + gains[n]) x its speed
    batch_gains: dict[int, Sequence[float]] = field(default_factory=dict)
    # precision or batch size -> seconds its first marker takes beyond its steps' pace (a warm-up), in that
    # marker's latencies
    warmup_extra_s: dict[str | int, float] = field(default_factory=dict)
    # a noisy host: the n-th run with this many loaders runs at (1 + gains[n]) x its speed (the last gain after)
    loaders_gains: dict[int, Sequence[float]] = field(default_factory=dict)
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _bf16_runs: int = 0
    _batch_runs: dict[int, int] = field(default_factory=dict)
    _loaders_runs: dict[int, int] = field(default_factory=dict)

    @asynccontextmanager
    async def _session(self, argv: Sequence[str]) -> AsyncIterator[Any]:
        self.started += 1
        self.argv.append(list(argv))
        steps = int(next(a for a in argv if a.startswith("VASTUI_STEPS=")).split("=")[1])
        batch = int(next((a for a in argv if a.startswith("VASTUI_BATCH_SIZE=")), "=64").split("=")[1])
        loaders = int(next((a for a in argv if a.startswith("VASTUI_LOADERS=")), "=4").split("=")[1])
        precision = next((a for a in argv if a.startswith("VASTUI_PRECISION=")), "=fp32").split("=")[1]
        units = round(640 * (0.7 if loaders < self.input_bound_below else self.speed.get(batch, 1.0)))
        if self.profile_speed is not None:
            units = round(640 * self.profile_speed(batch, precision, loaders))
        if precision == "bf16" and self.bf16_gains:
            units = round(units * (1.0 + self.bf16_gains[self._bf16_runs % len(self.bf16_gains)]))
            self._bf16_runs += 1
        if self.batch_gains.get(batch):
            gains, n = self.batch_gains[batch], self._batch_runs.get(batch, 0)
            units = round(units * (1.0 + gains[n % len(gains)]))
            self._batch_runs[batch] = n + 1
        if self.loaders_gains.get(loaders):
            gains, n = self.loaders_gains[loaders], self._loaders_runs.get(loaders, 0)
            units = round(units * (1.0 + gains[min(n, len(gains) - 1)]))
            self._loaders_runs[loaders] = n + 1
        step_s = self.step_s.get(batch, STEP_S)
        failed = batch in self.out_of_memory or (precision == "fp32" and batch in self.out_of_memory_fp32)
        if failed:
            steps = 0
        wait = self.profile_wait(batch, precision, loaders) if self.profile_wait is not None else 0.0
        digest = WRONG_DIGEST if precision in self.wrong_output else DIGEST
        if precision in self.cut_short:
            steps = min(steps, MARK_EVERY)
        host = self

        class Session:
            result: Result | None = None
            finished = False

            async def __aiter__(self) -> AsyncIterator[Progress | Result]:
                for index in range(steps // MARK_EVERY):
                    extra_s = (host.warmup_extra_s.get(precision, 0.0) + host.warmup_extra_s.get(batch, 0.0)
                               if index == 0 else 0.0)
                    await host.clock.sleep(MARK_EVERY * step_s + extra_s)
                    step_ms = host.step_ms.get(batch, step_s * 1000)
                    yield Progress(seq=next(host._seq), t=host.clock.now(), units=units, accepted=units,
                                   data_wait_s=wait * MARK_EVERY * step_s,
                                   compute_s=(1.0 - wait) * MARK_EVERY * step_s + extra_s,
                                   latency_ms=(step_ms + 1000.0 * extra_s,) + (step_ms,) * (MARK_EVERY - 1),
                                   units_total=0, accepted_total=0, phase=None)
                self.result = Result(seq=next(host._seq), t=host.clock.now(),
                                     exit_status=1 if failed else 0, signal=None,
                                     output_digest=digest, output_bytes=0, units_total=0, accepted_total=0,
                                     elapsed_s=steps * step_s, stderr_tail="")
                self.finished = True
                yield self.result

        session = Session()
        await self.clock.sleep(self.start_s)
        try:
            yield session
        finally:
            if not session.finished:
                self.stopped_early += 1

    def run_agent(self, argv: Sequence[str], *, interval_s: float = 1.0, output_file: str | None = None) -> Any:
        return self._session(argv)

    async def put_chunks(self, *, open_chunks: Callable[[], Iterable[bytes]], remote_path: str) -> None:
        raise AssertionError(f"tuning uploads nothing (asked for {remote_path})")


def _tuning_manifest(tmp_path: Path) -> Manifest:
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    return replace(manifest, correctness=replace(manifest.correctness, expected_digest=None))


def _candidate(manifest: Manifest, index: int = 0) -> Candidate:
    world = generate_world(7, n_machines=120, now=NOW)
    offers = [Offer.from_api(offer_row(m, now=NOW, rented=False), where="row") for m in world.machines]
    plan = build_plan(campaign_id="ctune", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
    return plan.candidates[index]


def _leader(manifest: Manifest, clock: FakeClock, *, work_left_s: float, canary_s: float | None,
            index: int = 0) -> CandidateRun:
    run = CandidateRun(_candidate(manifest, index))
    run.deadline_at = clock.now() + DESTROY_MARGIN_S + work_left_s
    run.canary_s = canary_s
    return run


def _context(manifest: Manifest, clock: FakeClock, host: ScriptedHost, bus: EventBus | None = None) -> CandidateContext:
    # tune() uses the connection it is given (the host), the clock and the bus; the marketplace, executor, store
    # and approver are never reached
    return CandidateContext(campaign_id="ctune", manifest=manifest, market=None,  # type: ignore[arg-type]
                            executor=None, store=None, approver=None,  # type: ignore[arg-type]
                            clock=clock, bus=bus or EventBus(), on_owned=lambda _id: None)


async def _tune(manifest: Manifest, clock: FakeClock, host: ScriptedHost, run: CandidateRun,
                bus: EventBus | None = None) -> Any:
    start = Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1)
    return await tune(_context(manifest, clock, host, bus), run, host, start=start,
                      bottleneck=Bottleneck.COMPUTE_BOUND, time_left_s=lambda: run.work_time_left_s(clock.now()))


async def test_a_trial_the_prior_says_cannot_fit_is_never_started(tmp_path: Path) -> None:
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    host = ScriptedHost(clock)
    # the canary took 100 s for 40 steps: a tuning run (10 steps skipped, 10 timed) ~100 s (no fewer steps than it), a trial of 2 x 5 runs
    # ~1000 s; 900 s are left
    run = _leader(manifest, clock, work_left_s=900.0, canary_s=100.0)
    bus = EventBus()
    events = bus.subscribe()
    outcome = await _tune(manifest, clock, host, run, bus)
    assert host.started == 0 and outcome.trials == ()
    published = []
    while not events.empty():
        published.append(events.get_nowait())
    notices = [e for e in published if isinstance(e, Notice)]
    assert [n.text for n in notices] == [f"{run.cid}: tuning stopped: {outcome.stopped_early}"]  # the console shows why
    assert outcome.profile.precision == "fp32"
    stopped = outcome.stopped
    assert stopped is not None and stopped.why is TuningStop.NO_ROOM, stopped
    assert (round(stopped.left_s / 60, 1), round(stopped.needed_s / 60, 1)) == (15.0, 16.7)


async def test_a_trial_that_runs_out_of_time_is_abandoned_and_its_remote_run_stopped(tmp_path: Path) -> None:
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    host = ScriptedHost(clock)
    # no canary timing: nothing to estimate from, so the trial starts; each run takes 20 steps x 2 s = 40 s
    run = _leader(manifest, clock, work_left_s=300.0, canary_s=None)
    outcome = await _tune(manifest, clock, host, run)
    assert outcome.trials == () and outcome.profile.precision == "fp32"
    assert outcome.stopped is not None and outcome.stopped.why is TuningStop.DEADLINE, outcome.stopped
    assert host.started == 8 and host.stopped_early == 1   # seven whole runs (280 s), the eighth cut short
    assert run.deadline_at is not None
    # work stopped at the first record past the work deadline: the destroy margin is left for the destroy
    assert run.deadline_at - DESTROY_MARGIN_S <= clock.now() <= run.deadline_at - DESTROY_MARGIN_S + MARK_EVERY * STEP_S


async def test_after_a_trial_the_next_is_estimated_from_the_runs_it_timed(tmp_path: Path) -> None:
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16", "fp16")))
    host = ScriptedHost(clock)
    # the prior (the canary: 80 s) lets one trial of 10 runs start; they take 40 s each (400 s), and the next,
    # estimated at 10 x 40 s x 1.25 (500 s), does not fit the 450 s left
    run = _leader(manifest, clock, work_left_s=850.0, canary_s=80.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.knob, t.value) for t in outcome.trials] == [("precision", "bf16")]
    assert host.started == 10 and host.stopped_early == 0
    stopped = outcome.stopped
    assert stopped is not None and stopped.why is TuningStop.NO_ROOM, stopped
    assert (round(stopped.left_s / 60, 1), round(stopped.needed_s / 60, 1)) == (7.5, 8.3)


def test_the_time_cap_budgets_every_trial_the_manifest_allows(tmp_path: Path) -> None:
    plain = load_manifest(fast_manifest(tmp_path / "plain"))
    tuned = load_manifest(fast_manifest(tmp_path / "tuned", tune_precision=True, max_lifetime_s=100_000))
    assert tuning_allowance_s(plain) == 0.0
    one_run = TUNING_RUN_STEPS * tuned.measure.block_s / tuned.measure.block_min_steps + TUNING_RUN_OVERHEAD_PRIOR_S
    assert tuning_allowance_s(tuned) == pytest.approx(2 * tuned.tuning.min_pairs * one_run)
    assert (candidate_time_cap_s(tuned, predicted_pull=300.0) - candidate_time_cap_s(plain, predicted_pull=300.0)
            == pytest.approx(tuning_allowance_s(tuned)))
    short = load_manifest(fast_manifest(tmp_path / "short", tune_precision=True, max_lifetime_s=1500))
    assert candidate_time_cap_s(short, predicted_pull=300.0) == 1500.0
    # two knobs: a trial each, and the joint trial of those that might have gained
    two = replace(tuned, tuning=replace(tuned.tuning, loaders=(4, 8)))
    assert tuning_allowance_s(two) == pytest.approx(3 * 2 * tuned.tuning.min_pairs * one_run)


async def test_a_compute_knob_that_gains_nothing_moves_the_input_path_up(tmp_path: Path) -> None:
    # The scripted host runs every profile at the same speed: precision gains nothing, so the step is not
    # waiting on compute, and the loaders are tried before the batch size (the order would otherwise be
    # precision, batch, loaders for a compute-bound reading).
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, batch_sizes=(64, 128), loaders=(4, 8)))
    host = ScriptedHost(clock)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [t.knob for t in outcome.trials] == ["precision", "loaders", "batch_size"]
    assert outcome.stopped is None and not any(t.verdict.accepted for t in outcome.trials)


def test_a_short_run_is_timed_after_the_warm_up_its_instance_settled_in() -> None:
    def mark(t: float, steps: int = 10) -> Progress:
        return Progress(seq=1, t=t, units=64 * steps, accepted=64 * steps, data_wait_s=0.0, compute_s=1.0,
                        latency_ms=(100.0,) * steps, units_total=0, accepted_total=0, phase=None)

    # steps 1-10 took 5 s (warming up), then 1 s per 10 steps: timed from the marker that ends step 10
    marks = [mark(NOW + 5.0), mark(NOW + 6.0), mark(NOW + 7.0)]
    assert timed_throughput(marks, skip=10) == pytest.approx(1280 / 2.0)
    assert timed_throughput(marks, skip=20) == pytest.approx(640 / 1.0)
    assert timed_throughput(marks, skip=30) is None              # nothing after the warm-up
    assert timed_throughput([mark(NOW + 5.0), mark(NOW + 5.4, steps=4)], skip=10) is None   # under half of 10
    assert timed_throughput(marks, skip=0) == pytest.approx(1280 / 2.0)   # the first marker always starts


def test_a_short_runs_warm_up_cost_is_its_skipped_steps_time_beyond_the_timed_pace() -> None:
    def mark(t: float, step_ms: float, steps: int = 10) -> Progress:
        return Progress(seq=1, t=t, units=64 * steps, accepted=64 * steps, data_wait_s=0.0, compute_s=1.0,
                        latency_ms=(step_ms,) * steps, units_total=0, accepted_total=0, phase=None)

    # steps 1-10 at 0.4 s each (warming up), then 0.1 s a step: 4 s where the pace says 1 s
    marks = [mark(NOW + 4.0, 400.0), mark(NOW + 5.0, 100.0), mark(NOW + 6.0, 100.0)]
    assert warmup_lost_s(marks, skip=10) == pytest.approx(3.0)
    assert warmup_lost_s(marks, skip=20) == pytest.approx(3.0)     # the same steps, measured against later ones
    assert warmup_lost_s([mark(NOW + 1.0, 100.0)] * 3, skip=10) is None   # the timed markers span no time
    assert warmup_lost_s(marks, skip=30) is None                   # nothing timed after the warm-up


def test_skipped_steps_follow_the_instances_warm_up_but_never_fewer_than_ten(tmp_path: Path) -> None:
    run = CandidateRun(_candidate(_tuning_manifest(tmp_path)))
    assert skip_steps(run) == 10
    run.warmup_steps = 37
    assert skip_steps(run) == 37


async def test_a_trial_too_long_for_the_deadline_gives_way_to_a_cheaper_knob(tmp_path: Path) -> None:
    # Each run times a fixed number of steps, so a run at batch 256 does 4x the work of one at 64: the batch trial
    # is priced at 5 x (80 s + 320 s) = 2000 s from the canary's prior, which 1000 s cannot hold. The loaders
    # trial (5 x (80 s + 80 s)) still fits and is run; the batch trial is not started, and the outcome says why.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 256),
                                                loaders=(4, 8)))
    host = ScriptedHost(clock)
    run = _leader(manifest, clock, work_left_s=1000.0, canary_s=80.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.knob, t.value) for t in outcome.trials] == [("loaders", "8")]
    assert host.started == 10
    assert not any("VASTUI_BATCH_SIZE=256" in arg for argv in host.argv for arg in argv)
    stopped = outcome.stopped
    assert stopped is not None and stopped.why is TuningStop.NO_ROOM, stopped
    assert (stopped.knob, stopped.value, round(stopped.needed_s / 60, 1)) == ("batch_size", "256", 33.3)


def test_batch_sizes_are_tried_largest_first() -> None:
    assert value_order(Knob.BATCH_SIZE, (128, 256, 32, 512), 64) == [512, 256, 128, 32]
    assert value_order(Knob.LOADERS, (8, 2), 4) == [8, 2]          # other knobs keep the manifest's order


async def test_the_largest_batch_that_helps_is_kept_without_trying_those_between(tmp_path: Path) -> None:
    # Each doubling gains less (64 -> 128 +5 %, -> 256 +8 % in all): 256 is tried first, kept, and 128 never run.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 128, 256)))
    host = ScriptedHost(clock, speed={128: 1.05, 256: 1.08})
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.knob, t.value, t.verdict.accepted) for t in outcome.trials] == [("batch_size", "256", True)], \
        outcome.trials[0].verdict.reason
    assert outcome.profile.batch_size == 256
    assert not any("VASTUI_BATCH_SIZE=128" in arg for argv in host.argv for arg in argv)


async def test_a_batch_whose_steps_break_the_latency_slo_gives_way_to_the_next_smaller(tmp_path: Path) -> None:
    # 256 is the fastest per unit, but each of its steps takes 6 s against the SLO's 5 s at p90: production could
    # not run it. It is rejected (not kept, not joined with another knob) and 128, within the ceiling, is kept.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    assert manifest.slo.latency is not None and manifest.slo.latency.max_ms == 5000.0
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 128, 256)))
    host = ScriptedHost(clock, speed={128: 1.10, 256: 1.30}, step_ms={128: 3500.0, 256: 6000.0})
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.value, t.verdict.accepted) for t in outcome.trials] == [("256", False), ("128", True)]
    rejected = outcome.trials[0].verdict
    assert rejected.breaks_slo and not rejected.may_gain and "latency SLO" in rejected.reason
    # faster, but its first pair's steps settled it: no speed could make it a profile production runs
    assert rejected.pairs == 1 and "as to speed, not enough evidence" in rejected.reason, rejected.reason
    assert outcome.profile.batch_size == 128


async def test_a_batch_that_does_not_fit_in_memory_gives_way_to_the_next_smaller(tmp_path: Path) -> None:
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 128, 256)))
    host = ScriptedHost(clock, speed={128: 1.05, 256: 1.08}, out_of_memory=frozenset({256}))
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.value, t.verdict.accepted) for t in outcome.trials] == [("256", False), ("128", True)]
    assert "correctness" in outcome.trials[0].verdict.reason
    runs_of_256 = [argv for argv in host.argv if "VASTUI_BATCH_SIZE=256" in argv]
    assert len(runs_of_256) == 1   # the first failed run ends the trial: no pair can redeem a broken output
    assert outcome.profile.batch_size == 128


async def test_a_bigger_batch_is_priced_by_its_steps_not_by_the_runs_start(tmp_path: Path) -> None:
    # Runs of batch 64 take 100 s: 60 s to start, 40 s of steps. After the precision trial (10 such runs), a run at
    # batch 256 is priced at 60 s + 4 x 40 s (x 1.25 headroom), so its trial, 5 x (125 s + 275 s) = 2000 s, fits
    # the 2100 s left; scaling the whole run by 4 would have priced it at 3125 s and never started it.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, batch_sizes=(64, 256)))
    host = ScriptedHost(clock, start_s=60.0)
    run = _leader(manifest, clock, work_left_s=1000.0 + 2100.0, canary_s=80.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.knob, t.value) for t in outcome.trials] == [("precision", "bf16"), ("batch_size", "256")]


async def test_before_any_run_is_timed_a_bigger_batch_is_priced_by_the_steps_the_race_measured(
        tmp_path: Path) -> None:
    # The race's blocks ran 2 s steps, so of the canary's 100 s (40 steps) 20 s were starting it and relaying its
    # records. A tuning run (10 steps skipped, 10 timed) is priced at the canary's 100 s, 40 s of them steps; at
    # batch 256 only those grow fourfold: 60 s + 160 s. The trial, 5 x (100 s + 220 s) = 1600 s, fits the 1800 s
    # left; scaling the whole prior run by 4 would have priced it at 2500 s and never started it.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 256),
                                                loaders=(4,)))
    host = ScriptedHost(clock, start_s=20.0, step_s={256: 4 * STEP_S}, speed={256: 4.4},   # +10 %
                        step_ms={256: 4000.0})   # within the SLO
    run = _leader(manifest, clock, work_left_s=1800.0, canary_s=100.0)
    run.blocks = [MeasuredBlock(block=Block(units=640, duration_s=10 * STEP_S, steps=10), start_t=0.0,
                                end_t=10 * STEP_S, data_wait_share=0.0, gpu_util_pct=None, mem_used_mib=None,
                                mem_total_mib=None, pcie_rx_gbps=None, throttled_share=None)] * 3
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.knob, t.value, t.verdict.accepted) for t in outcome.trials] == [("batch_size", "256", True)], \
        outcome.trials[0].verdict.reason
    assert outcome.stopped is None and host.stopped_early == 0


async def test_a_later_trial_on_an_instance_is_priced_by_the_short_runs_it_already_played(tmp_path: Path) -> None:
    # The canary took 200 s, so before any short run a trial is priced at 5 x (200 s + 200 s) = 2000 s. The first
    # search (a screening's, say) times ten 40-s runs here; a later one on the same instance (its tuning as the
    # leader) prices its trial from them, 5 x (50 s + 50 s) = 500 s, which the 700 s left hold.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, batch_sizes=(64,), loaders=(4, 8)))
    host = ScriptedHost(clock)
    run = _leader(manifest, clock, work_left_s=5000.0, canary_s=200.0)
    start = Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1)
    ctx = _context(manifest, clock, host)
    first = await tune(ctx, run, host, start=start, bottleneck=Bottleneck.COMPUTE_BOUND,
                       time_left_s=lambda: run.work_time_left_s(clock.now()),
                       steps=(TuningStep(Knob.PRECISION, ("bf16",)),))
    assert [(t.knob, t.value) for t in first.trials] == [("precision", "bf16")] and host.started == 10
    run.deadline_at = clock.now() + DESTROY_MARGIN_S + 700.0
    later = await tune(ctx, run, host, start=first.profile, bottleneck=Bottleneck.COMPUTE_BOUND,
                       time_left_s=lambda: run.work_time_left_s(clock.now()),
                       steps=(TuningStep(Knob.LOADERS, (8,)),))
    assert [(t.knob, t.value) for t in later.trials] == [("loaders", "8")], later.stopped_early
    assert host.started == 20 and later.stopped is None


async def test_a_batch_that_gained_nothing_while_input_bound_is_tried_again_once_the_input_is_widened(
        tmp_path: Path) -> None:
    # Read as compute-bound, but one loader starves the GPU: batch 256 gains nothing (and 128 is not tried, since
    # the largest step gained nothing), the loaders come next and gain, and then batch 256 is tried again and kept.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 128, 256),
                                                loaders=(1, 4)))
    host = ScriptedHost(clock, speed={128: 1.05, 256: 1.08}, input_bound_below=4)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    start = Profile(batch_size=64, precision="fp32", loaders=1, gpu_count=1)
    outcome = await tune(_context(manifest, clock, host), run, host, start=start,
                         bottleneck=Bottleneck.COMPUTE_BOUND, time_left_s=lambda: run.work_time_left_s(clock.now()))
    assert [(t.knob, t.value, t.verdict.accepted) for t in outcome.trials] == [
        ("batch_size", "256", False), ("loaders", "4", True), ("batch_size", "256", True)]
    assert (outcome.profile.batch_size, outcome.profile.loaders) == (256, 4)


async def test_a_batch_whose_output_failed_is_not_tried_again_at_the_same_precision(tmp_path: Path) -> None:
    # Batch 256 does not fit; 128 gains nothing on one loader; four loaders are kept and batch is tried again —
    # at 128, which now gains 5 %, not at 256, whose output would fail again.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 128, 256),
                                                loaders=(1, 4)))
    host = ScriptedHost(clock, speed={128: 1.05}, input_bound_below=4, out_of_memory=frozenset({256}))
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune_from(manifest, clock, host, run, Profile(batch_size=64, precision="fp32", loaders=1, gpu_count=1))
    assert [(t.knob, t.value, t.verdict.accepted) for t in outcome.trials] == [
        ("batch_size", "256", False), ("batch_size", "128", False), ("loaders", "4", True),
        ("batch_size", "128", True)]
    assert sum("VASTUI_BATCH_SIZE=256" in argv for argv in host.argv) == 1
    assert (outcome.profile.batch_size, outcome.profile.loaders) == (128, 4)


async def _tune_from(manifest: Manifest, clock: FakeClock, host: ScriptedHost, run: CandidateRun,
                     start: Profile) -> Any:
    return await tune(_context(manifest, clock, host), run, host, start=start,
                      bottleneck=Bottleneck.COMPUTE_BOUND, time_left_s=lambda: run.work_time_left_s(clock.now()))


async def test_knobs_that_pay_only_together_are_tried_together_and_kept(tmp_path: Path) -> None:
    # bf16 alone gains 1 % (the step then waits for its one loader), four loaders alone 1 % (the GPU was the
    # limit): neither clears the 2 % minimum, neither is worse. Together they gain 50 %. A larger batch gains
    # nothing (and is not worse either, so it is not part of the joint change: an interval of exactly zero does
    # not reach above it).
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64, 128),
                                                loaders=(1, 4)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        both = precision == "bf16" and loaders >= 4
        return 1.5 if both else 1.01 if precision == "bf16" or loaders >= 4 else 1.0

    host = ScriptedHost(clock, profile_speed=speed)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune_from(manifest, clock, host, run, Profile(batch_size=64, precision="fp32", loaders=1, gpu_count=1))
    judged = [(t.knob, t.baseline, t.value, t.verdict.accepted) for t in outcome.trials]
    assert judged[-1] == ("loaders+precision", "1/fp32", "4/bf16", True), judged
    assert not any(accepted for *_rest, accepted in judged[:-1]), judged   # each alone was rejected
    assert (outcome.profile.precision, outcome.profile.loaders, outcome.profile.batch_size) == ("bf16", 4, 64)
    assert outcome.trials[-1].verdict.gain is not None and outcome.trials[-1].verdict.gain.point == \
        pytest.approx(0.5 / 1.0, rel=0.01)


async def test_a_faster_compute_step_left_waiting_for_input_is_tried_with_the_most_loaders(tmp_path: Path) -> None:
    # A host whose input path just keeps up at fp32: bf16 makes the compute faster, but the step then waits for its
    # four loaders (a quarter of its time) and runs no faster; eight loaders alone gain nothing (the GPU is the
    # limit). Neither trial reaches above zero, so neither is hopeful by its gain; the bf16 runs' wait for input says
    # it pays with a wider input path, and bf16 with eight loaders (+35 %) is tried and kept.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64,),
                                                loaders=(4, 8)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        return 1.35 if precision == "bf16" and loaders >= 8 else 1.0

    def wait(batch: int, precision: str, loaders: int) -> float:
        return 0.25 if precision == "bf16" and loaders < 8 else 0.0

    host = ScriptedHost(clock, profile_speed=speed, profile_wait=wait)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune_from(manifest, clock, host, run, Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1))
    judged = [(t.knob, t.baseline, t.value, t.verdict.accepted) for t in outcome.trials]
    assert judged == [("precision", "fp32", "bf16", False), ("loaders", "4", "8", False),
                      ("loaders+precision", "4/fp32", "8/bf16", True)], judged
    assert outcome.trials[0].verdict.variant_data_wait == pytest.approx(0.25)
    assert (outcome.profile.precision, outcome.profile.loaders) == ("bf16", 8)


async def test_an_undecided_compute_change_left_waiting_for_input_is_tried_again_once_the_input_widens(
        tmp_path: Path) -> None:
    # One loader starves the GPU: bf16 alone runs 3 % faster on a noisy host (undecided) and its steps wait for
    # input a third of their time; four loaders alone gain 12 %, and are kept. bf16 is then tried again, alone,
    # at four loaders (+25 %), and kept. Before, its only way back was the joint trial with the most loaders --
    # no longer a change once the loaders were kept alone -- so the profile stayed at fp32.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64,),
                                                loaders=(1, 4)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        if loaders < 4:
            return 1.03 if precision == "bf16" else 1.0
        return 1.4 if precision == "bf16" else 1.12

    def wait(batch: int, precision: str, loaders: int) -> float:
        return 0.33 if precision == "bf16" and loaders < 4 else 0.0

    host = ScriptedHost(clock, profile_speed=speed, profile_wait=wait, bf16_gains=(0.10, -0.08, 0.09, -0.07, 0.06))
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune_from(manifest, clock, host, run, Profile(batch_size=64, precision="fp32", loaders=1, gpu_count=1))
    judged = [(t.knob, t.baseline, t.value, t.verdict.accepted) for t in outcome.trials]
    assert judged == [("precision", "fp32", "bf16", False), ("loaders", "1", "4", True),
                      ("precision", "fp32", "bf16", True)], judged
    first = outcome.trials[0].verdict
    assert first.gain is not None and first.gain.low < 0 < first.gain.high and first.gain.point > 0.02
    assert (outcome.profile.precision, outcome.profile.loaders) == ("bf16", 4)


async def test_a_compute_change_with_no_wait_for_input_is_not_joined_with_more_loaders(tmp_path: Path) -> None:
    # The same host, but bf16's steps do not wait for input (its gain is simply nothing): no joint trial.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64,),
                                                loaders=(4, 8)))
    host = ScriptedHost(clock, profile_speed=lambda b, p, n: 1.35 if p == "bf16" and n >= 8 else 1.0)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune_from(manifest, clock, host, run, Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1))
    assert [t.knob for t in outcome.trials] == ["precision", "loaders"]
    assert outcome.profile.precision == "fp32"


async def test_no_gpu_count_above_the_instances_gpus_is_tried(tmp_path: Path) -> None:
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64,),
                                                loaders=(4,), gpu_counts=(1, 2)))
    host = ScriptedHost(clock)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    one_gpu = replace(run.candidate, offer=replace(run.candidate.offer, num_gpus=1))
    outcome = await _tune_from(manifest, clock, host, CandidateRun(one_gpu), Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1))
    assert outcome.trials == () and host.started == 0
    two_gpus = CandidateRun(replace(run.candidate, offer=replace(run.candidate.offer, num_gpus=2)))
    two_gpus.deadline_at, two_gpus.canary_s = run.deadline_at, run.canary_s
    outcome = await _tune_from(manifest, clock, host, two_gpus, Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1))
    assert [(t.knob, t.value) for t in outcome.trials] == [("gpu_count", "2")]


async def test_a_knob_shown_worse_is_left_out_of_the_joint_change(tmp_path: Path) -> None:
    # bf16 alone +1 %, batch 128 -5 % (worse: its whole interval is below zero), loaders 4 +1 %: the joint trial
    # is bf16 with four loaders, at batch 64.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64, 128),
                                                loaders=(1, 4)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        return (1.01 if precision == "bf16" else 1.0) * (1.01 if loaders >= 4 else 1.0) * (0.95 if batch > 64 else 1.0)

    host = ScriptedHost(clock, profile_speed=speed)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune_from(manifest, clock, host, run, Profile(batch_size=64, precision="fp32", loaders=1, gpu_count=1))
    joint = [t for t in outcome.trials if "+" in t.knob]
    assert [(t.knob, t.value) for t in joint] == [("loaders+precision", "4/bf16")]
    assert outcome.profile.batch_size == 64


async def test_a_batch_too_big_at_fp32_is_tried_again_once_bf16_is_kept(tmp_path: Path) -> None:
    # batch 256 fails at fp32 (out of memory); bf16 and four loaders are kept together; then 256, which fits at
    # bf16 and gains 10 %, is tried again and kept.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64, 256),
                                                loaders=(1, 4)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        both = precision == "bf16" and loaders >= 4
        base = 1.5 if both else 1.01 if precision == "bf16" or loaders >= 4 else 1.0
        return base * (1.1 if batch == 256 and both else 1.0)

    host = ScriptedHost(clock, profile_speed=speed, out_of_memory_fp32=frozenset({256}))
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune_from(manifest, clock, host, run, Profile(batch_size=64, precision="fp32", loaders=1, gpu_count=1))
    judged = [(t.knob, t.value, t.verdict.accepted) for t in outcome.trials]
    assert ("batch_size", "256", False) in judged and outcome.trials[judged.index(("batch_size", "256", False))] \
        .verdict.output_failed
    assert judged[-2:] == [("loaders+precision", "4/bf16", True), ("batch_size", "256", True)], judged
    assert (outcome.profile.batch_size, outcome.profile.precision, outcome.profile.loaders) == (256, "bf16", 4)


# A noisy host: bf16 gains about 6 %, but the first five pairs straddle zero (one run 10 % slow, one 30 % fast);
# the next five agree.
NOISY_BF16 = (0.30, -0.10, 0.08, 0.06, -0.05, 0.07, 0.05, 0.09, 0.06, 0.08)


async def test_an_undecided_promising_trial_gets_as_many_pairs_again_when_time_allows(tmp_path: Path) -> None:
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    host = ScriptedHost(clock, bf16_gains=NOISY_BF16)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    [trial] = outcome.trials
    assert trial.verdict.pairs == 2 * manifest.tuning.min_pairs and host.started == 4 * manifest.tuning.min_pairs
    assert trial.verdict.accepted and trial.verdict.gain is not None and trial.verdict.gain.low > 0
    assert outcome.profile.precision == "bf16"


async def test_a_change_whose_steps_break_the_latency_slo_gets_no_second_look(tmp_path: Path) -> None:
    # Batch 256's speed is as undecided and promising as NOISY_BF16's, which earns a second look when time allows,
    # but every one of its steps takes 6 s against the SLO's 5 s at p90: no number of pairs makes it a profile
    # production may run, so the trial ends on its first pair, whose ten steps are all over the ceiling (seen:
    # twelve pairs on three machines to reject one; then six, two rounds, before the verdict looked).
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 256)))
    host = ScriptedHost(clock, batch_gains={256: NOISY_BF16}, step_ms={256: 6000.0})
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    [trial] = outcome.trials
    verdict = trial.verdict
    assert verdict.breaks_slo and not verdict.accepted, verdict
    assert verdict.pairs == 1 and host.started == 2, (verdict.pairs, host.started)
    assert outcome.profile.batch_size == 64


async def test_a_change_whose_steps_stay_within_the_latency_slo_plays_every_pair(tmp_path: Path) -> None:
    # The same batch 256 at 4.9 s a step, just under the ceiling, its first step a marker slower (a warm-up over
    # the ceiling): not clearly over it, so the trial plays its five pairs and the look after them.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 256)))
    host = ScriptedHost(clock, batch_gains={256: NOISY_BF16}, step_ms={256: 4900.0}, warmup_extra_s={256: 2.0})
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    [trial] = outcome.trials
    verdict = trial.verdict
    assert not verdict.breaks_slo and verdict.pairs >= manifest.tuning.min_pairs, verdict
    assert host.started == 2 * verdict.pairs


async def test_a_change_whose_pairs_find_n_units_clearly_dearer_gets_no_second_look(tmp_path: Path) -> None:
    # NOISY_BF16's undecided, promising speed earns a second look (the test above); here each bf16 run also warms up
    # 200 s longer, which makes a production run of 20,000 units clearly dearer on the first five pairs: a clearer
    # speed would only meet the cost's veto, so the trial ends there and says why (seen: 12 pairs on three machines
    # to find batch 128 dearer at N = 3,000).
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, production_units=20_000)
    host = ScriptedHost(clock, bf16_gains=NOISY_BF16, warmup_extra_s={"bf16": 200.0})
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    [trial] = outcome.trials
    verdict = trial.verdict
    assert not verdict.accepted and verdict.gain is not None and verdict.gain.low < 0 < verdict.gain.high
    assert verdict.cost_gain is not None and verdict.cost_gain.high < 0, verdict.cost_gain
    assert verdict.pairs == manifest.tuning.min_pairs and host.started == 2 * manifest.tuning.min_pairs
    assert "clearly dearer" in verdict.reason and "at N = 20,000 units" in verdict.reason
    assert outcome.profile.precision == "fp32"


async def test_extra_pairs_come_only_from_time_no_trial_needs(tmp_path: Path) -> None:
    # Five pairs of 40 s runs take 400 s, leaving 1000 s. Five more pairs would take about 500 s (the estimate's
    # headroom) and fit, but the loaders trial still to come needs about as much, and so does a joint trial of the
    # two knobs: the precision verdict stands on five pairs, and the loaders trial runs.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, loaders=(4, 8)))
    host = ScriptedHost(clock, bf16_gains=NOISY_BF16)
    run = _leader(manifest, clock, work_left_s=1400.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.knob, t.verdict.pairs) for t in outcome.trials][:2] == [("precision", 5), ("loaders", 5)]
    precision = outcome.trials[0].verdict
    assert not precision.accepted and precision.gain is not None and precision.gain.low < 0


async def test_the_time_kept_for_later_trials_is_priced_at_what_each_would_run(tmp_path: Path) -> None:
    # Batch 256's steps take four times as long: five pairs of 40 s + 160 s runs take 1000 s, leaving 3400 s. Five
    # more pairs are estimated at 1250 s (the estimate's headroom); the loaders trial still to come runs at batch
    # 64 (500 s) and a joint trial could hold batch 256 (1250 s): 3000 s in all, so the second look fits. Priced
    # at the batch trial's own cost, the loaders trial would have taken the room (3750 s) and left 256 unproven.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 256),
                                                loaders=(4, 8)))
    # (its steps wait for input 4 % of their time, so more loaders may gain up to 4.2 % and are tried)
    host = ScriptedHost(clock, step_s={256: 4 * STEP_S}, speed={256: 4.0}, batch_gains={256: NOISY_BF16},
                        step_ms={256: STEP_S * 1000}, profile_wait=lambda *_: 0.04)
    run = _leader(manifest, clock, work_left_s=1000.0 + 3400.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    judged = [(t.knob, t.value, t.verdict.pairs, t.verdict.accepted) for t in outcome.trials]
    assert judged[0] == ("batch_size", "256", 2 * manifest.tuning.min_pairs, True), judged
    assert [knob for knob, *_rest in judged] == ["batch_size", "loaders"]
    assert outcome.profile.batch_size == 256


async def test_the_tuned_profiles_steps_are_those_run_at_it_once_kept(tmp_path: Path) -> None:
    # bf16 is kept (+30 %); batch 256 is then tried against it and gains nothing. The steps seen at the kept
    # profile (batch 64, bf16: 2 s each) -- the bf16 trial's variant runs and the later trials' baseline runs --
    # are the evidence for the tuned profile's latency SLO; batch 256's own steps (3.1 s) are not.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64, 256)))
    host = ScriptedHost(clock, profile_speed=lambda _batch, precision, _loaders: 1.3 if precision == "bf16" else 1.0,
                        step_ms={64: 2000.0, 256: 3100.0})
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    outcome = await _tune(manifest, clock, host, run)
    assert [(t.knob, t.value, t.verdict.accepted) for t in outcome.trials][:2] == [
        ("precision", "bf16", True), ("batch_size", "256", False)]
    later = outcome.trials[1:]
    steps = outcome.profile_latencies_ms
    assert set(steps) == {2000.0}
    assert len(steps) == len(outcome.trials[0].verdict.variant_latencies_ms) + sum(
        len(t.verdict.baseline_latencies_ms) for t in later)
    assert 3100.0 in outcome.trials[1].verdict.variant_latencies_ms
    # Nothing kept: no tuned profile, no evidence for one.
    flat = ScriptedHost(clock)
    nothing = await _tune(manifest, clock, flat, _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0))
    assert not any(t.verdict.accepted for t in nothing.trials) and nothing.profile_latencies_ms == ()


async def test_a_confirmation_tries_only_what_the_screening_left_open(tmp_path: Path) -> None:
    """Given the steps the screening left to confirm (here the loaders), the search tries those alone, from the
    screened profile, and says whose screening settled the rest: the precision it already ran at is not tried
    back (before, a leader at bf16 spent its first trial on bf16 -> fp32)."""
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64, 128),
                                                loaders=(1, 4)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        return 1.3 if loaders >= 4 else 1.0

    host = ScriptedHost(clock, profile_speed=speed)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    screened = Profile(batch_size=128, precision="bf16", loaders=1, gpu_count=1)
    outcome = await tune(_context(manifest, clock, host), run, host, start=screened,
                         bottleneck=Bottleneck.COMPUTE_BOUND, time_left_s=lambda: run.work_time_left_s(clock.now()),
                         steps=(TuningStep(Knob.LOADERS, (4,)),), screened_by="c9")
    assert [(t.knob, t.baseline, t.value, t.verdict.accepted) for t in outcome.trials] == [("loaders", "1", "4", True)]
    assert outcome.profile == replace(screened, loaders=4) and outcome.screened_by == "c9"


async def test_a_leader_confirming_a_change_starts_from_the_pairs_it_played_in_the_screening(tmp_path: Path) -> None:
    """The screening left loaders 1 -> 4 open; the leader played four of its pairs there (+30 %), another machine
    two. Its confirming trial carries its own four (not the other machine's) and plays one pair more, so it fits
    a deadline that five fresh pairs would not (400 s left, a pair ~200 s by the canary's pace): kept."""
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64, 128),
                                                loaders=(1, 4)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        return 1.3 if loaders >= 4 else 1.0

    screened = Profile(batch_size=128, precision="bf16", loaders=1, gpu_count=1)
    wider = replace(screened, loaders=4)
    gain = Interval(point=0.1, low=-0.05, high=0.35, confidence=0.95, n=6)

    async def confirmed(earlier: tuple[TuningTrial, ...]) -> tuple[Any, ScriptedHost]:
        host = ScriptedHost(clock, profile_speed=speed)
        run = _leader(manifest, clock, work_left_s=400.0, canary_s=100.0)
        own = [PairPlayed(run.cid, 32.0, 41.6, None, None)] * 4
        trials = tuple(replace(t, played=(*own, *t.played)) for t in earlier)
        outcome = await tune(_context(manifest, clock, host), run, host, start=screened,
                             bottleneck=Bottleneck.COMPUTE_BOUND,
                             time_left_s=lambda: run.work_time_left_s(clock.now()),
                             steps=(TuningStep(Knob.LOADERS, (4,)),), screened_by="c9", earlier=trials)
        return outcome, host

    screening = TuningTrial("loaders", "1", "4", AbVerdict(False, gain, 6, "no clear gain"), wider, base=screened,
                            played=(PairPlayed("c9", 32.0, 30.0, None, None),) * 2)
    outcome, host = await confirmed((screening,))
    (trial,) = outcome.trials
    assert trial.verdict.accepted and trial.carried == 4 and trial.verdict.pairs == 5
    assert host.started == 2 and dict(trial.pairs_on) == {trial.played[0].cid: 5}
    assert outcome.profile == wider and "4 of its pairs played in the screening" in trial.describe()
    # the screening's pairs at another baseline (batch 64) are not this trial's: nothing carried, no room
    elsewhere = replace(screening, base=replace(screened, batch_size=64), change=replace(wider, batch_size=64))
    outcome, host = await confirmed((elsewhere,))
    assert outcome.trials == () and host.started == 0
    assert outcome.stopped is not None and outcome.stopped.why is TuningStop.NO_ROOM


async def test_a_leader_confirming_a_smaller_batch_judges_it_by_the_cost_of_n_units(tmp_path: Path) -> None:
    """A screening's trim back to batch 64 left open on cost (screening.py, ``settles``) is confirmed on the
    leader: batch 64 is 3 % slower in steady state and warms up 60 s sooner, so at N = 20,000 units a production run
    is cheaper with it and it is kept, though slower (judged on speed, as before, it never could be); at 2,000,000
    units the warm-up is nothing beside 3 % of the run, and it is not."""
    async def confirmed(units: int) -> Any:
        manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
        manifest = replace(manifest, production_units=units,
                           tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 128),
                                          loaders=(4, 8)))
        host = ScriptedHost(clock, profile_speed=lambda b, p, n: 1.03 if b == 128 else 1.0,
                            warmup_extra_s={128: 60.0})
        run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=100.0)
        screened = Profile(batch_size=128, precision="fp32", loaders=8, gpu_count=1)
        return await tune(_context(manifest, clock, host), run, host, start=screened,
                          bottleneck=Bottleneck.COMPUTE_BOUND, time_left_s=lambda: run.work_time_left_s(clock.now()),
                          steps=(TuningStep(Knob.BATCH_SIZE, (64,)),), screened_by="c9")

    small = await confirmed(20_000)
    [trial] = small.trials
    assert (trial.knob, trial.baseline, trial.value) == ("batch_size", "128", "64")
    assert trial.verdict.on_cost and trial.verdict.accepted, trial.describe()
    assert trial.verdict.gain is not None and trial.verdict.gain.point < 0     # slower, and kept for its cost
    assert small.profile.batch_size == 64
    large = await confirmed(2_000_000)
    [trial] = large.trials
    assert trial.verdict.on_cost and not trial.verdict.accepted, trial.describe()
    assert large.profile.batch_size == 128


def _raced_blocks(run: CandidateRun, *, waits: Sequence[float]) -> CandidateRun:
    """``run`` with race blocks at the start profile whose steps waited ``waits`` of their time for input."""
    run.blocks = [MeasuredBlock(block=Block(units=640, duration_s=10.0, steps=10), start_t=0.0, end_t=10.0,
                                data_wait_share=w, gpu_util_pct=None, mem_used_mib=None, mem_total_mib=None,
                                pcie_rx_gbps=None, throttled_share=None) for w in waits]
    return run


def test_more_loaders_gain_at_most_the_time_steps_wait_for_input() -> None:
    assert input_gain_bound(0.0) == 0.0
    assert input_gain_bound(0.2) == pytest.approx(0.25)    # a step of 1 s waiting 0.2 s: 0.8 s at best, +25 %
    assert input_gain_bound(0.0196) < 0.02 < input_gain_bound(0.0197)
    assert input_gain_bound(1.0) == float("inf") and input_gain_bound(-0.1) == 0.0


async def test_more_loaders_are_not_tried_where_the_steps_never_wait_for_input(tmp_path: Path) -> None:
    """The race's blocks at the start profile waited 1 % for input (the median block): more loaders can gain at
    most 1 %, below the 2 % a change must gain, so no pair is spent on them; the receipt's line says why. Blocks
    that waited 10 %: tried (and here kept, the scripted host being input-bound below 8 loaders)."""
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), loaders=(4, 8)))
    fed = ScriptedHost(clock, input_bound_below=8)
    quiet = _raced_blocks(_leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0), waits=(0.0, 0.01, 0.01))
    outcome = await _tune(manifest, clock, fed, quiet)
    assert outcome.trials == () and fed.started == 0
    [line] = outcome.not_tried
    assert line.startswith("loaders 4 -> 8: not tried") and "1.0%" in line and "< 2%" in line, line
    waiting = _raced_blocks(_leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0), waits=(0.1, 0.1))
    tried = await _tune(manifest, clock, ScriptedHost(clock, input_bound_below=8), waiting)
    assert [(t.knob, t.value, t.verdict.accepted) for t in tried.trials] == [("loaders", "8", True)]
    assert tried.not_tried == ()


def _bf16_half_again(_batch: int, precision: str, _loaders: int) -> float:
    """A profile's speed-up: bf16 runs 1.5 times as fast, whatever the batch and loaders."""
    return 1.5 if precision == "bf16" else 1.0


def _waiting_at_bf16(share: float) -> Callable[[int, str, int], float]:
    """A profile's input wait: ``share`` of each step at bf16, none at fp32."""
    def wait(_batch: int, precision: str, _loaders: int) -> float:
        return share if precision == "bf16" else 0.0
    return wait


async def test_a_compute_change_starved_where_more_loaders_alone_cannot_pay_is_joined_with_them_next(
        tmp_path: Path) -> None:
    """At fp32 one loader keeps up (the race's steps never waited), so more loaders alone are bounded out. bf16
    alone gains 3 %, its steps waiting for input three quarters of their time; batch 128 at that one loader would
    starve the same way. bf16 with four loaders is tried next (+100 %, kept), before the batch; the batch is then
    judged where production would run it (bf16, four loaders: flat) and no trim takes it back out of a joint
    change. Before, batch 128 was tried at fp32 and one loader, then rode in the joint change and was trimmed."""
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64, 128),
                                                loaders=(1, 4)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        if precision == "fp32":
            return 1.0
        return 2.0 if loaders >= 4 else 1.03

    def wait(batch: int, precision: str, loaders: int) -> float:
        return 0.75 if precision == "bf16" and loaders < 4 else 0.0

    host = ScriptedHost(clock, profile_speed=speed, profile_wait=wait, bf16_gains=(0.10, -0.08, 0.09, -0.07, 0.06))
    run = _raced_blocks(_leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0), waits=(0.0, 0.0))
    outcome = await _tune_from(manifest, clock, host, run,
                               Profile(batch_size=64, precision="fp32", loaders=1, gpu_count=1))
    judged = [(t.knob, t.baseline, t.value, t.verdict.accepted) for t in outcome.trials]
    assert judged == [("precision", "fp32", "bf16", False), ("loaders+precision", "1/fp32", "4/bf16", True),
                      ("batch_size", "64", "128", False)], judged
    assert outcome.trials[2].base == Profile(batch_size=64, precision="bf16", loaders=4, gpu_count=1)
    assert (outcome.profile.batch_size, outcome.profile.precision, outcome.profile.loaders) == (64, "bf16", 4)
    [line] = outcome.not_tried
    assert line.startswith("loaders 1 -> 4: not tried"), line


async def test_a_kept_compute_change_whose_steps_wait_for_input_moves_the_input_path_up(tmp_path: Path) -> None:
    """bf16 is kept (+50 %), and its steps wait for their four loaders a fifth of their time: eight loaders are
    tried next (+20 % more), before the batch, which is judged at the profile with the wider input path. Without
    the wait, the bottleneck's order stands (the batch next; the loaders then bounded out, the steps never waiting)."""
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16"), batch_sizes=(64, 128),
                                                loaders=(4, 8)))

    def speed(batch: int, precision: str, loaders: int) -> float:
        return 1.0 if precision == "fp32" else (1.8 if loaders >= 8 else 1.5)

    bases = []
    for bf16_wait, order in ((0.2, ["precision", "loaders", "batch_size"]), (0.0, ["precision", "batch_size"])):
        host = ScriptedHost(clock, profile_speed=speed, profile_wait=_waiting_at_bf16(bf16_wait))
        run = _raced_blocks(_leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0), waits=(0.1, 0.1))
        outcome = await _tune(manifest, clock, host, run)
        described = [t.describe() for t in outcome.trials]
        assert [t.knob for t in outcome.trials] == order, (bf16_wait, described)
        assert outcome.trials[0].verdict.accepted and outcome.trials[1].verdict.accepted == (bf16_wait > 0), described
        bases.append(next(t.base for t in outcome.trials if t.knob == "batch_size"))
    assert [(b.precision, b.loaders) for b in bases if b is not None] == [("bf16", 8), ("bf16", 4)]


async def test_the_wait_that_bounds_the_loaders_is_the_kept_profiles(tmp_path: Path) -> None:
    """The race's blocks never waited, but bf16 (kept, +50 %) makes the steps wait 20 % for input: the loaders
    are judged at bf16's wait, so they are tried; with bf16's steps not waiting either, they are not."""
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, loaders=(4, 8)))


    for bf16_wait, tried in ((0.2, ["precision", "loaders"]), (0.0, ["precision"])):
        host = ScriptedHost(clock, profile_speed=_bf16_half_again, profile_wait=_waiting_at_bf16(bf16_wait))
        run = _raced_blocks(_leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0), waits=(0.0, 0.0))
        outcome = await _tune(manifest, clock, host, run)
        assert [t.knob for t in outcome.trials] == tried, (bf16_wait, [t.describe() for t in outcome.trials])
        assert outcome.profile.precision == "bf16" and len(outcome.not_tried) == (bf16_wait == 0.0)


def _checked_manifest(tmp_path: Path) -> Manifest:
    """The tuning manifest with the output checked against DIGEST: fp32 -> bf16 is the only knob."""
    manifest = _tuning_manifest(tmp_path)
    return replace(manifest, correctness=replace(manifest.correctness, expected_digest=f"sha256:{DIGEST}"))


def _other(manifest: Manifest, clock: FakeClock, *, work_left_s: float, canary_s: float) -> CandidateRun:
    """A second candidate (another cid than ``_leader``'s), to help a pooled trial."""
    return _leader(manifest, clock, work_left_s=work_left_s, canary_s=canary_s, index=1)


async def _pooled(manifest: Manifest, clock: FakeClock, screener: ScriptedHost, helper: ScriptedHost,
                  helper_run: CandidateRun) -> tuple[Any, TrialPool]:
    """Tune ``_leader`` on ``screener`` with ``helper_run`` at hand to play the trial's pairs on ``helper`` (as the
    engine's waiting candidates do: whenever the trial wants a pair it may play)."""
    pool = TrialPool(on_change=lambda: None)
    pool.at_hand.add(helper_run.cid)
    ctx = _context(manifest, clock, screener)
    done = asyncio.Event()

    async def helping() -> None:
        while not done.is_set():
            if not await pool.help(ctx, helper_run, helper, gpu_count=1,
                                   time_left_s=lambda: helper_run.work_time_left_s(clock.now()),
                                   keep_going=lambda: True):
                await asyncio.sleep(0)

    helper_task = asyncio.create_task(helping())
    try:
        run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
        start = Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1)
        outcome = await tune(ctx, run, screener, start=start, bottleneck=Bottleneck.COMPUTE_BOUND,
                             time_left_s=lambda: run.work_time_left_s(clock.now()), pool=pool)
    finally:
        done.set()
        await helper_task
    return outcome, pool


async def test_a_helpers_wrong_output_at_the_change_rejects_it_for_every_machine(tmp_path: Path) -> None:
    """bf16 is 50 % faster on both machines, and its output is right on the screener's: alone, the screener keeps
    it. A helper whose bf16 run ends with a wrong output fails the change (a wrong output is infinite cost
    wherever it shows)."""
    manifest, clock = _checked_manifest(tmp_path), FakeClock(NOW)


    alone = await _tune(manifest, clock, ScriptedHost(clock, profile_speed=_bf16_half_again),
                        _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0))
    assert alone.profile.precision == "bf16"
    helper = ScriptedHost(clock, profile_speed=_bf16_half_again, wrong_output=frozenset({"bf16"}))
    outcome, _pool = await _pooled(manifest, clock, ScriptedHost(clock, profile_speed=_bf16_half_again), helper,
                                   _other(manifest, clock, work_left_s=100_000.0, canary_s=40.0))
    [trial] = outcome.trials
    assert helper.started >= 1 and trial.verdict.output_failed and not trial.verdict.accepted, trial.describe()
    assert outcome.profile.precision == "fp32"


async def test_a_helper_out_of_time_mid_pair_drops_its_half_and_leaves_the_trial(tmp_path: Path) -> None:
    """A helper whose deadline comes during a pair: the half pair is not counted, the helper plays no more, and
    the trial is judged on the screener's pairs alone (all it needs)."""
    manifest, clock = _checked_manifest(tmp_path), FakeClock(NOW)


    # its canary took 1 s, so a pair looks like it fits; 60 s of work left holds one 40 s run, not two
    short = _other(manifest, clock, work_left_s=60.0, canary_s=1.0)
    helper = ScriptedHost(clock, profile_speed=_bf16_half_again)
    outcome, pool = await _pooled(manifest, clock, ScriptedHost(clock, profile_speed=_bf16_half_again), helper, short)
    [trial] = outcome.trials
    assert helper.started >= 1 and helper.stopped_early >= 1, (helper.started, helper.stopped_early)
    assert short.cid in pool.out
    assert dict(trial.pairs_on).get(short.cid, 0) == 0 and trial.verdict.pairs >= manifest.tuning.min_pairs
    assert trial.verdict.accepted and outcome.profile.precision == "bf16"


async def test_pairs_cut_short_are_played_again_a_bounded_number_of_times(tmp_path: Path) -> None:
    """Every fp32 (baseline) run ends after one marker, too few steps to time: each pair is dropped and played
    again, at most as many times again as the trial wants pairs; then the trial is judged on what it has (none:
    not kept), and tuning goes on."""
    manifest, clock = _checked_manifest(tmp_path), FakeClock(NOW)
    host = ScriptedHost(clock, profile_speed=lambda _b, p, _n: 1.5 if p == "bf16" else 1.0,
                        cut_short=frozenset({"fp32"}))
    outcome = await _tune(manifest, clock, host, _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0))
    [trial] = outcome.trials
    assert trial.verdict.pairs == 0 and not trial.verdict.accepted and outcome.profile.precision == "fp32"
    pairs = manifest.tuning.min_pairs
    assert host.started <= 2 * 2 * pairs, host.started   # two runs a pair, at most twice the pairs wanted


async def test_a_pooled_screening_tries_the_loaders_when_any_machine_waits_for_input(tmp_path: Path) -> None:
    """The screened profile is every class's: after bf16 is kept, the loaders are judged at the wait of the machine
    that waited most (its median run), not the pool's median: the helper's bf16 steps wait 10 % for input, the
    screener's none, so they are tried; when neither waits, they are not."""
    manifest, clock = _checked_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, loaders=(4, 8)))


    for helper_wait, tried in ((0.1, ["precision", "loaders"]), (0.0, ["precision"])):
        helper = ScriptedHost(clock, profile_speed=_bf16_half_again, profile_wait=_waiting_at_bf16(helper_wait))
        outcome, _pool = await _pooled(manifest, clock, ScriptedHost(clock, profile_speed=_bf16_half_again), helper,
                                       _other(manifest, clock, work_left_s=100_000.0, canary_s=40.0))
        assert [t.knob for t in outcome.trials] == tried, (helper_wait, [t.describe() for t in outcome.trials])
        assert outcome.profile.precision == "bf16" and len(outcome.not_tried) == (helper_wait == 0.0)
        assert dict(outcome.trials[0].pairs_on).get("c2", 0) >= 1, outcome.trials[0].describe()


async def test_a_larger_batch_kept_only_within_a_joint_change_is_trimmed_when_n_units_cost_less_without_it(
        tmp_path: Path) -> None:
    """Eight loaders pay on this host (+36 % at batch 64), but three of their first runs draw 30 % low, so their own
    trial is undecided; batch 128 alone gains 1.5 %, under the minimum. Together they gain 40 % and the joint change
    is kept. Batch 128 adds about 3 % of that while its warm-up is 60 s longer: at N = 20,000 units the trim back to
    batch 64 (eight loaders kept) makes the production run cheaper, and it is kept though slower; at 2,000,000
    units the warm-up is nothing beside 3 % of the run, and the trim is not kept."""
    async def tuned(units: int) -> Any:
        manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
        manifest = replace(manifest, production_units=units,
                           tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 128),
                                          loaders=(4, 8)))
        table = {(64, 4): 1.0, (64, 8): 1.36, (128, 4): 1.015, (128, 8): 1.40}
        host = ScriptedHost(clock, profile_speed=lambda b, p, n: table[(b, n)], warmup_extra_s={128: 60.0},
                            loaders_gains={8: (-0.3, -0.3, -0.3, 0.0)})
        run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=100.0)
        return await _tune_from(manifest, clock, host, run,
                                Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1))

    small = await tuned(20_000)
    described = [t.describe() for t in small.trials]
    joint = next(t for t in small.trials if "+" in t.knob)
    assert joint.verdict.accepted and joint.value == "128/8", described
    trim = small.trials[-1]
    assert (trim.knob, trim.baseline, trim.value) == ("batch_size", "128", "64"), described
    assert trim.verdict.accepted and trim.verdict.on_cost and trim.verdict.gain is not None and trim.verdict.gain.point < 0
    assert trim.verdict.cost_gain is not None and trim.verdict.cost_gain.point > 0
    assert "at N = 20,000 units" in trim.verdict.reason and trim.describe().startswith("batch_size 128 -> 64: acc")
    assert (small.profile.batch_size, small.profile.loaders) == (64, 8), described
    large = await tuned(2_000_000)
    described = [t.describe() for t in large.trials]
    assert (large.trials[-1].value, large.trials[-1].verdict.accepted) == ("64", False), described
    assert (large.profile.batch_size, large.profile.loaders) == (128, 8), described


async def test_a_change_faster_in_steady_state_is_not_kept_when_its_warm_up_makes_n_units_dearer(
        tmp_path: Path) -> None:
    """Production runs N units once, warm-up included: bf16 at +10 % units/s saves about 57 s of 20,000 units at 32
    units/s, so a bf16 warm-up 200 s longer makes the run dearer and the change is not kept, the verdict saying
    why; the same warm-up at 2,000,000 units is a rounding error, and without it, or with one that costs only part
    of the gain, the change is kept."""
    async def tuned(extra_s: float, units: int) -> Any:
        manifest = _tuning_manifest(tmp_path)
        manifest = replace(manifest, production_units=units)
        clock = FakeClock(NOW)
        host = ScriptedHost(clock, profile_speed=lambda b, p, l: 1.1 if p == "bf16" else 1.0,
                            warmup_extra_s={"bf16": extra_s})
        run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=100.0)
        return await _tune(manifest, clock, host, run)

    dear = await tuned(200.0, 20_000)
    verdict = next(t for t in dear.trials if t.value == "bf16").verdict
    assert not verdict.accepted and verdict.dearer_at_n and not verdict.may_gain
    assert verdict.gain is not None and verdict.gain.point > 0.05          # faster in steady state ...
    assert verdict.cost_gain is not None and verdict.cost_gain.point < 0   # ... dearer at N
    assert "at N = 20,000 units" in verdict.reason
    assert dear.profile.precision == "fp32"
    for extra_s, units in ((200.0, 2_000_000), (0.0, 20_000)):
        kept = await tuned(extra_s, units)
        assert kept.profile.precision == "bf16", (extra_s, units)
    # A warm-up that eats most, not all, of the gain: still cheaper at N, though by less than the 2 % a change must
    # gain in speed; the cost only vetoes a change it finds dearer, so the change is kept.
    slim = await tuned(45.0, 20_000)
    verdict = next(t for t in slim.trials if t.value == "bf16").verdict
    assert verdict.cost_gain is not None and 0 < verdict.cost_gain.point < 0.02, verdict.cost_gain
    assert verdict.accepted and slim.profile.precision == "bf16"


async def test_a_batch_breaking_the_latency_ceiling_without_waiting_for_input_is_not_tried_again_after_the_loaders(
        tmp_path: Path) -> None:
    # 256's steps take 6 s against the SLO's 5 s at p90 and never wait for input: more loaders cannot shorten them.
    # It gives way to 128 at once; it is not put back to be tried again once the loaders are kept.
    manifest, clock = _tuning_manifest(tmp_path), FakeClock(NOW)
    manifest = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",), batch_sizes=(64, 128, 256),
                                                loaders=(1, 4)))
    host = ScriptedHost(clock, speed={128: 1.10, 256: 1.0}, step_ms={256: 6000.0}, input_bound_below=4)
    run = _leader(manifest, clock, work_left_s=100_000.0, canary_s=40.0)
    start = Profile(batch_size=64, precision="fp32", loaders=1, gpu_count=1)
    outcome = await tune(_context(manifest, clock, host), run, host, start=start,
                         bottleneck=Bottleneck.COMPUTE_BOUND, time_left_s=lambda: run.work_time_left_s(clock.now()))
    tried = [(t.knob, t.value, t.verdict.accepted) for t in outcome.trials]
    assert tried[0] == ("batch_size", "256", False) and outcome.trials[0].verdict.breaks_slo
    assert tried[1][:2] == ("batch_size", "128"), tried
    assert [t for t in tried if t[:2] == ("batch_size", "256")] == [("batch_size", "256", False)], tried
