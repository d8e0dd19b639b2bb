"""Statistics for cloud benchmarks: warm-up detection, robust summaries, bootstrap intervals, sample-count guidance.

Cloud performance is not normally distributed (noisy neighbours, throttling, host-to-host spread), so everything here
is nonparametric: medians, percentiles, percentile-method bootstrap over block statistics, binomial counts for tail
latency, and median-absolute-deviation outlier flags that never drop data.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from vastui.bench.manifest import WarmupRule

DEFAULT_CONFIDENCE = 0.95
# 2000 resamples put the Monte-Carlo error of a 95 % percentile bound well below block-to-block noise, in milliseconds.
DEFAULT_RESAMPLES = 2000
# MLPerf Inference's early-stopping confidence: with 99 % confidence the true tail is within the bound. It yields the
# minimum sample counts docs/method.md quotes (p90: 44, p99: 459, with no sample over the bound).
PERCENTILE_CONFIDENCE = 0.99
# Iglewicz & Hoaglin: |modified z| > 3.5 is a likely outlier; 0.6745 makes the MAD consistent with sigma for normal data.
OUTLIER_Z = 3.5
_MAD_TO_SIGMA = 0.6745
# Fallback when MAD is 0 (more than half the values identical): mean absolute deviation x sqrt(pi/2) estimates sigma.
_MEAN_AD_TO_SIGMA = math.sqrt(math.pi / 2)

Statistic = Callable[[Sequence[float]], float]


class Verdict(StrEnum):
    """Whether a requirement (an SLO) is met with confidence, violated with confidence, or not yet known."""

    MET = "met"
    VIOLATED = "violated"
    UNDECIDED = "undecided"


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with a confidence interval ``[low, high]`` from ``n`` observations."""

    point: float
    low: float
    high: float
    confidence: float
    n: int

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0

    @property
    def relative_half_width(self) -> float:
        """(high - low) / (2 |point|): 0.03 means +/- 3 %; inf when the point is 0 or a bound is infinite."""
        if self.point == 0.0 or not math.isfinite(self.high - self.low):
            return math.inf
        return (self.high - self.low) / (2.0 * abs(self.point))


@dataclass(frozen=True, slots=True)
class WarmupResult:
    """Where warm-up ended: the first ``steps`` step times (``warmup_s`` seconds) are warm-up, paid but not measured.

    ``is_capped`` means steadiness never came before the cap: measurement goes on, and the result is flagged.
    """

    is_steady: bool
    is_capped: bool
    steps: int
    warmup_s: float
    cv: float | None
    lost_s: float | None = None   # warm-up's extra time over its steps at the steady pace: what it costs production
    # Steps before the step time settled within cv_max of that pace for good: where a short run's timing may start
    # (the rule's window makes ``steps`` longer than the slow start itself).
    settled_steps: int | None = None

    @property
    def is_done(self) -> bool:
        return self.is_steady or self.is_capped


