"""The calibrated prior: predictions near what was measured, spreads that a few measurements cannot talk down, and
stated probabilities that hold on draws from the model itself."""

from __future__ import annotations

import math
import random

import pytest

from vastui.bench.calibration import (
    HOST_SIGMA_PRIOR,
    MODEL_TAU_PRIOR,
    Calibration,
    Observation,
    Prediction,
    needed_throughput,
)
from vastui.bench.cost import CostInputs, cost_curve


def test_with_nothing_measured_the_prediction_is_the_plan_prior_with_every_spread() -> None:
    blank = Calibration.fit([])
    p = blank.predict("RTX 4090 x1", 120.0)
    assert p.median_units_per_s == pytest.approx(120.0)
    assert p.sigma == pytest.approx(math.sqrt(1.0 + MODEL_TAU_PRIOR ** 2 + HOST_SIGMA_PRIOR ** 2))
    assert p.probability_above(120.0) == pytest.approx(0.5)


def test_a_measured_model_is_predicted_near_its_hosts_and_tighter_than_an_unmeasured_one() -> None:
    seen = [Observation("A x1", 100.0, m) for m in (50.0, 55.0, 52.0)] + \
           [Observation("B x1", 200.0, m) for m in (160.0, 170.0)]
    fit = Calibration.fit(seen)
    a, b, other = fit.predict("A x1", 100.0), fit.predict("B x1", 200.0), fit.predict("C x1", 100.0)
    assert 49.0 < a.median_units_per_s < 57.0
    assert 150.0 < b.median_units_per_s < 180.0
    assert a.sigma < other.sigma and b.sigma < other.sigma
    # the unmeasured model sits between the two measured ones' scales (0.52 and 0.83 of the prior)
    assert 52.0 < other.median_units_per_s < 83.0
    # a host measured before is taken at its own measurement, tightly
    known = fit.predict("C x1", 90.0, prior_is_measured=True)
    assert known.median_units_per_s == 90.0 and known.sigma < a.sigma


def test_a_workload_that_does_not_follow_the_prior_is_predicted_by_its_slope() -> None:
    """Input-bound: every GPU runs at its loaders' pace, whatever its dlperf. Three models measured at about 33
    units/s from priors 60 to 140: a fourth model with a prior of 57 is predicted near 33, not at a third of its
    prior, and a 40 units/s floor is within its reach."""
    seen = [Observation("A x1", 60.0, 33.0), Observation("A x1", 59.0, 31.0), Observation("B x1", 90.0, 34.0),
            Observation("C x1", 140.0, 33.0), Observation("D x1", 110.0, 30.0)]
    fit = Calibration.fit(seen)
    assert fit.beta < -0.5
    slow = fit.predict("E x1", 57.0)
    assert 27.0 < slow.median_units_per_s < 40.0
    assert slow.probability_above(40.0) > 0.10
    without_slope = math.exp(sum(o.log_ratio for o in seen) / len(seen)) * 57.0   # the ratio's mean alone
    assert without_slope < 22.0 < slow.median_units_per_s


def test_agreeing_measurements_cannot_talk_the_spreads_down_to_nothing() -> None:
    same = [Observation("A x1", 100.0, 60.0), Observation("A x1", 100.0, 60.0),
            Observation("B x1", 100.0, 60.0)]
    fit = Calibration.fit(same)
    assert fit.sigma >= HOST_SIGMA_PRIOR * math.sqrt(4.0 / 5.0) - 1e-12
    assert fit.tau >= MODEL_TAU_PRIOR * math.sqrt(3.0 / 4.0) - 1e-12


def test_garbage_observations_are_left_out() -> None:
    fit = Calibration.fit([Observation("A x1", 0.0, 10.0), Observation("A x1", 10.0, 0.0),
                           Observation("A x1", 10.0, 5.0, weight=0.0)])
    assert fit.observations == 0


def test_stated_probabilities_hold_on_draws_from_the_model() -> None:
    """Markets drawn from the model with its prior spreads: four GPU models, the campaign measures two hosts of
    one and one of another, then states P(a new host beats a bar) for a host of each model. Among the statements
    under 5 %, the share that came true stays under 5 % (within its sampling error); an overconfident fit (the
    spreads at a third of the truth) fails this."""
    rng = random.Random(20261204)
    stated, came_true = [], []
    for _ in range(3000):
        mu = rng.gauss(0.0, 0.5)
        b = {m: rng.gauss(0.0, MODEL_TAU_PRIOR) for m in "ABCD"}

        def draw(model: str, prior: float, mu: float = mu, b: dict[str, float] = b) -> float:
            return prior * math.exp(mu + b[model] + rng.gauss(0.0, HOST_SIGMA_PRIOR))

        fit = Calibration.fit([Observation("A", 100.0, draw("A", 100.0)), Observation("A", 100.0, draw("A", 100.0)),
                               Observation("B", 80.0, draw("B", 80.0))])
        bar = 100.0 * math.exp(mu) * rng.uniform(0.8, 2.5)
        for model in "ABC":
            p = fit.predict(model, 100.0).probability_above(bar)
            stated.append(p)
            came_true.append(draw(model, 100.0) > bar)
    low = [t for p, t in zip(stated, came_true, strict=True) if p < 0.05]
    expected = sum(p for p in stated if p < 0.05)
    assert len(low) > 500, "the draws gave too few low statements to judge"
    assert sum(low) <= expected + 3.0 * math.sqrt(expected) + 1.0, (sum(low), expected, len(low))


def test_an_overconfident_prediction_would_fail_the_same_check() -> None:
    """The check above can fail: a prediction with a third of the true spread states under 5 % far too often."""
    rng = random.Random(7)
    truth_sigma = 0.3
    low = came_true = 0
    for _ in range(4000):
        bar = 100.0 * math.exp(rng.uniform(0.0, 0.6))
        if Prediction(100.0, truth_sigma / 3.0).probability_above(bar) < 0.05:
            low += 1
            came_true += 100.0 * math.exp(rng.gauss(0.0, truth_sigma)) > bar
    assert came_true > 0.05 * low + 3.0 * math.sqrt(0.05 * low) + 1.0


def test_the_needed_throughput_brings_the_cost_down_to_the_target() -> None:
    inputs = CostInputs(price_per_hour_usd=1.2, startup_s=30.0, loading_s=120.0, warmup_s=20.0,
                        storage_usd_per_hour=0.02, inet_usd_per_gb=0.01, transfer_gb_fixed=5.0)
    at = cost_curve(inputs, units=20_000)
    target = at(75.0)
    assert needed_throughput(at, target_cost=target) == pytest.approx(75.0, rel=1e-6)
    assert needed_throughput(at, target_cost=at(1e9) * 0.5) == math.inf      # below the fixed cost: never
    assert needed_throughput(at, target_cost=math.inf) == 0.0


def test_a_prediction_is_a_log_normal() -> None:
    p = Prediction(50.0, 0.2)
    assert p.probability_above(50.0) == pytest.approx(0.5)
    assert p.probability_above(50.0 * math.exp(0.2 * 1.6448536)) == pytest.approx(0.05, abs=1e-6)
    assert p.probability_above(0.0) == 1.0 and p.probability_above(math.inf) == 0.0
