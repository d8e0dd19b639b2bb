"""Throughput intervals that carry the between-run error: what one run cannot show, and what a knife-edge SLO is."""

from __future__ import annotations

import random

import pytest

from vastui.bench.cost import CostInputs
from vastui.bench.manifest import MeasureRule, Slo
from vastui.bench.runs import between_run_cv, run_aware_distribution
from vastui.bench.select import Race, RaceCandidate
from vastui.bench.stats import Block, Verdict, percentile_bounds

CHEAP = CostInputs(price_per_hour_usd=1.0, startup_s=120.0)


def blocks_of_runs(run_means: list[float], *, per_run: int, jitter: float, rng: random.Random) -> list[Block]:
    return [Block(units=mean * (1 + rng.gauss(0, jitter)) * 30.0, duration_s=30.0, steps=30, run=index)
            for index, mean in enumerate(run_means) for _ in range(per_run)]


def test_the_between_run_cv_pools_the_runs_spread_with_the_prior() -> None:
    same = [Block(units=300.0, duration_s=30.0, steps=30, run=r) for r in (0, 1)]
    cv, dof = between_run_cv(same, cv_prior=0.04)
    assert dof == pytest.approx(4.0) and cv == pytest.approx(0.04 * (3 / 4) ** 0.5)
    apart = [Block(units=300.0, duration_s=30.0, steps=30, run=0), Block(units=360.0, duration_s=30.0, steps=30, run=1)]
    assert between_run_cv(apart, cv_prior=0.04)[0] > 0.06     # the runs disagree by ~13 %: the data widen it


def test_one_run_of_many_blocks_no_longer_claims_a_tight_interval() -> None:
    rng = random.Random(1)
    blocks = blocks_of_runs([100.0], per_run=30, jitter=0.005, rng=rng)
    low, high = percentile_bounds(run_aware_distribution(blocks, resamples=2000, rng=rng, cv_prior=0.04),
                                  confidence=0.9)
    within_low, within_high = percentile_bounds(
        run_aware_distribution(blocks, resamples=2000, rng=rng, cv_prior=0.04, between_runs=False), confidence=0.9)
    assert within_high / within_low < 1.01            # blocks of one run agree with each other
    assert high / low > 1.10                           # but the next run may land several per cent away


def test_ninety_percent_intervals_hold_the_true_mean_across_simulated_run_luck() -> None:
    """Runs whose luck has a 4 % CV: the two-run interval contains the true mean in about 90 % of trials."""
    rng = random.Random(7)
    hits = 0
    trials = 300
    for _ in range(trials):
        means = [100.0 * (1 + rng.gauss(0, 0.04)) for _ in range(2)]
        blocks = blocks_of_runs(means, per_run=4, jitter=0.01, rng=rng)
        low, high = percentile_bounds(run_aware_distribution(blocks, resamples=400, rng=rng, cv_prior=0.04),
                                      confidence=0.9)
        hits += low <= 100.0 <= high
    assert 0.82 <= hits / trials <= 0.99


def test_a_machine_a_hair_below_the_floor_is_not_certified() -> None:
    slo = Slo(throughput_min_units_per_s=100.0)
    race = Race([RaceCandidate("edge", CHEAP)], units=10_000, slo=slo, measure=MeasureRule(), resamples=500)
    rng = random.Random(3)
    for block in blocks_of_runs([99.74, 99.74], per_run=10, jitter=0.002, rng=rng):
        race.add_block("edge", block)
    standing = race.standings()[0]
    assert standing.throughput is not None and standing.throughput.point < 100.0 < standing.throughput.high
    assert standing.slo is Verdict.UNDECIDED          # the knife-edge: reported as not certified
    well_above = Race([RaceCandidate("ok", CHEAP)], units=10_000, slo=slo, measure=MeasureRule(), resamples=500)
    for block in blocks_of_runs([130.0, 131.0], per_run=10, jitter=0.002, rng=rng):
        well_above.add_block("ok", block)
    assert well_above.standings()[0].slo is Verdict.MET


def test_the_receipts_interval_is_the_run_aware_one() -> None:
    from vastui.bench.runs import run_aware_interval
    rng = random.Random(5)
    blocks = blocks_of_runs([100.0, 104.0], per_run=6, jitter=0.003, rng=rng)
    interval = run_aware_interval(blocks, cv_prior=0.04, seed="c1")
    assert interval.low < 100.0 and interval.high > 104.0 and interval.n == 12
    assert run_aware_interval(blocks, cv_prior=0.04, seed="c1") == interval   # reproducible from its seed
