"""Short tuning runs on the leader's instance: one run of a profile, timed after its warm-up, and how long the
next ones will take (for fitting trials inside the instance's deadline).
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, field

from vastui.bench.tuning import Profile
from vastui.campaign.candidate import CandidateContext, CandidateRun, note_record, workload_argv
from vastui.campaign.measure import steps_in
from vastui.campaign.plan import CANARY_STEPS, TUNING_TIMED_STEPS
from vastui.campaign.ports import HostConnection
from vastui.remote.protocol import Progress, Result

# A tuning run skips the warm-up the race measured on this instance (at least this many steps), then times
# TUNING_TIMED_STEPS steps. A short run's error is mostly the process's own luck (clocks, placement), which longer
# runs do not shrink; the pairs do.
MIN_SKIP_STEPS = 10

# The next trial is estimated from the mean of the short runs so far, with this headroom (the arms differ).
TRIAL_ESTIMATE_HEADROOM = 1.25


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
    ran_to_end: bool = True   # the workload exited cleanly (a wrong output did; running out of memory did not)
    warmup_lost_s: float | None = None   # its skipped steps' time beyond the timed pace: what warm-up costs


async def short_run(ctx: CandidateContext, run: CandidateRun, conn: HostConnection, variant: Profile) -> ShortRun:
    """One short run of ``variant`` (``ShortRun``).

    The run skips the warm-up the race measured here (``run.warmup_steps``, at least MIN_SKIP_STEPS), then times
    TUNING_TIMED_STEPS steps. Raises DeadlineReached (after stopping the remote run) when the instance's work time
    runs out meanwhile.
    """
    skip = skip_steps(run)
    argv = workload_argv(ctx.manifest, variant=variant, steps=skip + TUNING_TIMED_STEPS, seconds=0)
    marks: list[Progress] = []
    result: Result | None = None
    async with conn.run_agent(argv) as session:
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
                    data_wait_share=min(1.0, sum(m.data_wait_s for m in timed) / step_s) if step_s > 0 else None,
                    ran_to_end=result is not None and result.exit_status == 0,
                    warmup_lost_s=warmup_lost_s(marks, skip=skip))


def _after_skip(marks: list[Progress], *, skip: int) -> list[Progress]:
    ends = itertools.accumulate(steps_in(mark) for mark in marks)
    return [mark for mark, end in zip(marks, ends, strict=True) if end - steps_in(mark) >= skip]


def timed_latencies(marks: list[Progress], *, skip: int) -> tuple[float, ...]:
    """The step latencies of the markers after the first ``skip`` steps (the warm-up's are no evidence)."""
    return tuple(ms for mark in _after_skip(marks, skip=skip) for ms in mark.latency_ms)


def skip_steps(run: CandidateRun) -> int:
    return max(MIN_SKIP_STEPS, run.warmup_steps)


def warmup_lost_s(marks: list[Progress], *, skip: int) -> float | None:
    """The time the steps up to the first marker at or past ``skip`` took beyond the pace of the timed steps after
    it: what this profile's warm-up adds to a production run (the race's ``lost_s``, per run). None when the run
    timed too little to say."""
    first = _first_past(marks, skip=skip)
    if first is None:
        return None
    timed = marks[first:]
    steps = sum(steps_in(m) for m in timed[1:])
    if steps <= 0 or timed[-1].t <= timed[0].t:
        return None
    pace_s = (timed[-1].t - timed[0].t) / steps
    warm_s = timed[0].t - marks[0].t + sum(marks[0].latency_ms) / 1000.0
    return max(0.0, warm_s - sum(steps_in(m) for m in marks[:first + 1]) * pace_s)


def _first_past(marks: list[Progress], *, skip: int) -> int | None:
    """The index of the first marker that ends at or past ``skip`` steps (None: none does)."""
    ends = itertools.accumulate(steps_in(mark) for mark in marks)
    return next((index for index, end in enumerate(ends) if end >= skip), None)


def timed_throughput(marks: list[Progress], *, skip: int) -> float | None:
    """Accepted units per second after the first marker that ends at or past ``skip`` steps; None when fewer
    than half the timed steps came (a run cut short says nothing reliable)."""
    first = _first_past(marks, skip=skip)
    if first is None:
        return None
    timed = marks[first:]
    steps = sum(steps_in(m) for m in timed[1:])
    if steps * 2 < TUNING_TIMED_STEPS or timed[-1].t <= timed[0].t:
        return None
    return sum(m.accepted for m in timed[1:]) / (timed[-1].t - timed[0].t)


@dataclass(slots=True)
class RunTimes:
    """How long short runs took on this instance (campaign clock), per profile, and how much of it was the
    workload's own steps: the estimate for the next trial; before the first one, a prior from the canary and the
    blocks (``run_prior``), with the share of it that is steps."""

    prior_s: float = 0.0
    prior_work_s: float = 0.0   # of prior_s, the workload's steps (the rest: starting the run, relaying records)
    took_s: dict[str, list[tuple[float, float]]] = field(default_factory=dict)   # (the whole run, its steps)

    def add(self, variant: Profile, seconds: float, work_s: float = 0.0) -> None:
        self.took_s.setdefault(variant.describe(), []).append((seconds, min(work_s, seconds)))

    def run_estimate_s(self, variant: Profile, *, like: Profile | None = None) -> float:
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
        base, share = self.run_estimate_s(like), self._work_share(like)
        return base * (1.0 - share) + base * share * max(1.0, grows)

    def _work_share(self, like: Profile) -> float:
        """The share of a run of ``like`` that is its steps: its own runs', else every run's here, else the
        prior's; all of it when nothing says (errs long)."""
        timed = self.took_s.get(like.describe()) or [pair for times in self.took_s.values() for pair in times]
        whole = sum(t for t, _ in timed)
        if whole > 0:
            return sum(w for _, w in timed) / whole
        return self.prior_work_s / self.prior_s if self.prior_s > 0 and self.prior_work_s > 0 else 1.0

    def trial_estimate_s(self, pairs: int, base: Profile, change: Profile) -> float:
        return pairs * (self.run_estimate_s(base) + self.run_estimate_s(change, like=base))


def run_times(run: CandidateRun) -> RunTimes:
    """The short runs timed on ``run``'s instance so far (every trial it played a pair of, screening's or its own
    tuning's), started from ``run_prior`` at the first trial."""
    if run.short_run_times is None:
        run.short_run_times = run_prior(run)
    times: RunTimes = run.short_run_times   # (typed Any there: candidate.py may not import this module)
    return times


def run_prior(run: CandidateRun) -> RunTimes:
    """A tuning run's duration before one was timed, and the part of it that is steps: what the canary took
    besides its own steps (starting the run, relaying its records), plus a tuning run's steps at the step time
    the blocks measured; the canary scaled by steps when no block says (all of it steps: errs long)."""
    canary_s = run.canary_s or 0.0
    run_steps = skip_steps(run) + TUNING_TIMED_STEPS
    steps = sum(b.block.steps for b in run.blocks)
    if steps <= 0:
        return RunTimes(prior_s=canary_s * max(run_steps, CANARY_STEPS) / CANARY_STEPS)
    step_s = sum(b.block.duration_s for b in run.blocks) / steps
    work_s = run_steps * step_s
    # The canary's steps at the blocks' pace; the canary's first steps warm up, slower, so what is left over
    # errs long.
    overhead_s = max(0.0, canary_s - CANARY_STEPS * step_s)
    return RunTimes(prior_s=max(canary_s, overhead_s + work_s), prior_work_s=work_s)
