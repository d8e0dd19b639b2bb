"""The statistics a campaign runs after every block: the bootstrap interval, and one racing decision.

What it measures:
- ``vastui.bench.stats.bootstrap_ci`` with 2000 resamples on the throughputs of 30 blocks (a long measurement);
- ``vastui.bench.select.Race.decide`` on 4 candidates with 10 blocks each (the race at its first full decision,
  2000 resamples), on a fresh race each time so no cached distribution is reused.

Why these baselines: a percentile bootstrap is ``resamples`` medians of resampled data plus one sort, so a plain
median of the same 30 values (``vastui.bench.stats.median``, the statistic the bootstrap computes) is its unit of
work; the ratio is the cost in medians, and near the resample count is the floor. A decision is a handful of
bootstrap distributions (costs per candidate, ratios against the leader, Holm's tests); the least any decision
must do is one interval per candidate, so its baseline is four ``bootstrap_ci`` calls, one over each candidate's 10
blocks: the ratio is what the racing logic (ratios, Holm, SLO checks) costs on top of that floor.
Both must stay far below the 30 s of a block.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from timing import compare, duration, parse_options, ratio_line

from vastui.bench.cost import CostInputs
from vastui.bench.select import Race, RaceCandidate
from vastui.bench.stats import DEFAULT_RESAMPLES, Block, bootstrap_ci, median

BLOCK_S = 30.0
# Four hosts a few per cent to a third apart, noisy like cloud blocks: some are eliminated, some are not.
THETAS = {"h100-a": 100.0, "h100-b": 97.0, "a100": 80.0, "l40s": 66.0}
PRICES = {"h100-a": 2.4, "h100-b": 2.35, "a100": 1.95, "l40s": 1.8}
BLOCKS_PER_CANDIDATE = 10


def block(rng: random.Random, theta: float) -> Block:
    return Block(units=theta * BLOCK_S * (1.0 + rng.gauss(0.0, 0.03)), duration_s=BLOCK_S, steps=30)


def throughputs(rng: random.Random, n: int) -> list[float]:
    return [block(rng, 100.0).throughput_units_per_s for _ in range(n)]


def fresh_race(seed: int) -> Race:
    rng = random.Random(seed)
    race = Race([RaceCandidate(cid, CostInputs(price_per_hour_usd=PRICES[cid], startup_s=180.0)) for cid in THETAS],
                units=1_000_000, seed=seed)
    for _ in range(BLOCKS_PER_CANDIDATE):
        for cid, theta in THETAS.items():
            race.add_block(cid, block(rng, theta))
    return race


def decide_on_fresh_races(count: int) -> Callable[[], object]:
    """A callable that decides on the next of ``count`` races built beforehand (building is not timed)."""
    races = iter([fresh_race(seed) for seed in range(count)])
    return lambda: next(races).decide()


def main() -> None:
    options = parse_options(__doc__)
    repeats, loops = (3, 1) if options.quick else (15, 3)
    rng = random.Random(0)

    thirty = throughputs(rng, 30)
    interval = compare(lambda: [bootstrap_ci(thirty, resamples=DEFAULT_RESAMPLES, seed=i) for i in range(loops)],
                       lambda: [median(thirty) for _ in range(loops)],
                       repeats=repeats, ours_ops=loops, baseline_ops=loops)

    tens = [throughputs(rng, BLOCKS_PER_CANDIDATE) for _ in THETAS]
    decision = compare(decide_on_fresh_races(repeats + 1),
                       lambda: [bootstrap_ci(ten, resamples=DEFAULT_RESAMPLES) for ten in tens],
                       repeats=repeats)
    step = fresh_race(0).decide()
    print(f"# {DEFAULT_RESAMPLES} resamples, median of {repeats}; baselines: one median of the same 30 values, "
          f"one bootstrap_ci per candidate over its {BLOCKS_PER_CANDIDATE} blocks")
    print(ratio_line("stats.bootstrap_ci on 30 blocks vs plain median", interval))
    print(ratio_line(f"select.Race.decide {len(THETAS)}x{BLOCKS_PER_CANDIDATE} blocks vs {len(THETAS)} bootstrap_ci",
                     decision))
    print(f"# Race.decide: {duration(decision.ours_s)} per decide; eliminated "
          f"{[e.candidate_id for e in step.eliminated]}, leader {step.leader}, {step.reason}")


if __name__ == "__main__":
    main()
