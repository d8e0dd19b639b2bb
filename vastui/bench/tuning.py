"""Tuning one variable at a time: which knob first (from the bottleneck), the A/B order, and whether a change wins.

A change is judged on one instance with interleaved, paired A/B blocks (host luck and drift cancel out), and accepted
only when the paired gain's interval excludes zero, the gain exceeds the minimum, and the output still passes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from vastui.bench.attribution import Bottleneck
from vastui.bench.cost import CostInputs, cost_interval
from vastui.bench.manifest import TUNING_MIN_GAIN, TUNING_MIN_PAIRS, Tuning
from vastui.bench.stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, Interval, paired_gain_ci


class Knob(StrEnum):
    LOADERS = "loaders"
    BATCH_SIZE = "batch_size"
    PRECISION = "precision"
    GPU_COUNT = "gpu_count"


# docs/method.md (Tune): the input path first when the step waits for input; otherwise precision, then batch, then
# multi-GPU (precision before batch: its trials are the cheaper and its gains the larger, and a deadline rarely
# leaves room for every trial), with the input path last.
_INPUT_FIRST = (Knob.LOADERS, Knob.PRECISION, Knob.BATCH_SIZE, Knob.GPU_COUNT)
_COMPUTE_FIRST = (Knob.PRECISION, Knob.BATCH_SIZE, Knob.GPU_COUNT, Knob.LOADERS)
_ORDER = {
    Bottleneck.INPUT_BOUND: _INPUT_FIRST,
    Bottleneck.COMPUTE_BOUND: _COMPUTE_FIRST,
    Bottleneck.MEMORY_BOUND: (Knob.PRECISION, Knob.BATCH_SIZE, Knob.LOADERS, Knob.GPU_COUNT),
    Bottleneck.MULTI_GPU_SCALING_LOSS: (Knob.GPU_COUNT, Knob.BATCH_SIZE, Knob.LOADERS, Knob.PRECISION),
    Bottleneck.STARTUP_DOMINATED: _COMPUTE_FIRST,
    Bottleneck.UNDETERMINED: _COMPUTE_FIRST,
    # A throttling host gives readings about the host, not the knob: tune elsewhere.
    Bottleneck.THROTTLED: (),
}


@dataclass(frozen=True, slots=True)
class Profile:
    """The tunable settings of a run; None means "as the workload sets it"."""

    batch_size: int | None = None
    precision: str | None = None
    loaders: int | None = None
    gpu_count: int | None = None

    def value(self, knob: Knob) -> int | str | None:
        return {Knob.LOADERS: self.loaders, Knob.BATCH_SIZE: self.batch_size, Knob.PRECISION: self.precision,
                Knob.GPU_COUNT: self.gpu_count}[knob]

    def with_value(self, knob: Knob, value: int | str) -> Profile:
        if knob is Knob.PRECISION:
            if not isinstance(value, str):
                raise TypeError("precision is a string")
            return replace(self, precision=value)
        if not isinstance(value, int):
            raise TypeError(f"{knob} is an integer")
        if knob is Knob.LOADERS:
            return replace(self, loaders=value)
        if knob is Knob.BATCH_SIZE:
            return replace(self, batch_size=value)
        return replace(self, gpu_count=value)

    def describe(self) -> str:
        return (f"batch {self.batch_size or 'default'}, {self.precision or 'default precision'}, "
                f"{self.loaders or 'default'} loaders, {self.gpu_count or 1} GPU(s)")

    def to_json(self) -> str:
        """As runs record it (``runs.variant_json``): every field, sorted keys."""
        return json.dumps({"batch_size": self.batch_size, "precision": self.precision, "loaders": self.loaders,
                           "gpu_count": self.gpu_count}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Profile | None:
        """A profile as ``to_json`` wrote it (a stored run's ``variant_json``), or None when the text is not one."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or set(data) != {"batch_size", "precision", "loaders", "gpu_count"}:
            return None
        ints = (data["batch_size"], data["loaders"], data["gpu_count"])
        if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in ints):
            return None
        if data["precision"] is not None and not isinstance(data["precision"], str):
            return None
        return cls(batch_size=data["batch_size"], precision=data["precision"], loaders=data["loaders"],
                   gpu_count=data["gpu_count"])

    @classmethod
    def first(cls, tuning: Tuning, *, gpu_count: int | None) -> Profile:
        """The manifest's first profile (each tuning list's first value) on ``gpu_count`` GPUs: what the race
        starts at and every canary runs."""
        return cls(batch_size=tuning.batch_sizes[0] if tuning.batch_sizes else None,
                   precision=tuning.precisions[0] if tuning.precisions else None,
                   loaders=tuning.loaders[0] if tuning.loaders else None, gpu_count=gpu_count)


@dataclass(frozen=True, slots=True)
class TuningStep:
    """Try each of ``values`` for ``knob`` against the current best, in order; stop the knob below min_gain."""

    knob: Knob
    values: tuple[int | str, ...]


def tuning_order(bottleneck: Bottleneck) -> tuple[Knob, ...]:
    """The knobs in the order the bottleneck says to try them."""
    return _ORDER[bottleneck]


