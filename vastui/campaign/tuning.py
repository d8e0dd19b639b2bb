"""Tune the leader, one variable at a time, in paired interleaved A/B runs on the same instance.

The knob order comes from the leader's bottleneck (input path first when data-wait dominates); each A/B pair is two
short runs (ABBA order, so a drifting host hits both arms alike); a change is kept only when its paired gain's
interval excludes zero, exceeds the minimum gain and the output still passes the correctness check.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from vastui.bench.attribution import DATA_WAIT_SHARE_MAX, Bottleneck
from vastui.bench.stats import latency_plausible
from vastui.bench.tuning import AbVerdict, Arm, Knob, Profile, TuningStep, judge_ab, plan_ab_pairs, plan_tuning
from vastui.campaign.candidate import CandidateContext, CandidateRun, Variant, note_record, workload_argv
from vastui.campaign.measure import steps_in
from vastui.campaign.plan import CANARY_STEPS, TUNING_TIMED_STEPS
from vastui.errors import RemoteError
from vastui.campaign.live import band
from vastui.events import Notice
from vastui.events_live import TuningFinished, TuningTrialJudged, TuningTrialStarted
from vastui.remote.protocol import Progress, Result

# A tuning run skips the warm-up the race measured on this instance (at least this many steps), then times
# TUNING_TIMED_STEPS steps. A short run's error is mostly the process's own luck (clocks, placement), which longer
# runs do not shrink; the pairs do.
MIN_SKIP_STEPS = 10
# A compute knob that moves nothing says the step waits elsewhere (a GPU as busy as its input path is fast reads
# as compute-bound): the input path is tried next.
COMPUTE_KNOBS = frozenset({Knob.BATCH_SIZE, Knob.PRECISION})
# The next trial is estimated from the mean of the short runs so far, with this headroom (the arms differ).
TRIAL_ESTIMATE_HEADROOM = 1.25


@dataclass(frozen=True, slots=True)
class TuningTrial:
    knob: str
    baseline: str
    value: str
    verdict: AbVerdict

    def describe(self) -> str:
        state = "accepted" if self.verdict.accepted else "rejected"
        return f"{self.knob} {self.baseline} -> {self.value}: {state} ({self.verdict.reason})"


@dataclass(frozen=True, slots=True)
class TuningOutcome:
    trials: tuple[TuningTrial, ...]
    profile: Variant
    stopped_early: str | None = None


def value_order(knob: Knob, values: Sequence[int | str], current: int | str | None) -> list[int | str]:
    """The order a knob's values are tried in. A batch size goes to the largest allowed first, then down: the gain
    per step shrinks as the batch grows (64 -> 128 may gain 6 %, 128 -> 256 3 %, within the noise five pairs can
    see), so the far value is both the likely best and the easiest to tell apart; one that does not help (or does
    not fit in memory, which fails its output) gives way to the next smaller. Then the values below the current
    one, nearest first. Other knobs keep the manifest's order."""
    if knob is not Knob.BATCH_SIZE or not isinstance(current, int):
        return list(values)
    numbers = [v for v in values if isinstance(v, int)]
    return [*sorted((v for v in numbers if v > current), reverse=True),
            *sorted((v for v in numbers if v < current), reverse=True)]


def _above(value: int | str, current: int | str | None) -> bool:
    return isinstance(value, int) and isinstance(current, int) and value > current


def _variant(profile: Profile, fallback: Variant) -> Variant:
    return Variant(batch_size=profile.batch_size, precision=profile.precision, loaders=profile.loaders,
                   gpu_count=profile.gpu_count or fallback.gpu_count)


def _profile(variant: Variant) -> Profile:
    return Profile(batch_size=variant.batch_size, precision=variant.precision, loaders=variant.loaders,
                   gpu_count=variant.gpu_count)


class DeadlineReached(Exception):
    """The instance's deadline came during a short run: the run was stopped, its trial is abandoned."""


@dataclass(frozen=True, slots=True)
class ShortRun:
    """What one short run says: throughput over its timed steps (None: too few came), whether its output passed,
    the workload's own time for its steps (the rest of the run's time is starting it and relaying records), the
    timed steps' latencies and the share of their time spent waiting for input."""

    units_per_s: float | None
    passed: bool
    work_s: float
    latencies_ms: tuple[float, ...] = ()
    data_wait_share: float | None = None   # of the timed steps' time, spent waiting for input


