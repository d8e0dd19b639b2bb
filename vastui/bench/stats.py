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

from vastui.bench.calibration import normal_quantile

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


def student_t_quantile(q: float, df: int) -> float:
    """Student's t quantile for ``df`` >= 2 degrees of freedom: the normal's, corrected by the Cornish-Fisher
    series in 1/df (Abramowitz and Stegun 26.7.5; within 1 % at df = 2, within 0.1 % from df = 3 at q = 0.975)."""
    if df < 2:
        raise ValueError(f"the t quantile here needs df >= 2, not {df}")
    z = normal_quantile(q)
    z3, z5, z7, z9 = z ** 3, z ** 5, z ** 7, z ** 9
    return (z + (z3 + z) / (4 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96 * df ** 2)
            + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df ** 3)
            + (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * df ** 4))


def stratified_gain_ci(gains_by_machine: Sequence[Sequence[float]], *,
                       confidence: float = DEFAULT_CONFIDENCE) -> Interval | None:
    """Interval of the mean over machines of each machine's mean relative gain (pairs' variant/baseline - 1, each
    machine's pairs in one sequence), in log ratios: log(1 + g_ij) = mu_i + e_ij, the noise e shared by every machine
    (its variance pooled over each machine's pairs about its own mean), the machines' own effects mu_i kept apart.
    The question it answers: do these machines gain on average? A machine whose effect differs from the others' then
    widens nothing (a pooled median counts that difference as noise, and needs many pairs where every machine
    gains, one of them twice as much). Student's t on N - k degrees of freedom; None with fewer than two machines
    or fewer than three degrees of freedom (where the t quantile's series is within 0.1 %)."""
    machines = [[math.log1p(g) for g in gains] for gains in gains_by_machine if gains]
    k, n = len(machines), sum(len(m) for m in machines)
    if k < 2 or n - k < 3 or any(g <= -1.0 for gains in gains_by_machine for g in gains):
        return None
    means = [statistics.fmean(m) for m in machines]
    residual = sum((x - mean) ** 2 for m, mean in zip(machines, means, strict=True) for x in m) / (n - k)
    point = statistics.fmean(means)
    half = student_t_quantile(0.5 + confidence / 2.0, n - k) * math.sqrt(residual * sum(1.0 / len(m)
                                                                                       for m in machines)) / k
    return Interval(point=math.expm1(point), low=math.expm1(point - half), high=math.expm1(point + half),
                    confidence=confidence, n=n)


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
