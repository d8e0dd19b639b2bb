"""Tuning one variable at a time: knob order from the bottleneck, ABBA pairs, and the acceptance rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vastui.bench.attribution import Bottleneck
from vastui.bench.cost import CostInputs, cost_interval, cost_per_accepted_unit
from vastui.bench.manifest import Tuning
from vastui.bench.select import plan_ab_pairs as plan_ab_pairs_from_select
from vastui.bench.stats import Interval
from vastui.bench.tuning import (
    Arm,
    Knob,
    Profile,
    TuningStep,
    judge_ab,
    plan_ab_pairs,
    plan_tuning,
    tuned_cost_estimate,
    tuning_order,
)

TUNING = Tuning(batch_sizes=(64, 128, 256), precisions=("fp32", "bf16"), loaders=(4, 8), gpu_counts=(1, 2))
BASELINE = Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1)


@pytest.mark.parametrize(("bottleneck", "first"), [
    (Bottleneck.INPUT_BOUND, Knob.LOADERS),  # the input path first
    (Bottleneck.COMPUTE_BOUND, Knob.PRECISION),  # the cheap, large lever before batch size
    (Bottleneck.MEMORY_BOUND, Knob.PRECISION),
    (Bottleneck.MULTI_GPU_SCALING_LOSS, Knob.GPU_COUNT),
    (Bottleneck.UNDETERMINED, Knob.PRECISION),   # the input path first only when the step waits for input
])
def test_the_bottleneck_picks_the_first_knob(bottleneck: Bottleneck, first: Knob) -> None:
    order = tuning_order(bottleneck)
    assert order[0] is first and sorted(order) == sorted(Knob)


def test_plan_skips_the_baseline_value_and_empty_knobs() -> None:
    plan = plan_tuning(TUNING, bottleneck=Bottleneck.INPUT_BOUND, baseline=BASELINE)
    assert plan == (TuningStep(Knob.LOADERS, (8,)), TuningStep(Knob.PRECISION, ("bf16",)),
                    TuningStep(Knob.BATCH_SIZE, (128, 256)), TuningStep(Knob.GPU_COUNT, (2,)))
    only_batch = Tuning(batch_sizes=(64,), loaders=(2, 4))
    assert plan_tuning(only_batch, bottleneck=Bottleneck.COMPUTE_BOUND, baseline=BASELINE) == (
        TuningStep(Knob.LOADERS, (2,)),)
    assert plan_tuning(TUNING, bottleneck=Bottleneck.THROTTLED, baseline=BASELINE) == ()


def test_profile_changes_one_knob() -> None:
    assert BASELINE.with_value(Knob.PRECISION, "bf16") == Profile(64, "bf16", 4, 1)
    assert BASELINE.with_value(Knob.LOADERS, 8).loaders == 8
    assert BASELINE.with_value(Knob.GPU_COUNT, 2).value(Knob.GPU_COUNT) == 2
    assert BASELINE.with_value(Knob.BATCH_SIZE, 256).batch_size == 256
    with pytest.raises(TypeError):
        BASELINE.with_value(Knob.BATCH_SIZE, "big")


def test_ab_pairs_alternate_abba() -> None:
    a, b = Arm.BASELINE, Arm.VARIANT
    assert plan_ab_pairs(pairs=5) == ((a, b), (b, a), (a, b), (b, a), (a, b))
    assert plan_ab_pairs_from_select is plan_ab_pairs
    with pytest.raises(ValueError):
        plan_ab_pairs(pairs=0)


@settings(max_examples=30, deadline=None)
@given(pairs=st.integers(1, 40))
def test_abba_balances_position(pairs: int) -> None:
    plan = plan_ab_pairs(pairs=pairs)
    firsts = sum(1 for first, _ in plan if first is Arm.BASELINE)
    assert abs(firsts - (pairs - firsts)) <= 1 and all({x, y} == set(Arm) for x, y in plan)


BASE = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5]


@pytest.mark.parametrize(("variant", "ok", "accepted", "reason"), [
    ([v * 1.10 for v in BASE], True, True, "gain +10.0%"),
    ([v * 1.10 for v in BASE], False, False, "correctness"),
    ([v * 1.01 for v in BASE], True, False, "not above 2%"),  # real but too small to be worth a knob
    ([101.0, 99.0, 104.0, 97.0, 103.0, 98.0], True, False, "no clear gain"),  # noise
    ([v * 1.10 for v in BASE[:4]], True, False, "not enough evidence"),
])
def test_a_change_is_accepted_only_when_clear_large_and_correct(variant: list[float], ok: bool, accepted: bool,
                                                                 reason: str) -> None:
    baseline = BASE[:len(variant)]
    verdict = judge_ab(baseline_units_per_s=baseline, variant_units_per_s=variant, correctness_ok=ok)
    assert verdict.accepted is accepted
    assert reason in verdict.reason
    assert verdict.pairs == len(variant)


def test_a_slower_variant_is_rejected() -> None:
    verdict = judge_ab(baseline_units_per_s=BASE, variant_units_per_s=[v * 0.9 for v in BASE], correctness_ok=True)
    assert not verdict.accepted and verdict.gain is not None and verdict.gain.high < 0


# --- the tuned profile's cost: estimated from the race and the kept gains ---------------------------------------

RACED = CostInputs(price_per_hour_usd=0.36, startup_s=300.0, warmup_s=30.0)
RACED_THROUGHPUT = Interval(point=100.0, low=95.0, high=104.0, confidence=0.95, n=30)


def test_no_kept_gain_leaves_the_raced_cost() -> None:
    estimate = tuned_cost_estimate(RACED, throughput=RACED_THROUGHPUT, gains=[], units=20_000)
    assert estimate == cost_interval(RACED, units=20_000, throughput=RACED_THROUGHPUT)


def test_kept_gains_compound_and_lower_the_cost_bound_by_bound() -> None:
    gains = [Interval(point=0.25, low=0.20, high=0.30, confidence=0.95, n=5),
             Interval(point=0.10, low=0.05, high=0.12, confidence=0.95, n=5)]
    estimate = tuned_cost_estimate(RACED, throughput=RACED_THROUGHPUT, gains=gains, units=20_000)

    def at(theta: float) -> float:
        return cost_per_accepted_unit(RACED, units=20_000, throughput_units_per_s=theta)

    assert estimate.point == pytest.approx(at(100.0 * 1.25 * 1.10))
    assert estimate.high == pytest.approx(at(95.0 * 1.20 * 1.05))   # the slowest end gives the dearest cost
    assert estimate.low == pytest.approx(at(104.0 * 1.30 * 1.12))
    raced = cost_interval(RACED, units=20_000, throughput=RACED_THROUGHPUT)
    assert estimate.low < estimate.point < estimate.high < raced.point
    assert (estimate.confidence, estimate.n) == (raced.confidence, raced.n)
