"""Cost per accepted unit at production N: the classic trap worked by hand, break-even N, failures, properties."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vastui.bench.cost import (
    CostInputs,
    break_even_units,
    cost_interval,
    cost_per_accepted_unit,
    fixed_cost_usd,
    marginal_cost_usd,
    total_cost_usd,
)
from vastui.bench.stats import Interval

# --- the worked example: the classic trap -----------------------------------------------------------------------
# FAST: an H100 at $2.00/h doing 120 units/s, on a host with a slow registry link: image pull 900 s + readiness 60 s
#       = startup 960 s, warm-up 40 s; the 18 GB image crosses dear bandwidth at $0.04/GB = $0.72.
# SLOW: an RTX 4090 at $0.60/h doing 30 units/s, image pulled fast: 120 s + readiness 30 s = 150 s, warm-up 50 s;
#       the same 18 GB at $0.002/GB = $0.036.
# The headline favours FAST: per dollar-hour it does 120/2.00 = 60 units/s, SLOW 30/0.60 = 50.
FAST = CostInputs(price_per_hour_usd=2.00, startup_s=960.0, warmup_s=40.0, inet_usd_per_gb=0.04,
                  transfer_gb_fixed=18.0)
FAST_THETA = 120.0
SLOW = CostInputs(price_per_hour_usd=0.60, startup_s=150.0, warmup_s=50.0, inet_usd_per_gb=0.002,
                  transfer_gb_fixed=18.0)
SLOW_THETA = 30.0


def test_the_faster_gpu_loses_at_20000_units() -> None:
    n = 20_000
    # FAST: paid time 960 + 40 + 20000/120 = 3500/3 s; 2.00 $/h x 3500/3 s / 3600 = 35/54 $; + 0.72 = 18/25 $
    #       total 35/54 + 18/25 = (875 + 972)/1350 = 1847/1350 $ = $1.368148...; per unit 1847/27,000,000
    fast = cost_per_accepted_unit(FAST, units=n, throughput_units_per_s=FAST_THETA)
    assert total_cost_usd(FAST, units=n, throughput_units_per_s=FAST_THETA) == pytest.approx(1847 / 1350, rel=1e-12)
    assert fast == pytest.approx(1847 / 27_000_000, rel=1e-12)  # $6.8407e-05 per accepted unit
    # SLOW: paid time 150 + 50 + 20000/30 = 2600/3 s; 0.60 $/h x 2600/3 s / 3600 = 13/90 $; + 0.036 = 9/250 $
    #       total 13/90 + 9/250 = (325 + 81)/2250 = 203/1125 $ = $0.180444...; per unit 203/22,500,000
    slow = cost_per_accepted_unit(SLOW, units=n, throughput_units_per_s=SLOW_THETA)
    assert slow == pytest.approx(203 / 22_500_000, rel=1e-12)  # $9.0222e-06 per accepted unit
    # FAST costs 7.58x as much per accepted unit at this N: (1847/27e6) / (203/22.5e6) = 1847 x 22.5 / (203 x 27)
    assert fast / slow == pytest.approx(1847 * 22.5 / (203 * 27), rel=1e-12)


def test_the_faster_gpu_wins_above_its_break_even() -> None:
    # Fixed cost a (paid once) and marginal cost b (per unit):
    #   a_FAST = 2.00 x 1000 / 3600 + 0.72 = 5/9 + 18/25 = 287/225 $    b_FAST = 2.00 / (3600 x 120) = 1/216,000 $
    #   a_SLOW = 0.60 x  200 / 3600 + 0.036 = 1/30 + 9/250 = 26/375 $   b_SLOW = 0.60 / (3600 x 30) = 1/180,000 $
    assert fixed_cost_usd(FAST) == pytest.approx(287 / 225, rel=1e-12)
    assert fixed_cost_usd(SLOW) == pytest.approx(26 / 375, rel=1e-12)
    assert marginal_cost_usd(FAST, throughput_units_per_s=FAST_THETA) == pytest.approx(1 / 216_000, rel=1e-12)
    assert marginal_cost_usd(SLOW, throughput_units_per_s=SLOW_THETA) == pytest.approx(1 / 180_000, rel=1e-12)
    # N_be = (a_FAST - a_SLOW) / (b_SLOW - b_FAST) = (1435/1125 - 78/1125) / (1/1,080,000) = 1357/1125 x 1,080,000
    #      = 1357 x 960 = 1,302,720 units
    n_be = break_even_units(first=FAST, first_throughput_units_per_s=FAST_THETA, second=SLOW,
                            second_throughput_units_per_s=SLOW_THETA)
    assert n_be is not None and n_be == pytest.approx(1_302_720, rel=1e-12)
    assert break_even_units(first=SLOW, first_throughput_units_per_s=SLOW_THETA, second=FAST,
                            second_throughput_units_per_s=FAST_THETA) == pytest.approx(1_302_720, rel=1e-12)
    # At N_be both cost 1644/225 $ in total: 287/225 + 1,302,720/216,000 = 26/375 + 1,302,720/180,000 = 7.30667 $
    for inputs, theta in ((FAST, FAST_THETA), (SLOW, SLOW_THETA)):
        assert total_cost_usd(inputs, units=n_be, throughput_units_per_s=theta) == pytest.approx(1644 / 225, rel=1e-12)
    # At N = 2,000,000: FAST 287/225 + 2e6/216,000 = $10.534815, SLOW 26/375 + 2e6/180,000 = $11.180444
    n = 2_000_000
    fast = cost_per_accepted_unit(FAST, units=n, throughput_units_per_s=FAST_THETA)
    slow = cost_per_accepted_unit(SLOW, units=n, throughput_units_per_s=SLOW_THETA)
    assert fast == pytest.approx((287 / 225 + n / 216_000) / n, rel=1e-12)  # $5.2674e-06
    assert slow == pytest.approx((26 / 375 + n / 180_000) / n, rel=1e-12)  # $5.5902e-06
    assert fast < slow
    # just below and above the crossing, the order flips
    below = math.floor(n_be) - 1
    above = math.ceil(n_be) + 1
    assert cost_per_accepted_unit(FAST, units=below, throughput_units_per_s=FAST_THETA) > \
        cost_per_accepted_unit(SLOW, units=below, throughput_units_per_s=SLOW_THETA)
    assert cost_per_accepted_unit(FAST, units=above, throughput_units_per_s=FAST_THETA) < \
        cost_per_accepted_unit(SLOW, units=above, throughput_units_per_s=SLOW_THETA)


def test_acceptance_storage_and_per_unit_transfer_count() -> None:
    inputs = CostInputs(price_per_hour_usd=3.6, startup_s=100.0, warmup_s=0.0, storage_usd_per_hour=0.36,
                        extra_exists_s=50.0, inet_usd_per_gb=0.01, transfer_gb_fixed=0.0,
                        transfer_gb_per_unit=0.001, acceptance_rate=0.8)
    # compute: 3.6 $/h x (100 + 1000/10) s = 0.2 $; storage: 0.36 $/h x (200 + 50) s = 0.025 $;
    # transfer: 1000 units x 0.001 GB x 0.01 $/GB = 0.01 $; total 0.235 $ over 800 accepted units
    assert total_cost_usd(inputs, units=1000, throughput_units_per_s=10.0) == pytest.approx(0.235, rel=1e-12)
    assert cost_per_accepted_unit(inputs, units=1000, throughput_units_per_s=10.0) == pytest.approx(0.235 / 800)


@pytest.mark.parametrize("failed", [
    CostInputs(price_per_hour_usd=1.0, startup_s=10.0, passed_gate=False),
    CostInputs(price_per_hour_usd=1.0, startup_s=10.0, acceptance_rate=0.0),
    CostInputs(price_per_hour_usd=0.0, startup_s=math.inf),
])
def test_failed_correctness_or_readiness_is_infinite_cost(failed: CostInputs) -> None:
    assert failed.is_failed
    assert cost_per_accepted_unit(failed, units=100, throughput_units_per_s=10.0) == math.inf
    assert break_even_units(first=failed, first_throughput_units_per_s=10.0, second=SLOW,
                            second_throughput_units_per_s=SLOW_THETA) is None
    assert cost_per_accepted_unit(SLOW, units=100, throughput_units_per_s=0.0) == math.inf


def test_dominated_candidates_have_no_break_even() -> None:
    cheaper_everywhere = CostInputs(price_per_hour_usd=0.5, startup_s=100.0)
    dearer_everywhere = CostInputs(price_per_hour_usd=1.0, startup_s=200.0)
    assert break_even_units(first=cheaper_everywhere, first_throughput_units_per_s=10.0, second=dearer_everywhere,
                            second_throughput_units_per_s=10.0) is None
    assert break_even_units(first=cheaper_everywhere, first_throughput_units_per_s=10.0, second=cheaper_everywhere,
                            second_throughput_units_per_s=10.0) is None


def test_cost_interval_carries_throughput_interval_through() -> None:
    theta = Interval(point=120.0, low=100.0, high=150.0, confidence=0.95, n=10)
    ci = cost_interval(FAST, units=20_000, throughput=theta)
    assert ci.low == cost_per_accepted_unit(FAST, units=20_000, throughput_units_per_s=150.0)
    assert ci.high == cost_per_accepted_unit(FAST, units=20_000, throughput_units_per_s=100.0)
    assert ci.low < ci.point < ci.high and (ci.confidence, ci.n) == (0.95, 10)
    zero = cost_interval(FAST, units=20_000, throughput=Interval(1.0, 0.0, 2.0, 0.95, 3))
    assert zero.high == math.inf


prices = st.floats(min_value=0.01, max_value=50.0)
seconds = st.floats(min_value=0.0, max_value=5000.0)
thetas = st.floats(min_value=0.1, max_value=10_000.0)
units = st.integers(min_value=1, max_value=10**8)


@st.composite
def cost_inputs(draw: st.DrawFn) -> CostInputs:
    return CostInputs(price_per_hour_usd=draw(prices), startup_s=draw(seconds), warmup_s=draw(seconds),
                      storage_usd_per_hour=draw(st.floats(0.0, 1.0)), extra_exists_s=draw(seconds),
                      inet_usd_per_gb=draw(st.floats(0.0, 0.1)), transfer_gb_fixed=draw(st.floats(0.0, 100.0)),
                      transfer_gb_per_unit=draw(st.floats(0.0, 1e-3)), acceptance_rate=draw(st.floats(0.01, 1.0)))


@settings(max_examples=100, deadline=None)
@given(inputs=cost_inputs(), extra=st.floats(min_value=0.001, max_value=10.0), n=units, theta=thetas)
def test_cost_is_monotone_in_price(inputs: CostInputs, extra: float, n: int, theta: float) -> None:
    dearer = dataclasses.replace(inputs, price_per_hour_usd=inputs.price_per_hour_usd + extra)
    base = cost_per_accepted_unit(inputs, units=n, throughput_units_per_s=theta)
    assert cost_per_accepted_unit(dearer, units=n, throughput_units_per_s=theta) > base
    faster = cost_per_accepted_unit(inputs, units=n, throughput_units_per_s=theta * 1.5)
    assert faster <= base


@settings(max_examples=200, deadline=None)
@given(a=cost_inputs(), b=cost_inputs(), theta_a=thetas, theta_b=thetas)
def test_break_even_costs_are_equal(a: CostInputs, b: CostInputs, theta_a: float, theta_b: float) -> None:
    n_be = break_even_units(first=a, first_throughput_units_per_s=theta_a, second=b,
                            second_throughput_units_per_s=theta_b)
    assume(n_be is not None and n_be < 1e12)
    assert n_be is not None
    cost_a = cost_per_accepted_unit(a, units=n_be, throughput_units_per_s=theta_a)
    cost_b = cost_per_accepted_unit(b, units=n_be, throughput_units_per_s=theta_b)
    assert cost_a == pytest.approx(cost_b, rel=1e-9)
    # and the order flips across it (affine total cost: one crossing at most)
    lo_a = cost_per_accepted_unit(a, units=n_be / 2, throughput_units_per_s=theta_a)
    lo_b = cost_per_accepted_unit(b, units=n_be / 2, throughput_units_per_s=theta_b)
    hi_a = cost_per_accepted_unit(a, units=n_be * 2, throughput_units_per_s=theta_a)
    hi_b = cost_per_accepted_unit(b, units=n_be * 2, throughput_units_per_s=theta_b)
    assert (lo_a - lo_b) * (hi_a - hi_b) <= 0



@pytest.mark.parametrize("theta", [0.5, 3.0, 120.0, 5000.0])
def test_the_cost_curve_is_the_cost_formula(theta: float) -> None:
    from vastui.bench.cost import cost_curve
    inputs = CostInputs(price_per_hour_usd=0.9, startup_s=40.0, warmup_s=12.0, loading_s=300.0,
                        storage_usd_per_hour=0.01, inet_usd_per_gb=0.004, transfer_gb_fixed=8.0,
                        transfer_gb_per_unit=1e-4, acceptance_rate=0.95)
    at = cost_curve(inputs, units=20_000)
    assert at(theta) == pytest.approx(cost_per_accepted_unit(inputs, units=20_000, throughput_units_per_s=theta),
                                      rel=1e-12)
    failed = cost_curve(CostInputs(price_per_hour_usd=1.0, startup_s=0.0, passed_gate=False), units=10)
    assert failed(theta) == float("inf")