async def short_run(ctx: CandidateContext, run: CandidateRun, host: str, port: int, variant: Variant) -> ShortRun:
    """One short run of ``variant`` (``ShortRun``).

    The run skips the warm-up the race measured here (``run.warmup_steps``, at least MIN_SKIP_STEPS), then times
    TUNING_TIMED_STEPS steps. Raises DeadlineReached (after stopping the remote run) when the instance's work time
    runs out meanwhile.
    """
    skip = skip_steps(run)
    argv = workload_argv(ctx.manifest, variant=variant, steps=skip + TUNING_TIMED_STEPS, seconds=0)
    marks: list[Progress] = []
    result: Result | None = None
    async with ctx.executor.run_agent(host, port, argv) as session:
        async for record in session:
            note_record(ctx, run, record)
            if isinstance(record, Progress) and record.units > 0:
                marks.append(record)
            elif isinstance(record, Result):
                result = record
            if result is None and run.work_time_left_s(ctx.clock.now()) <= 0:
                raise DeadlineReached(f"deadline reached during a short run of {variant.describe()}")
    expected = (ctx.manifest.correctness.expected_digest or "").lower().removeprefix("sha256:")
    digest = ((result.output_digest if result else None) or "").lower().removeprefix("sha256:")
    passed = result is not None and result.exit_status == 0 and (not expected or digest == expected)
    work_s = (marks[-1].t - marks[0].t + sum(marks[0].latency_ms) / 1000.0) if marks else 0.0
    timed = _after_skip(marks, skip=skip)
    step_s = sum(ms for mark in timed for ms in mark.latency_ms) / 1000.0
    return ShortRun(timed_throughput(marks, skip=skip), passed, max(0.0, work_s), timed_latencies(marks, skip=skip),
                    data_wait_share=min(1.0, sum(m.data_wait_s for m in timed) / step_s) if step_s > 0 else None)


def _after_skip(marks: list[Progress], *, skip: int) -> list[Progress]:
    ends = itertools.accumulate(steps_in(mark) for mark in marks)
    return [mark for mark, end in zip(marks, ends, strict=True) if end - steps_in(mark) >= skip]


def timed_latencies(marks: list[Progress], *, skip: int) -> tuple[float, ...]:
    """The step latencies of the markers after the first ``skip`` steps (the warm-up's are no evidence)."""
    return tuple(ms for mark in _after_skip(marks, skip=skip) for ms in mark.latency_ms)


def skip_steps(run: CandidateRun) -> int:
    return max(MIN_SKIP_STEPS, run.warmup_steps)


def timed_throughput(marks: list[Progress], *, skip: int) -> float | None:
    """Accepted units per second after the first marker that ends at or past ``skip`` steps; None when fewer
    than half the timed steps came (a run cut short says nothing reliable)."""
    done = 0
    for index, mark in enumerate(marks):
        done += steps_in(mark)
        if done >= skip:
            timed = marks[index:]
            break
    else:
        return None
    steps = sum(steps_in(m) for m in timed[1:])
    if steps * 2 < TUNING_TIMED_STEPS or timed[-1].t <= timed[0].t:
        return None
    return sum(m.accepted for m in timed[1:]) / (timed[-1].t - timed[0].t)


@dataclass(slots=True)
class _RunTimes:
    """How long short runs took on this instance (campaign clock), per profile, and how much of it was the
    workload's own steps: the estimate for the next trial; before the first one, a prior from the canary and the
    blocks."""

    prior_s: float = 0.0
    took_s: dict[str, list[tuple[float, float]]] = field(default_factory=dict)   # (the whole run, its steps)

    def add(self, variant: Variant, seconds: float, work_s: float = 0.0) -> None:
        self.took_s.setdefault(variant.describe(), []).append((seconds, min(work_s, seconds)))

    def run_estimate_s(self, variant: Variant, *, like: Variant | None = None) -> float:
        """One run of ``variant``: its own runs' mean with headroom; else ``like``'s, its steps longer by the batch
        ratio when the batch grows (a run times a fixed number of steps, each that much more work; starting the
        run and relaying its records take what they took)."""
        own = self.took_s.get(variant.describe())
        if own:
            return statistics.fmean(t for t, _ in own) * TRIAL_ESTIMATE_HEADROOM
        if like is None:
            every = [t for times in self.took_s.values() for t, _ in times]
            return statistics.fmean(every) * TRIAL_ESTIMATE_HEADROOM if every else self.prior_s
        grows = (variant.batch_size / like.batch_size
                 if variant.batch_size is not None and like.batch_size else 1.0)
        base = self.run_estimate_s(like)
        timed = self.took_s.get(like.describe())
        work_share = (sum(w for _, w in timed) / sum(t for t, _ in timed)) if timed and sum(t for t, _ in timed) > 0 \
            else 1.0   # nothing timed yet: all of it scales (errs long)
        return base * (1.0 - work_share) + base * work_share * max(1.0, grows)

    def trial_estimate_s(self, pairs: int, base: Variant, change: Variant) -> float:
        return pairs * (self.run_estimate_s(base) + self.run_estimate_s(change, like=base))


