"""Throughput's uncertainty across independent runs, not just across the blocks of one run.

Blocks of one run share that run's luck (clock boost, placement, noisy neighbours), so their spread understates how
far the next run — the production one — can land. The bootstrap here is two-level: blocks are resampled within
each run (the within-run part), and every replicate is scaled by a draw of the between-run error of the mean of
``k`` runs. That error's CV pools the spread of this candidate's own run medians (k - 1 degrees of freedom) with a
prior CV worth ``prior_weight`` runs, and is drawn from Student's t with the pooled degrees of freedom: with two
runs the interval is honest about how little two runs say; with many, the data dominate.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

from vastui.bench.stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, Block, Interval, median, percentile_bounds

PRIOR_WEIGHT = 3.0     # the prior between-run CV counts as this many degrees of freedom


def runs_of(blocks: Sequence[Block]) -> dict[int, list[float]]:
    """Block throughputs grouped by run, in order of first appearance."""
    grouped: dict[int, list[float]] = {}
    for block in blocks:
        grouped.setdefault(block.run, []).append(block.throughput_units_per_s)
    return grouped


def observed_run_cv(blocks: Sequence[Block]) -> float | None:
    """The spread of the runs' medians as a CV (their sample standard deviation over their mean); None with fewer
    than two runs, which say nothing about it."""
    medians = [median(values) for values in runs_of(blocks).values()]
    centre = statistics.fmean(medians) if medians else 0.0
    return statistics.stdev(medians) / centre if len(medians) >= 2 and centre > 0 else None


def between_run_cv(blocks: Sequence[Block], *, cv_prior: float,
                   prior_weight: float = PRIOR_WEIGHT) -> tuple[float, float]:
    """(pooled between-run CV of one run, its degrees of freedom) from the runs' medians and the prior."""
    k = len(runs_of(blocks))
    observed = observed_run_cv(blocks) or 0.0
    dof = prior_weight + max(0, k - 1)
    pooled = (prior_weight * cv_prior ** 2 + max(0, k - 1) * observed ** 2) / dof if dof > 0 else 0.0
    return math.sqrt(pooled), dof


T_POOL = 4001            # standard t draws kept per degrees of freedom (a prime: strides cycle through all)
_T_POOLS: dict[float, tuple[float, ...]] = {}


def _t_pool(dof: float) -> tuple[float, ...]:
    """Student-t draws for ``dof``, made once (seeded) and shared: a race prices thousands of replicates."""
    if dof not in _T_POOLS:
        rng = random.Random(f"t:{dof}")
        draws = []
        for _ in range(T_POOL):
            chi2 = rng.gammavariate(dof / 2.0, 2.0)
            draws.append(rng.gauss(0.0, 1.0) / math.sqrt(chi2 / dof) if chi2 > 0 else 0.0)
        _T_POOLS[dof] = tuple(draws)
    return _T_POOLS[dof]


def run_aware_distribution(blocks: Sequence[Block], *, resamples: int, rng: random.Random, cv_prior: float,
                           prior_weight: float = PRIOR_WEIGHT, between_runs: bool = True) -> tuple[float, ...]:
    """Bootstrap replicates of the median block throughput that carry between-run variation (only the
    within-run part when ``between_runs`` is False: what more blocks of the same runs could still narrow)."""
    if not blocks:
        raise ValueError("bootstrap of no blocks")
    groups = list(runs_of(blocks).values())
    cv, dof = between_run_cv(blocks, cv_prior=cv_prior, prior_weight=prior_weight)
    se = cv / math.sqrt(len(groups)) if between_runs else 0.0
    pool = _t_pool(dof) if se > 0 else ()
    offset, stride = rng.randrange(T_POOL), 1 + rng.randrange(T_POOL - 1)   # this distribution's own draws
    out = []
    for index in range(resamples):
        values = sorted(v for group in groups for v in rng.choices(group, k=len(group)))
        half = len(values) // 2
        middle = values[half] if len(values) % 2 else (values[half - 1] + values[half]) / 2.0
        factor = 1.0 + se * pool[(offset + index * stride) % T_POOL] if se > 0 else 1.0
        out.append(middle * max(factor, 0.05))
    return tuple(out)


def run_aware_interval(blocks: Sequence[Block], *, cv_prior: float, confidence: float = DEFAULT_CONFIDENCE,
                       resamples: int = DEFAULT_RESAMPLES, seed: int | str = 0) -> Interval:
    """The median block throughput with its run-aware percentile interval (what the race and the receipt show)."""
    distribution = run_aware_distribution(blocks, resamples=resamples, rng=random.Random(seed), cv_prior=cv_prior)
    low, high = percentile_bounds(distribution, confidence=confidence)
    return Interval(point=median([b.throughput_units_per_s for b in blocks]), low=low, high=high,
                    confidence=confidence, n=len(blocks))
