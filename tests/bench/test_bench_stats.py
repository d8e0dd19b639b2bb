"""Statistics: known answers, the MLPerf sample counts, warm-up detection, and properties of the bootstrap."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vastui.bench.manifest import WarmupRule
from vastui.bench.stats import (
    Block,
    Interval,
    Verdict,
    binomial_cdf,
    block_medians,
    bootstrap_ci,
    bootstrap_ratio_ci,
    coefficient_of_variation,
    detect_warmup,
    flag_outliers,
    floor_verdict,
    latency_verdict,
    make_blocks,
    median,
    min_samples_for_percentile,
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
def test_min_samples_for_percentile_reproduces_mlperf(q: float, n: int) -> None:
    assert min_samples_for_percentile(q) == n
    # By construction: n samples all under the bound certify the percentile, n - 1 do not.
    exceed = 1 - q / 100
    assert binomial_cdf(0, n, exceed) <= 0.01 < binomial_cdf(0, n - 1, exceed)


def test_allowing_exceedances_needs_more_samples() -> None:
    counts = [min_samples_for_percentile(99.0, allowed_exceedances=k) for k in range(4)]
    assert counts == sorted(counts) and len(set(counts)) == 4
    n = counts[1]
    assert binomial_cdf(1, n, 0.01) <= 0.01 < binomial_cdf(1, n - 1, 0.01)


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


RULE = WarmupRule(min_s=30.0, min_steps=20, cv_max=0.05, window=10, cap_s=180.0)


def test_warmup_waits_for_time_steps_and_a_steady_window() -> None:
    # 10 slow steps of 3 s (compilation), then steady 1 s steps. After step 10: 30 s but only 10 steps.
    # The window of the last 10 step times is steady from step 20 on; min_steps is 20; elapsed at 20 is 40 s.
    steps = [3.0] * 10 + [1.0] * 30
    result = detect_warmup(steps, rule=RULE)
    assert result.is_steady and not result.is_capped and result.is_done
    assert (result.steps, result.warmup_s, result.cv) == (20, 40.0, 0.0)


def test_warmup_needs_min_seconds_even_when_steady() -> None:
    result = detect_warmup([0.5] * 100, rule=RULE)  # steady from the start, but 20 steps are only 10 s
    assert result.is_steady and (result.steps, result.warmup_s) == (60, 30.0)


def test_warmup_is_capped_and_flagged_when_never_steady() -> None:
    noisy = [1.0, 3.0] * 200  # CV ~ 0.5 forever
    result = detect_warmup(noisy, rule=RULE)
    assert result.is_capped and not result.is_steady and result.warmup_s == 180.0 and result.steps == 90
    assert result.cv is not None and result.cv > 0.4


def test_warmup_not_done_yet_covers_all_steps() -> None:
    result = detect_warmup([1.0] * 12, rule=RULE)
    assert not result.is_done and (result.steps, result.warmup_s) == (12, 12.0)


def test_blocks_need_both_duration_and_steps() -> None:
    # 0.5 s steps of 10 units: a block needs 60 steps for 30 s; the 70-step tail is partial and dropped
    blocks = make_blocks([0.5] * 190, [10.0] * 190, block_s=30.0, block_min_steps=20)
    assert len(blocks) == 3
    assert blocks[0] == Block(units=600.0, duration_s=30.0, steps=60)
    assert blocks[0].throughput_units_per_s == 20.0
    # 2 s steps: 20 steps (40 s) are needed, not 15
    assert make_blocks([2.0] * 40, [1.0] * 40, block_s=30.0, block_min_steps=20)[0].steps == 20
    assert block_medians([1.0, 9.0, 5.0, 2.0, 2.0, 8.0, 100.0], block_size=3) == (5.0, 2.0)
    with pytest.raises(ValueError):
        make_blocks([1.0], [], block_s=1.0, block_min_steps=1)


def test_bootstrap_is_reproducible_and_covers_the_median() -> None:
    rng = random.Random(5)
    values = [rng.gauss(100.0, 5.0) for _ in range(30)]
    first = bootstrap_ci(values, seed=11)
    assert first == bootstrap_ci(values, seed=11)
    assert first.low < first.point < first.high and first.contains(statistics.median(values))
    assert first.n == 30 and first.confidence == 0.95
    assert bootstrap_ci(values, seed=11, confidence=0.99).high >= first.high


def test_ratio_and_paired_gain_intervals() -> None:
    ratio = bootstrap_ratio_ci([2.0] * 6, [1.0] * 8, seed=1)
    assert (ratio.point, ratio.low, ratio.high) == (2.0, 2.0, 2.0)
    gain = paired_gain_ci([100.0, 110.0, 90.0, 105.0, 95.0], [110.0, 121.0, 99.0, 115.5, 104.5])
    assert gain.point == pytest.approx(0.10) and gain.low == pytest.approx(0.10) and gain.excludes_zero
    assert bootstrap_ratio_ci([1.0], [0.0]).point == math.inf


def test_outliers_are_flagged_not_dropped() -> None:
    values = [10.0, 10.2, 9.9, 10.1, 10.0, 30.0, 9.8]
    flags = flag_outliers(values)
    assert len(flags) == len(values) and flags == (False,) * 5 + (True, False)
    # MAD = 0 (most values equal): the mean absolute deviation still finds the odd one
    assert flag_outliers([5.0, 5.0, 5.0, 5.0, 5.0, 50.0]) == (False,) * 5 + (True,)
    assert flag_outliers([5.0] * 4) == (False,) * 4
    assert flag_outliers([]) == ()


@settings(max_examples=60, deadline=None)
@given(value=finite, n=st.integers(min_value=1, max_value=40), seed=st.integers(0, 2**16))
def test_ci_of_a_constant_series_collapses_to_the_constant(value: float, n: int, seed: int) -> None:
    ci = bootstrap_ci([value] * n, resamples=200, seed=seed)
    assert ci.point == ci.low == ci.high == value
    assert ci.relative_half_width == 0.0


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


@settings(max_examples=60, deadline=None)
@given(values=st.lists(finite, min_size=1, max_size=50))
def test_outlier_flags_keep_every_value_and_never_flag_the_median(values: list[float]) -> None:
    flags = flag_outliers(values)
    assert len(flags) == len(values)
    if len(values) % 2 == 1:
        assert not flags[values.index(statistics.median(values))]


@settings(max_examples=40, deadline=None)
@given(q=st.floats(min_value=50.0, max_value=99.9), k=st.integers(0, 3))
def test_min_samples_is_the_first_n_that_certifies(q: float, k: int) -> None:
    n = min_samples_for_percentile(q, allowed_exceedances=k)
    exceed = 1 - q / 100
    assert binomial_cdf(k, n, exceed) <= 0.01
    assert n == k + 1 or binomial_cdf(k, n - 1, exceed) > 0.01