def _run_prior_s(run: CandidateRun) -> float:
    """A tuning run's duration before one was timed: the canary (its steps and the session's overhead) plus the
    extra steps at the step time the blocks measured; the canary scaled by steps when no block says."""
    canary_s = run.canary_s or 0.0
    run_steps = skip_steps(run) + TUNING_TIMED_STEPS
    steps = sum(b.block.steps for b in run.blocks)
    if steps <= 0:
        return canary_s * max(run_steps, CANARY_STEPS) / CANARY_STEPS
    step_s = sum(b.block.duration_s for b in run.blocks) / steps
    return canary_s + max(0, run_steps - CANARY_STEPS) * step_s


async def _ab(ctx: CandidateContext, run: CandidateRun, host: str, port: int, base: Variant,
              change: Variant, times: _RunTimes, *, room_for: Callable[[int], bool] = lambda _pairs: False
              ) -> AbVerdict:
    """``min_pairs`` interleaved pairs, judged; when that leaves a promising change undecided (its point gain above
    the minimum, its interval still reaching below zero: a noisy host) and ``room_for`` says the deadline allows as
    many again, those too, judged once more over all of them. Two looks, not one per pair: each extra look would
    raise the chance of keeping a change that gains nothing."""
    tuning = ctx.manifest.tuning
    a_values: list[float] = []
    b_values: list[float] = []
    b_latencies: list[float] = []
    b_waits: list[float] = []
    correct = True
    order = plan_ab_pairs(pairs=2 * tuning.min_pairs)

    async def play(pairs: Sequence[tuple[Arm, Arm]]) -> None:
        nonlocal correct
        for pair in pairs:
            got: dict[Arm, float | None] = {}
            for arm in pair:
                started = ctx.clock.now()
                variant = base if arm is Arm.BASELINE else change
                done = await short_run(ctx, run, host, port, variant)
                times.add(variant, ctx.clock.now() - started, done.work_s)
                correct = correct and done.passed
                got[arm] = done.units_per_s
                if arm is Arm.VARIANT:
                    b_latencies.extend(done.latencies_ms)
                    b_waits.extend([] if done.data_wait_share is None else [done.data_wait_share])
                    if not done.passed:
                        break   # the change broke the output (or did not fit in memory): no pair can redeem it
            if Arm.VARIANT in got and not correct:
                return
            a, b = got.get(Arm.BASELINE), got.get(Arm.VARIANT)
            if a is None or b is None:
                correct = correct and b is not None
                continue
            a_values.append(a)
            b_values.append(b)

    def judged() -> AbVerdict:
        verdict = replace(judge_ab(baseline_units_per_s=a_values, variant_units_per_s=b_values,
                                   correctness_ok=correct, min_gain=tuning.min_gain, min_pairs=tuning.min_pairs,
                                   seed=run.cid),
                          variant_data_wait=statistics.median(b_waits) if b_waits else None)
        ceiling = ctx.manifest.slo.latency
        if ceiling is not None and not latency_plausible(b_latencies, percentile_q=ceiling.percentile,
                                                         max_ms=ceiling.max_ms):
            # Perhaps more units a second, but its steps (a larger batch's, say) are too slow for the SLO: not a
            # profile production may run, alone or joined with another knob.
            over = sum(1 for ms in b_latencies if ms > ceiling.max_ms)
            return replace(verdict, accepted=False, breaks_slo=True, reason=(
                f"rejected: {over} of {len(b_latencies)} steps over the latency SLO's {ceiling.max_ms:g} ms "
                f"(p{ceiling.percentile:g}); as to speed, {verdict.reason}"))
        return verdict

    await play(order[:tuning.min_pairs])
    verdict = judged()
    if (not verdict.accepted and verdict.gain is not None and verdict.gain.point > tuning.min_gain
            and verdict.gain.low < 0 < verdict.gain.high and room_for(tuning.min_pairs)):
        await play(order[tuning.min_pairs:])
        verdict = judged()
    return verdict


