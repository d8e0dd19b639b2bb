"""Turn the agent's records into warm-up and measurement blocks, on the agent's own clock.

Step times come from the agent's timestamps (``t`` of consecutive progress records), never from the console's
clock: against a simulator whose clock runs 60 times faster, or against Vast.ai, the same code is right.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from vastui.bench.manifest import MeasureRule, WarmupRule
from vastui.bench.stats import Block, WarmupResult, coefficient_of_variation
from vastui.remote.protocol import AgentError, GpuSample, Phase, Progress, Result

Record = GpuSample | Progress | Phase | Result | AgentError
# Warm-up's window is its last ``window`` steps, seen through at least this many markers (BlockMeter._window).
WINDOW_MIN_MARKERS = 3


def steps_in(record: Progress) -> int:
    """Workload steps a progress marker covers: one latency sample per step when it reports them, else one."""
    return max(1, len(record.latency_ms))


@dataclass(frozen=True, slots=True)
class MeasuredBlock:
    """A block with the telemetry that explains it."""

    block: Block
    start_t: float
    end_t: float
    data_wait_share: float
    gpu_util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    pcie_rx_gbps: float | None
    throttled_share: float | None

    @property
    def throughput_units_per_s(self) -> float:
        return self.block.throughput_units_per_s


@dataclass(slots=True)
class _Open:
    start_t: float
    units: float = 0.0
    steps: int = 0
    data_wait_s: float = 0.0
    step_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)


class BlockMeter:
    """Feed it records in order; it reports when warm-up ends and returns each block as it completes."""

    def __init__(self, *, warmup: WarmupRule, measure: MeasureRule, run: int = 0) -> None:
        self._run = run            # the independent run (agent process) these records come from
        self._warmup_rule = warmup
        self._measure = measure
        self._last_t: float | None = None
        self._warmup_steps: list[float] = []        # per timed warm-up marker: its step time
        self._warmup_marker_steps: list[int] = []   # ... and how many steps it covered
        self._warmup_real_steps = 0
        self._warmup_elapsed_s = 0.0
        self.warmup: WarmupResult | None = None
        self.first_progress_t: float | None = None
        self._open: _Open | None = None
        self._gpu: list[GpuSample] = []
        self.blocks: list[MeasuredBlock] = []
        self.units_total = 0
        self.accepted_total = 0

    def add(self, record: Record) -> MeasuredBlock | None:
        """Take one record; return a block if this record completed one."""
        if isinstance(record, GpuSample):
            self._gpu.append(record)
            return None
        if isinstance(record, Phase) and record.name != "ready" and self._last_t is None:
            self._last_t = record.t   # the workload's first word: its first marker's steps are timed from here
            return None
        if not isinstance(record, Progress) or record.units <= 0:
            return None
        self.units_total += record.units
        self.accepted_total += record.accepted
        previous, self._last_t = self._last_t, record.t
        if self.first_progress_t is None:
            self.first_progress_t = record.t
        if previous is None:
            return None  # the first marker has no step (nor a phase marker) before it to time
        step_s = max(record.t - previous, 1e-9)
        if self.warmup is None:
            self._warm(step_s, record)
            return None
        return self._measure_step(step_s, record, previous)

    def warmup_lost_s(self) -> float | None:
        """What this run's warm-up cost production beyond its steps' work: its time over its steps at the pace its
        blocks measured (the median block's step time) once it has blocks, else at the pace warm-up settled to
        (``WarmupResult.lost_s``); None before warm-up ends. A warm-up the cap ends at its first marker (a big
        batch on a slow GPU, ten steps a marker) has no settled pace of its own: only its blocks can price it."""
        warmup = self.warmup
        if warmup is None:
            return None
        paces = [b.block.duration_s / b.block.steps for b in self.blocks if b.block.steps > 0]
        if not paces:
            return warmup.lost_s
        return max(0.0, warmup.warmup_s - warmup.steps * statistics.median(paces))

    def _warm(self, step_s: float, record: Progress) -> None:
        """Warm-up ends at the first marker (never an earlier one) where, counting real steps (a marker may cover
        several: one latency sample each), at least ``min_steps`` steps and ``min_s`` seconds have passed and the
        CV of the last ``window`` steps' times (``_window``: marker time / its steps) is within ``cv_max``; or at
        ``cap_s``."""
        rule = self._warmup_rule
        steps = steps_in(record)
        self._warmup_steps.append(step_s / steps)
        self._warmup_marker_steps.append(steps)
        self._warmup_real_steps += steps
        self._warmup_elapsed_s += step_s
        window = self._window()
        cv = coefficient_of_variation(window) if window is not None else None
        steady = (self._warmup_real_steps >= rule.min_steps and self._warmup_elapsed_s >= rule.min_s
                  and cv is not None and cv <= rule.cv_max)
        capped = not steady and self._warmup_elapsed_s >= rule.cap_s
        if steady or capped:
            # The units done while warming up count in production too: warm-up costs only its extra time over
            # those steps at the pace the last window settled to (a median over three markers at least: a capped
            # window may still hold a slow first marker, whose weight in a mean would price warm-up at nothing).
            # The first marker holds the slow start itself, so it never sets the pace while a later one can: a
            # warm-up the cap ends after two long markers (a big batch, ten steps a marker) took the median of the
            # slow start and the settled pace, their mean, and priced every such warm-up at exactly 0 s.
            later = self._warmup_steps[1:] or self._warmup_steps
            pace_s = statistics.median(later[-max(3, len(window or ())):])
            lost_s = max(0.0, self._warmup_elapsed_s - self._warmup_real_steps * pace_s)
            self.warmup = WarmupResult(is_steady=steady, is_capped=capped, steps=self._warmup_real_steps,
                                       warmup_s=self._warmup_elapsed_s, cv=cv, lost_s=lost_s,
                                       settled_steps=self._settled_steps(pace_s))
            self._open = _Open(start_t=record.t)
            self._gpu = []   # warm-up's samples describe no block

    def _window(self) -> list[float] | None:
        """The step times of the last ``window`` steps: the fewest last markers that cover that many steps, and at
        least WINDOW_MIN_MARKERS of them (two values agree by chance too easily: a ramp in steps of two markers each
        would read as steady); None until the markers so far are enough. A marker of k steps gives one step time
        (its mean): with one marker a step this is the last ``window`` markers; with markers of 10 steps and a
        window of 10, the last three — not the last ten, which hold 100 steps and kept one slow first marker in
        view long after the pace had settled (every such warm-up ran to its cap, and each run's GPU time was
        billed for it)."""
        need = self._warmup_rule.window
        least = min(WINDOW_MIN_MARKERS, need)
        covered = 0
        for count, steps in enumerate(reversed(self._warmup_marker_steps), start=1):
            covered += steps
            if covered >= need and count >= least:
                return self._warmup_steps[-count:]
        return None

    def _settled_steps(self, pace_s: float) -> int:
        """Steps before the first marker from which every warm-up step time stays within cv_max of ``pace_s``, the
        pace the last window settled to; all of them when even the last marker is off that pace."""
        band = self._warmup_rule.cv_max * pace_s
        settled = len(self._warmup_steps)
        while settled > 0 and abs(self._warmup_steps[settled - 1] - pace_s) <= band:
            settled -= 1
        return sum(self._warmup_marker_steps[:settled])

    def _measure_step(self, step_s: float, record: Progress, previous: float) -> MeasuredBlock | None:
        current = self._open or _Open(start_t=previous)
        self._open = current
        current.units += record.accepted
        current.steps += steps_in(record)
        current.step_s += step_s
        current.data_wait_s += record.data_wait_s
        current.latencies_ms.extend(record.latency_ms)
        if current.step_s >= self._measure.block_s and current.steps >= self._measure.block_min_steps:
            block = self._close(current, end_t=record.t)
            self._open = _Open(start_t=record.t)
            self.blocks.append(block)
            return block
        return None

    def _close(self, current: _Open, *, end_t: float) -> MeasuredBlock:
        # The GPU samples that arrived while the block was open (by arrival, not by time: a workload stamps its
        # markers with its own clock, which may trail the agent's by the moments it was starved of CPU).
        window, self._gpu = self._gpu, []

        def mean_of(values: list[float | None]) -> float | None:
            present = [v for v in values if v is not None]
            return statistics.fmean(present) if present else None

        rx = mean_of([g.pcie_rx_kib_s for g in window])
        throttled = [g.is_throttled for g in window if g.throttle_reasons is not None]
        return MeasuredBlock(
            block=Block(units=current.units, duration_s=current.step_s, steps=current.steps, run=self._run,
                        latencies_ms=tuple(current.latencies_ms)),
            start_t=current.start_t,
            end_t=end_t,
            data_wait_share=min(1.0, current.data_wait_s / current.step_s) if current.step_s > 0 else 0.0,
            gpu_util_pct=mean_of([g.util_pct for g in window]),
            mem_used_mib=max((g.mem_used_mib for g in window if g.mem_used_mib is not None), default=None),
            mem_total_mib=max((g.mem_total_mib for g in window if g.mem_total_mib is not None), default=None),
            pcie_rx_gbps=rx * 1024 / 1e9 if rx is not None else None,
            throttled_share=(sum(throttled) / len(throttled)) if throttled else None,
        )