def plan_tuning(tuning: Tuning, *, bottleneck: Bottleneck, baseline: Profile,
                max_gpus: int | None = None) -> tuple[TuningStep, ...]:
    """One step per allowed knob, ordered from the bottleneck; a knob with nothing new to try is left out, and so
    is a GPU count above the ``max_gpus`` the instance has."""
    allowed: dict[Knob, tuple[int | str, ...]] = {
        Knob.LOADERS: tuning.loaders,
        Knob.BATCH_SIZE: tuning.batch_sizes,
        Knob.PRECISION: tuning.precisions,
        Knob.GPU_COUNT: tuple(n for n in tuning.gpu_counts if max_gpus is None or n <= max_gpus),
    }
    steps = []
    for knob in tuning_order(bottleneck):
        values = tuple(v for v in allowed[knob] if v != baseline.value(knob))
        if values:
            steps.append(TuningStep(knob, values))
    return tuple(steps)


class Arm(StrEnum):
    BASELINE = "A"
    VARIANT = "B"


def plan_ab_pairs(*, pairs: int = TUNING_MIN_PAIRS) -> tuple[tuple[Arm, Arm], ...]:
    """Interleaved pairs in ABBA order (AB, BA, AB, ...): a linear drift in the host hits both arms equally."""
    if pairs < 1:
        raise ValueError("pairs must be >= 1")
    ab = (Arm.BASELINE, Arm.VARIANT)
    return tuple(ab if index % 2 == 0 else (ab[1], ab[0]) for index in range(pairs))


@dataclass(frozen=True, slots=True)
class AbVerdict:
    accepted: bool
    gain: Interval | None
    pairs: int
    reason: str
    output_failed: bool = False   # the variant broke the output (or did not fit in memory)
    breaks_slo: bool = False      # the variant's steps break the latency SLO, whatever its speed
    variant_data_wait: float | None = None   # the variant's steps' share of time waiting for input (median run)
    variant_data_wait_high: float | None = None   # ... the highest of each machine's median, when pooled
    baseline_latencies_ms: tuple[float, ...] = ()   # every step of the baseline's runs
    variant_latencies_ms: tuple[float, ...] = ()    # ... and of the variant's
    # The same pairs judged by C(N), each run's warm-up included (campaign/tuning.py): a change faster in steady
    # state whose longer warm-up makes production dearer at the manifest's N is not kept.
    cost_gain: Interval | None = None
    dearer_at_n: bool = False
    # judged by the cost of N units alone, whatever its speed (a trim of a larger batch: campaign/tuning.py)
    on_cost: bool = False

    @property
    def may_gain(self) -> bool:
        """Not accepted, yet judged, within the SLO and not shown worse: the gain's interval reaches above zero."""
        return (not self.accepted and not self.breaks_slo and not self.dearer_at_n and self.gain is not None
                and self.gain.high > 0)


def judge_ab(*, baseline_units_per_s: Sequence[float], variant_units_per_s: Sequence[float], correctness_ok: bool,
             min_gain: float = TUNING_MIN_GAIN, min_pairs: int = TUNING_MIN_PAIRS,
             confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
             seed: int | str = 0) -> AbVerdict:
    """Accept a change when correctness holds, there are >= min_pairs pairs, the median paired gain's interval
    excludes zero and the median gain exceeds ``min_gain``. Pair i is (baseline[i], variant[i])."""
    pairs = min(len(baseline_units_per_s), len(variant_units_per_s))
    if not correctness_ok:
        return AbVerdict(False, None, pairs, "rejected: the output no longer passes the correctness check",
                         output_failed=True)
    if len(baseline_units_per_s) != len(variant_units_per_s):
        raise ValueError("every pair needs a baseline and a variant block")
    if pairs < min_pairs:
        return AbVerdict(False, None, pairs, f"not enough evidence: {pairs} pairs of {min_pairs}")
    gain = paired_gain_ci(baseline_units_per_s, variant_units_per_s, confidence=confidence, resamples=resamples,
                          seed=seed)
    if not gain.excludes_zero or gain.low < 0:
        return AbVerdict(False, gain, pairs, f"no clear gain: interval [{gain.low:+.1%}, {gain.high:+.1%}]")
    if gain.point <= min_gain:
        return AbVerdict(False, gain, pairs, f"gain {gain.point:+.1%} is not above {min_gain:.0%}")
    return AbVerdict(True, gain, pairs, f"gain {gain.point:+.1%} [{gain.low:+.1%}, {gain.high:+.1%}]")


def tuned_cost_estimate(inputs: CostInputs, *, throughput: Interval, gains: Sequence[Interval],
                        units: float) -> Interval:
    """C(N) of the tuned profile, estimated rather than raced: the race's throughput scaled by every accepted A/B
    gain (relative, 0.25 = +25 %), bound by bound — the low end compounds every low bound, so the interval errs
    wide."""
    return cost_interval(inputs, units=units, throughput=tuned_throughput(throughput, gains))


def tuned_throughput(throughput: Interval, gains: Sequence[Interval]) -> Interval:
    """The race's throughput scaled by every accepted A/B gain, bound by bound (low bounds compound: errs wide)."""
    point = low = high = 1.0
    for gain in gains:
        point, low, high = point * (1.0 + gain.point), low * (1.0 + gain.low), high * (1.0 + gain.high)
    return Interval(point=throughput.point * point, low=throughput.low * low, high=throughput.high * high,
                    confidence=throughput.confidence, n=throughput.n)