async def tune(ctx: CandidateContext, run: CandidateRun, host: str, port: int, *, start: Variant,
               bottleneck: Bottleneck, time_left_s: Callable[[], float]) -> TuningOutcome:
    """Try each allowed knob from the bottleneck's order (the input path moved up when a compute knob gains nothing);
    keep what clearly helps; then the knobs that might have helped, together (they may only pay jointly); stop when
    time runs out."""
    best = start
    trials: list[TuningTrial] = []
    times = _RunTimes(prior_s=_run_prior_s(run))
    pairs = ctx.manifest.tuning.min_pairs

    def finished(reason: str | None) -> TuningOutcome:
        ctx.bus.publish(TuningFinished(at=ctx.clock.now(), campaign_id=ctx.campaign_id, candidate=run.cid,
                                       profile=best.describe(), trials=len(trials), stopped_early=reason))
        return TuningOutcome(tuple(trials), best, reason)

    def stopped(reason: str, level: str = "info") -> TuningOutcome:
        ctx.bus.publish(Notice(at=ctx.clock.now(), campaign_id=ctx.campaign_id, level=level,
                               text=f"{run.cid}: tuning stopped: {reason}"))
        return finished(reason)

    unfit: str | None = None    # the first trial the deadline had no room for (a cheaper knob may still fit)

    async def trial(knob: str, was: str, value: str, change: Variant) -> AbVerdict | TuningOutcome | None:
        """One A/B trial of ``change`` against ``best``: its verdict, the outcome when tuning must stop, or None
        when the deadline has no room for it (noted; a cheaper trial may still fit)."""
        nonlocal unfit
        left, needed = time_left_s(), times.trial_estimate_s(pairs, best, change)
        if left <= 0 or left < needed:
            unfit = unfit or (f"the instance's deadline leaves {max(left, 0.0) / 60:.1f} min; "
                              f"an A/B trial of {knob} -> {value} takes about {needed / 60:.1f} min")
            return None
        ctx.bus.publish(TuningTrialStarted(at=ctx.clock.now(), campaign_id=ctx.campaign_id, candidate=run.cid,
                                           knob=knob, baseline=was, value=value))
        try:
            verdict = await _ab(ctx, run, host, port, best, change, times, room_for=lambda more: time_left_s() >=
                                times.trial_estimate_s(more, best, change) + reserve_s(change))
        except DeadlineReached:
            return stopped(f"the instance reached its deadline during the trial {knob} -> {value} "
                           f"(abandoned, not judged)")
        except RemoteError as exc:
            return stopped(str(exc), level="warning")
        trials.append(TuningTrial(knob, was, value, verdict))
        ctx.bus.publish(TuningTrialJudged(at=ctx.clock.now(), campaign_id=ctx.campaign_id, candidate=run.cid,
                                          knob=knob, baseline=was, value=value, accepted=verdict.accepted,
                                          gain=band(verdict.gain), pairs=verdict.pairs, reason=verdict.reason))
        ctx.bus.publish(Notice(at=ctx.clock.now(), campaign_id=ctx.campaign_id, level="info",
                               text=f"{run.cid}: tuning {trials[-1].describe()}"))
        return verdict

    def reserve_s(change: Variant) -> float:
        """Time the trials still planned need (one per knob left, and the joint one): a trial's extra pairs
        come only out of what is left over."""
        return (len(steps) + (not joint_tried)) * times.trial_estimate_s(pairs, best, change)

    steps = list(plan_tuning(ctx.manifest.tuning, bottleneck=bottleneck, baseline=_profile(start),
                             max_gpus=run.candidate.offer.num_gpus))
    joint_tried = len(steps) < 2    # one knob alone has nothing to be joined with
    waited: list[TuningStep] = []   # compute knobs that gained nothing, perhaps for want of input: tried again after
    retried: set[Knob] = set()      # an accepted input-path change (once each)
    hopeful: dict[Knob, int | str] = {}   # unproven gains: knob -> the value that may have gained
    too_big: list[int] = []         # batch sizes whose output failed (out of memory?): again once precision changes
    while True:
        if not steps:
            joint = _joint_change(best, hopeful) if not joint_tried else None
            if joint is None:
                break
            joint_tried = True
            knobs = sorted(joint, key=str)
            change = _variant(_with_values(_profile(best), joint), best)
            got = await trial("+".join(str(k) for k in knobs), "/".join(str(_profile(best).value(k)) for k in knobs),
                              "/".join(str(joint[k]) for k in knobs), change)
            if isinstance(got, TuningOutcome):
                return got
            if got is not None and got.accepted:
                best = change
                for knob in joint:
                    hopeful.pop(knob, None)
                if Knob.PRECISION in joint and too_big:
                    steps.append(TuningStep(Knob.BATCH_SIZE, tuple(too_big)))
                    too_big = []
            continue
        step = steps.pop(0)
        flat = False
        was = _profile(best).value(step.knob)
        for value in value_order(step.knob, step.values, was):
            if value == _profile(best).value(step.knob):
                continue
            change = _variant(_profile(best).with_value(step.knob, value), best)
            got = await trial(str(step.knob), str(_profile(best).value(step.knob)), str(value), change)
            if got is None:
                continue   # a nearer value of the same knob may be cheaper to try
            if isinstance(got, TuningOutcome):
                return got
            verdict = got
            if verdict.accepted:
                best = change
                hopeful.pop(step.knob, None)
                if step.knob is Knob.LOADERS and waited:
                    steps[:0] = waited   # with the input path widened, a compute knob may now pay: again, first
                    retried.update(w.knob for w in waited)
                    waited = []
                if step.knob is Knob.PRECISION and too_big:
                    steps.insert(0, TuningStep(Knob.BATCH_SIZE, tuple(too_big)))   # less memory a step: again
                    too_big = []
                if step.knob is Knob.BATCH_SIZE:
                    break   # the largest batch that clearly helps (larger ones were tried first)
                continue
            if verdict.output_failed and step.knob is Knob.BATCH_SIZE and isinstance(value, int):
                too_big.append(value)
            if verdict.may_gain:
                hopeful.setdefault(step.knob, value)   # the first: a batch's largest (tried first) that may gain
            wider = _wider_input(ctx.manifest.tuning.loaders, best, verdict) if step.knob in COMPUTE_KNOBS else None
            if wider is not None and not verdict.output_failed and not verdict.breaks_slo:
                # Faster steps that now wait for input: the change pays only with a wider input path, so both
                # are tried together (neither alone may move anything).
                hopeful.setdefault(step.knob, value)
                hopeful.setdefault(Knob.LOADERS, wider)
            flat = flat or (verdict.gain is not None and verdict.gain.point < ctx.manifest.tuning.min_gain)
            growing = step.knob is Knob.BATCH_SIZE and _above(value, was)
            if growing and flat:
                break   # the largest batch gains nothing: a smaller step gains less still
            if (step.knob is not Knob.PRECISION and not growing and verdict.gain is not None
                    and verdict.gain.point < 0):
                break  # worse in this direction: the next value of the same knob goes further that way
        if flat and step.knob in COMPUTE_KNOBS:
            steps.sort(key=lambda s: s.knob is not Knob.LOADERS)   # stable: the input path next, the rest after
            if step.knob not in retried and any(s.knob is Knob.LOADERS for s in steps):
                waited.append(step)
    return stopped(unfit) if unfit is not None else finished(None)


def _joint_change(best: Variant, hopeful: dict[Knob, int | str]) -> dict[Knob, int | str] | None:
    """The knobs that might have gained (judged, not shown worse) set together, each at the value that might have,
    when there are two or more still away from ``best``: knobs can pay only jointly (more loaders help only once bf16
    makes the step wait for input; a larger batch only once the input path keeps up). None otherwise."""
    current = _profile(best)
    joint = {knob: value for knob, value in hopeful.items() if current.value(knob) != value}
    return joint if len(joint) >= 2 else None


def _wider_input(loaders: Sequence[int], best: Variant, verdict: AbVerdict) -> int | None:
    """The most loaders allowed, when a compute change's steps wait for input (more than the attribution's
    threshold) and the current profile has fewer; None otherwise."""
    wait = verdict.variant_data_wait
    most = max(loaders, default=None)
    if wait is None or wait <= DATA_WAIT_SHARE_MAX or most is None or best.loaders is None or most <= best.loaders:
        return None
    return most


def _with_values(profile: Profile, values: dict[Knob, int | str]) -> Profile:
    for knob, value in values.items():
        profile = profile.with_value(knob, value)
    return profile
