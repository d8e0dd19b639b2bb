"""Statistics for cloud benchmarks: robust summaries, bootstrap intervals, tail-latency verdicts.

Cloud performance is not normally distributed (noisy neighbours, throttling, host-to-host spread), so everything here
is nonparametric: medians, percentiles, percentile-method bootstrap over block statistics, and binomial counts for
tail latency. Warm-up detection lives where the records arrive (``campaign/measure.py``'s ``BlockMeter``).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_CONFIDENCE = 0.95
# 2000 resamples put the Monte-Carlo error of a 95 % percentile bound well below block-to-block noise, in milliseconds.
DEFAULT_RESAMPLES = 2000
# MLPerf Inference's early-stopping confidence: with 99 % confidence the true tail is within the bound. It yields the
# minimum sample counts docs/method.md quotes (p90: 44, p99: 459, with no sample over the bound).
PERCENTILE_CONFIDENCE = 0.99

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

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0


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