@dataclass(frozen=True, slots=True)
class LatencySummary:
    n: int
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class Block:
    """One measurement block: ``units`` of work done in ``duration_s`` over ``steps`` steps, plus latency samples."""

    units: float
    duration_s: float
    steps: int
    latencies_ms: tuple[float, ...] = ()
    run: int = 0            # which independent run (agent process) it came from

    @property
    def throughput_units_per_s(self) -> float:
        return self.units / self.duration_s if self.duration_s > 0 else 0.0


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, not {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    lower = math.floor(position)
    upper = math.ceil(position)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def summarize_latency(latencies_ms: Sequence[float]) -> LatencySummary:
    return LatencySummary(
        n=len(latencies_ms),
        p50_ms=percentile(latencies_ms, 50.0),
        p90_ms=percentile(latencies_ms, 90.0),
        p95_ms=percentile(latencies_ms, 95.0),
        p99_ms=percentile(latencies_ms, 99.0),
        max_ms=max(latencies_ms),
    )


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over mean; inf for a zero mean."""
    if len(values) < 2:
        raise ValueError("coefficient of variation needs at least two values")
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else math.inf


_DEFAULT_WARMUP = WarmupRule()


def detect_warmup(step_times_s: Sequence[float], *, rule: WarmupRule = _DEFAULT_WARMUP) -> WarmupResult:
    """Find the end of warm-up in a series of step durations.

    Steady at the first step i with i >= max(min_steps, window), elapsed >= min_s and the CV of the last ``window``
    step times <= cv_max. If elapsed time reaches cap_s first, warm-up ends there, capped. Call it again as steps
    arrive; until it is done, the result covers all steps so far.
    """
    elapsed = 0.0
    cv: float | None = None
    for index, step_s in enumerate(step_times_s):
        elapsed += step_s
        count = index + 1
        if count >= rule.window:
            cv = coefficient_of_variation(step_times_s[count - rule.window:count])
        if count >= max(rule.min_steps, rule.window) and elapsed >= rule.min_s and cv is not None \
                and cv <= rule.cv_max:
            return WarmupResult(is_steady=True, is_capped=False, steps=count, warmup_s=elapsed, cv=cv)
        if elapsed >= rule.cap_s:
            return WarmupResult(is_steady=False, is_capped=True, steps=count, warmup_s=elapsed, cv=cv)
    return WarmupResult(is_steady=False, is_capped=False, steps=len(step_times_s), warmup_s=elapsed, cv=cv)


def make_blocks(step_times_s: Sequence[float], units_per_step: Sequence[float], *, block_s: float,
                block_min_steps: int) -> tuple[Block, ...]:
    """Cut measured steps into consecutive blocks of >= block_s seconds and >= block_min_steps steps.

    A trailing partial block is not returned: it is not the evidence of a full block.
    """
    if len(step_times_s) != len(units_per_step):
        raise ValueError("step_times_s and units_per_step differ in length")
    blocks = []
    duration = units = 0.0
    steps = 0
    for step_s, step_units in zip(step_times_s, units_per_step, strict=True):
        duration += step_s
        units += step_units
        steps += 1
        if duration >= block_s and steps >= block_min_steps:
            blocks.append(Block(units=units, duration_s=duration, steps=steps))
            duration = units = 0.0
            steps = 0
    return tuple(blocks)


def block_medians(values: Sequence[float], *, block_size: int) -> tuple[float, ...]:
    """Medians of consecutive chunks of ``block_size`` values (a trailing partial chunk is left out)."""
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    full = len(values) - len(values) % block_size
    return tuple(median(values[i:i + block_size]) for i in range(0, full, block_size))


def bootstrap_distribution(values: Sequence[float], *, statistic: Statistic = median,
                           resamples: int = DEFAULT_RESAMPLES, rng: random.Random) -> tuple[float, ...]:
    """``statistic`` over ``resamples`` resamples (with replacement, same size) of ``values``."""
    if not values:
        raise ValueError("bootstrap of no values")
    n = len(values)
    return tuple(statistic(rng.choices(values, k=n)) for _ in range(resamples))


def percentile_bounds(distribution: Sequence[float], *, confidence: float) -> tuple[float, float]:
    """The two-sided percentile-method bounds of a bootstrap distribution."""
    alpha = 1.0 - confidence
    return percentile(distribution, 100.0 * alpha / 2.0), percentile(distribution, 100.0 * (1.0 - alpha / 2.0))


def bootstrap_ci(values: Sequence[float], *, statistic: Statistic = median, confidence: float = DEFAULT_CONFIDENCE,
                 resamples: int = DEFAULT_RESAMPLES, seed: int | str = 0) -> Interval:
    """Percentile-bootstrap interval of ``statistic`` (the median by default), reproducible from ``seed``."""
    distribution = bootstrap_distribution(values, statistic=statistic, resamples=resamples,
                                          rng=random.Random(seed))
    low, high = percentile_bounds(distribution, confidence=confidence)
    return Interval(point=statistic(values), low=low, high=high, confidence=confidence, n=len(values))


def bootstrap_ratio_ci(numerator: Sequence[float], denominator: Sequence[float], *, statistic: Statistic = median,
                       confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                       seed: int | str = 0) -> Interval:
    """Interval of statistic(numerator) / statistic(denominator), resampling the two samples independently.

    Used for C_i / C_best between candidates measured on different hosts (unpaired).
    """
    rng = random.Random(seed)
    tops = bootstrap_distribution(numerator, statistic=statistic, resamples=resamples, rng=rng)
    bottoms = bootstrap_distribution(denominator, statistic=statistic, resamples=resamples, rng=rng)
    ratios = [_ratio(t, b) for t, b in zip(tops, bottoms, strict=True)]
    low, high = percentile_bounds(ratios, confidence=confidence)
    point = _ratio(statistic(numerator), statistic(denominator))
    return Interval(point=point, low=low, high=high, confidence=confidence, n=min(len(numerator), len(denominator)))


def paired_gain_ci(baseline: Sequence[float], variant: Sequence[float], *, confidence: float = DEFAULT_CONFIDENCE,
                   resamples: int = DEFAULT_RESAMPLES, seed: int | str = 0) -> Interval:
    """Interval of the median relative gain variant/baseline - 1 over paired observations (A/B on one instance)."""
    if len(baseline) != len(variant):
        raise ValueError("paired samples differ in length")
    gains = [_ratio(v, b) - 1.0 for b, v in zip(baseline, variant, strict=True)]
    return bootstrap_ci(gains, confidence=confidence, resamples=resamples, seed=seed)


def _ratio(top: float, bottom: float) -> float:
    if bottom == 0.0:
        return math.inf if top > 0 else (0.0 if top == 0 else -math.inf)
    return top / bottom


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space so large n cannot overflow."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        log_term = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        total += math.exp(log_term)
    return min(1.0, total)


def min_samples_for_percentile(percentile_q: float, *, confidence: float = PERCENTILE_CONFIDENCE,
                               allowed_exceedances: int = 0) -> int:
    """Smallest n such that seeing at most ``allowed_exceedances`` samples over a latency bound in n samples
    certifies, with ``confidence``, that the true ``percentile_q`` is within the bound.

    If the true percentile sat exactly at the bound, each sample would exceed it with probability 1 - q/100; n is the
    smallest count for which so few exceedances would then have probability <= 1 - confidence (MLPerf Inference's
    early-stopping rule). With the defaults: p90 -> 44, p99 -> 459.
    """
    if not 0.0 < percentile_q < 100.0:
        raise ValueError("percentile must be strictly between 0 and 100")
    exceed = 1.0 - percentile_q / 100.0
    alpha = 1.0 - confidence
    high = max(1, allowed_exceedances + 1)
    while binomial_cdf(allowed_exceedances, high, exceed) > alpha:
        high *= 2
    low = high // 2
    while high - low > 1:  # cdf falls as n grows: bisect for the first n where it is <= alpha
        middle = (low + high) // 2
        if binomial_cdf(allowed_exceedances, middle, exceed) <= alpha:
            high = middle
        else:
            low = middle
    return high


def latency_verdict(latencies_ms: Sequence[float], *, percentile_q: float, max_ms: float,
                    confidence: float = PERCENTILE_CONFIDENCE) -> Verdict:
    """MET when so few samples exceed ``max_ms`` that the true percentile is within it (with ``confidence``);
    VIOLATED when so many exceed that it is beyond it; otherwise UNDECIDED (more samples needed)."""
    n = len(latencies_ms)
    if n == 0:
        return Verdict.UNDECIDED
    over = sum(1 for value in latencies_ms if value > max_ms)
    exceed = 1.0 - percentile_q / 100.0
    alpha = 1.0 - confidence
    if binomial_cdf(over, n, exceed) <= alpha:
        return Verdict.MET
    if 1.0 - binomial_cdf(over - 1, n, exceed) <= alpha:
        return Verdict.VIOLATED
    return Verdict.UNDECIDED


def latency_plausible(latencies_ms: Sequence[float], *, percentile_q: float, max_ms: float) -> bool:
    """Whether the samples so far, taken at face value, meet the ceiling: no more of them over ``max_ms`` than the
    percentile allows (True with no samples). Not a certification: ``latency_verdict`` is."""
    over = sum(1 for value in latencies_ms if value > max_ms)
    return over <= len(latencies_ms) * (1.0 - percentile_q / 100.0)


def floor_verdict(interval: Interval, *, floor: float) -> Verdict:
    """A throughput floor is MET when the interval lies above it, VIOLATED when it lies below."""
    if interval.low >= floor:
        return Verdict.MET
    if interval.high < floor:
        return Verdict.VIOLATED
    return Verdict.UNDECIDED


def median_absolute_deviation(values: Sequence[float]) -> float:
    centre = median(values)
    return median([abs(v - centre) for v in values])


def flag_outliers(values: Sequence[float], *, threshold: float = OUTLIER_Z) -> tuple[bool, ...]:
    """One flag per value: True where the modified z-score exceeds ``threshold``. Nothing is dropped."""
    if not values:
        return ()
    centre = median(values)
    mad = median_absolute_deviation(values)
    if mad > 0:
        scale = mad / _MAD_TO_SIGMA
    else:
        scale = statistics.fmean(abs(v - centre) for v in values) * _MEAN_AD_TO_SIGMA
        if scale == 0:
            return tuple(False for _ in values)
    return tuple(abs(v - centre) / scale > threshold for v in values)
