"""How the benchmarks time things and how they print what they found.

Every figure is a median over repetitions of ``time.perf_counter``, and every figure comes with a baseline measured in
the same run, interleaved with it (ours, baseline, ours, baseline, ...), so a busy machine slows both alike and the
ratio stays meaningful where the absolute numbers do not. Each repetition runs the work ``ops`` times (or does ``ops``
units of work) and is divided by ``ops``, so fast operations sit far above the timer's resolution.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Comparison:
    """Median seconds per op of the code under test and of its baseline, over the same repetitions."""

    ours_s: float
    baseline_s: float

    @property
    def ratio(self) -> float:
        return self.ours_s / self.baseline_s


def compare(ours: Callable[[], object], baseline: Callable[[], object], *, repeats: int, ours_ops: int = 1,
            baseline_ops: int = 1) -> Comparison:
    """Time ``ours`` and ``baseline`` alternately ``repeats`` times after one untimed warm-up call each."""
    ours()
    baseline()
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(repeats):
        mine.append(_timed(ours) / ours_ops)
        theirs.append(_timed(baseline) / baseline_ops)
    return Comparison(statistics.median(mine), statistics.median(theirs))


async def compare_async(ours: Callable[[], Awaitable[object]], baseline: Callable[[], Awaitable[object]], *,
                        repeats: int, ours_ops: int = 1, baseline_ops: int = 1) -> Comparison:
    """``compare`` for coroutines, awaited on the running loop."""
    await ours()
    await baseline()
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(repeats):
        mine.append(await _timed_async(ours) / ours_ops)
        theirs.append(await _timed_async(baseline) / baseline_ops)
    return Comparison(statistics.median(mine), statistics.median(theirs))


def _timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


async def _timed_async(work: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start


def duration(seconds: float) -> str:
    """A duration with three significant digits in the unit that fits (ns, µs, ms, s)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def ratio_line(name: str, comparison: Comparison) -> str:
    """``name: X per op (baseline Y per op) -> ratio Z×``; Z is ours / baseline, below 1 when ours is faster."""
    return (f"{name}: {duration(comparison.ours_s)} per op (baseline {duration(comparison.baseline_s)} per op) "
            f"-> ratio {_ratio(comparison.ratio)}×")


def rate_line(name: str, comparison: Comparison, *, unit: str) -> str:
    """The same comparison as a rate (ops per second); this ratio is baseline time / ours, above 1 when faster."""
    ours = 1.0 / comparison.ours_s
    base = 1.0 / comparison.baseline_s
    return f"{name}: {ours:,.0f} {unit} (baseline {base:,.0f} {unit}) -> ratio {_ratio(ours / base)}×"


def _ratio(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def parse_options(description: str | None) -> argparse.Namespace:
    """The one flag every benchmark takes: ``--quick`` for tiny sizes (the smoke test; figures are not meaningful)."""
    parser = argparse.ArgumentParser(description=(description or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few repetitions: checks it runs")
    return parser.parse_args()
