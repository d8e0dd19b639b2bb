"""The throughput plot's time axis and colours.

The axis shows measured time only: where nothing was measured for a while (a campaign waiting for an approval, a
host pulling its image) the gap is cut down to one ordinary step, and the tick labels keep the real minutes, so a
jump in the labels is where time was cut. Colours: one per candidate from a palette readable on both themes'
backgrounds and distinct from each other and from the elimination marker's red.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Rgb = tuple[int, int, int]

# Okabe–Ito-like hues of middle lightness (readable on a dark and on a light background), no red, no yellow
CANDIDATE_COLOURS: tuple[Rgb, ...] = (
    (0, 114, 178), (230, 159, 0), (0, 158, 115), (204, 121, 167), (86, 180, 233), (140, 86, 75), (128, 128, 0),
    (117, 112, 179),
)
ELIMINATED_COLOUR: Rgb = (220, 20, 60)
MIN_CUT_MIN = 1.0          # a pause shorter than this many minutes is kept as it was
CUT_FACTOR = 4.0           # ... and so is one shorter than this many ordinary steps between measurements


def colour_of(index: int) -> Rgb:
    return CANDIDATE_COLOURS[index % len(CANDIDATE_COLOURS)]


def hex_of(rgb: Rgb) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


@dataclass(frozen=True, slots=True)
class Cut:
    at_min: float          # real minutes where the cut gap begins (the last measurement before it)
    removed_min: float     # how many minutes were taken out


@dataclass(frozen=True, slots=True)
class TimeAxis:
    """Maps real minutes onto the plot's x (measured time, idle gaps cut)."""

    cuts: tuple[Cut, ...]
    segments: tuple[tuple[float, float], ...]     # real (start, end) minutes of each stretch kept whole

    def x(self, minute: float) -> float:
        shift = 0.0
        for cut in self.cuts:
            if minute <= cut.at_min:
                break
            shift += min(cut.removed_min, minute - cut.at_min)
        return minute - shift

    def ticks(self) -> tuple[list[float], list[str]]:
        """Tick positions and their real-minute labels: each kept stretch's start and end."""
        real = sorted({round(t, 2) for segment in self.segments for t in segment})
        return [self.x(t) for t in real], [f"{t:.1f}".rstrip("0").rstrip(".") for t in real]


def time_axis(times_min: Sequence[float]) -> TimeAxis:
    """The axis for measurements taken at ``times_min`` (real minutes since the start)."""
    times = sorted(set(times_min))
    if len(times) < 2:
        return TimeAxis(cuts=(), segments=((times[0], times[0]),) if times else ())
    steps = [b - a for a, b in zip(times, times[1:], strict=False)]
    step = statistics.median(steps)
    threshold = max(MIN_CUT_MIN, CUT_FACTOR * step)
    cuts: list[Cut] = []
    segments: list[tuple[float, float]] = []
    start = times[0]
    for before, after in zip(times, times[1:], strict=False):
        if after - before > threshold:
            cuts.append(Cut(at_min=before, removed_min=after - before - step))
            segments.append((start, before))
            start = after
    segments.append((start, times[-1]))
    return TimeAxis(cuts=tuple(cuts), segments=tuple(segments))
