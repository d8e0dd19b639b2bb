"""Statistics: known answers, the MLPerf sample counts, and properties of the bootstrap (warm-up detection is
``BlockMeter``'s: tests/campaign/test_campaign_measure.py)."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vastui.bench.stats import (
    Interval,
    Verdict,
    binomial_cdf,
    bootstrap_ci,
    coefficient_of_variation,
    floor_verdict,
    latency_verdict,
    median,
    paired_gain_ci,
    percentile,
    summarize_latency,
)

finite = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([1.0, 2.0, 3.0, 4.0], 50.0, 2.5),
    ([1.0, 2.0, 3.0, 4.0], 0.0, 1.0),
    ([1.0, 2.0, 3.0, 4.0], 100.0, 4.0),
    ([10.0, 20.0, 30.0, 40.0, 50.0], 25.0, 20.0),
    ([10.0, 20.0, 30.0, 40.0, 50.0], 90.0, 46.0),
    ([7.0], 99.0, 7.0),
    (list(map(float, range(1, 101))), 99.0, 99.01),
])
def test_percentile_interpolates_linearly(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected, rel=1e-12)


def test_summaries_and_errors() -> None:
    summary = summarize_latency(list(map(float, range(1, 101))))
    assert (summary.n, summary.p50_ms, summary.max_ms) == (100, 50.5, 100.0)
    assert summary.p95_ms == pytest.approx(95.05) and summary.p99_ms == pytest.approx(99.01)
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert coefficient_of_variation([9.0, 11.0]) == pytest.approx(statistics.stdev([9.0, 11.0]) / 10.0)
    with pytest.raises(ValueError):
        median([])
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)
    with pytest.raises(ValueError):
        coefficient_of_variation([1.0])


# MLPerf Inference's early-stopping minimums (no sample over the bound, 99 % confidence); docs/method.md quotes two.
@pytest.mark.parametrize(("q", "n"), [(99.0, 459), (90.0, 44), (95.0, 90), (50.0, 7)])
def test_latency_verdict_certifies_at_the_mlperf_minimum(q: float, n: int) -> None:
    # n samples all under the bound certify the percentile, n - 1 do not.
    assert latency_verdict([10.0] * n, percentile_q=q, max_ms=50.0) is Verdict.MET
    assert latency_verdict([10.0] * (n - 1), percentile_q=q, max_ms=50.0) is Verdict.UNDECIDED
    exceed = 1 - q / 100
    assert binomial_cdf(0, n, exceed) <= 0.01 < binomial_cdf(0, n - 1, exceed)


@pytest.mark.parametrize(("k", "n", "p", "expected"), [
    (0, 3, 0.5, 0.125), (1, 3, 0.5, 0.5), (3, 3, 0.5, 1.0), (-1, 3, 0.5, 0.0), (2, 10, 0.0, 1.0), (2, 10, 1.0, 0.0),
    (1, 4, 0.25, 0.31640625 + 0.421875),
])
def test_binomial_cdf_known_values(k: int, n: int, p: float, expected: float) -> None:
    assert binomial_cdf(k, n, p) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_latency_verdicts_follow_the_binomial_rule() -> None:
    assert latency_verdict([10.0] * 459, percentile_q=99.0, max_ms=50.0) is Verdict.MET
    assert latency_verdict([10.0] * 458, percentile_q=99.0, max_ms=50.0) is Verdict.UNDECIDED
    assert latency_verdict([10.0] * 43, percentile_q=90.0, max_ms=50.0) is Verdict.UNDECIDED
    assert latency_verdict([10.0] * 44, percentile_q=90.0, max_ms=50.0) is Verdict.MET
    assert latency_verdict([60.0] * 3, percentile_q=99.0, max_ms=50.0) is Verdict.VIOLATED
    assert latency_verdict([10.0] * 97 + [60.0] * 3, percentile_q=99.0, max_ms=50.0) is Verdict.UNDECIDED
    assert latency_verdict([], percentile_q=99.0, max_ms=50.0) is Verdict.UNDECIDED


@pytest.mark.parametrize(("low", "high", "verdict"), [(101.0, 120.0, Verdict.MET), (100.0, 120.0, Verdict.MET),
                                                       (90.0, 99.0, Verdict.VIOLATED),
                                                       (90.0, 120.0, Verdict.UNDECIDED)])
def test_floor_verdict(low: float, high: float, verdict: Verdict) -> None:
    assert floor_verdict(Interval(110.0, low, high, 0.95, 10), floor=100.0) is verdict


def test_bootstrap_is_reproducible_and_covers_the_median() -> None:
    rng = random.Random(5)
    values = [rng.gauss(100.0, 5.0) for _ in range(30)]
    first = bootstrap_ci(values, seed=11)
    assert first == bootstrap_ci(values, seed=11)
    assert first.low < first.point < first.high and first.low <= statistics.median(values) <= first.high
    assert first.n == 30 and first.confidence == 0.95
    assert bootstrap_ci(values, seed=11, confidence=0.99).high >= first.high


def test_paired_gain_interval() -> None:
    gain = paired_gain_ci([100.0, 110.0, 90.0, 105.0, 95.0], [110.0, 121.0, 99.0, 115.5, 104.5])
    assert gain.point == pytest.approx(0.10) and gain.low == pytest.approx(0.10) and gain.excludes_zero


@settings(max_examples=60, deadline=None)
@given(value=finite, n=st.integers(min_value=1, max_value=40), seed=st.integers(0, 2**16))
def test_ci_of_a_constant_series_collapses_to_the_constant(value: float, n: int, seed: int) -> None:
    ci = bootstrap_ci([value] * n, resamples=200, seed=seed)
    assert ci.point == ci.low == ci.high == value


@settings(max_examples=60, deadline=None)
@given(values=st.lists(finite, min_size=1, max_size=30), seed=st.integers(0, 2**16))
def test_ci_lies_within_the_data_and_brackets_nothing_outside(values: list[float], seed: int) -> None:
    ci = bootstrap_ci(values, resamples=200, seed=seed)
    assert min(values) <= ci.low <= ci.high <= max(values)
    assert min(values) <= ci.point <= max(values)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(finite, min_size=1, max_size=30), scale=st.floats(min_value=0.01, max_value=100.0))
def test_bootstrap_scales_with_the_data(values: list[float], scale: float) -> None:
    ci = bootstrap_ci(values, resamples=200, seed=3)
    scaled = bootstrap_ci([v * scale for v in values], resamples=200, seed=3)
    assert scaled.low == pytest.approx(ci.low * scale, rel=1e-9)
    assert scaled.high == pytest.approx(ci.high * scale, rel=1e-9)
