"""How campaign figures become cells: costs per 1k accepted units with their interval, times relative to the
campaign's start, phases, and unicode sparklines — one place, so every campaign view writes them alike."""

from __future__ import annotations

import math
from collections.abc import Sequence

from vastui.events import Band
from vastui.tui.health import format_age

SPARK = "▁▂▃▄▅▆▇█"
PER = 1000      # costs are shown per 1k accepted units


def per_1k(band: Band | None) -> str:
    """``$0.412 [0.398–0.431]`` (three significant digits) per 1k accepted units; ``-`` unknown; ``∞`` for a failed candidate."""
    if band is None:
        return "-"
    if not math.isfinite(band.point):
        return "∞"
    high = f"{PER * band.high:.3g}" if math.isfinite(band.high) else "∞"
    return f"${PER * band.point:.3g} [{PER * band.low:.3g}–{high}]"


def cost_per_1k(band: Band | None, *, is_measured: bool) -> str:
    """A measured cost with its interval (``per_1k``); a prior as one marked number, never as an interval:
    ``~$1.42 prior``. Nothing measured means there is no interval to show."""
    if is_measured or band is None or not math.isfinite(band.point):
        return per_1k(band)
    return f"~${PER * band.point:.3g} prior"


def throughput_cell(units_per_s: float | None, *, is_measured: bool) -> str:
    """Units per second, marked ``~… prior`` when it is the plan's prior rather than a measurement."""
    if units_per_s is None:
        return "-"
    return f"{units_per_s:,.0f}" if is_measured else f"~{units_per_s:,.0f} prior"


def since_start(at: float | None, start: float | None) -> str:
    """``+4m12s`` after the campaign started; ``-`` when unknown."""
    if at is None or start is None:
        return "-"
    seconds = max(0.0, at - start)
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"+{hours}h{minutes:02d}m" if hours else f"+{minutes}m{secs:02d}s"


def span(seconds: float | None) -> str:
    return "-" if seconds is None else format_age(max(0.0, seconds))


def pct(share: float | None) -> str:
    """A share (0..1) as a percentage."""
    return "-" if share is None else f"{100 * share:.0f} %"


def spark(values: Sequence[float | None], *, width: int, top: float, bottom: float = 0.0) -> str:
    """The last ``width`` values as a sparkline scaled to ``bottom..top`` (a gap for a missing reading)."""
    shown = list(values)[-width:]
    cells = []
    for value in shown:
        if value is None or top <= bottom:
            cells.append(" ")
            continue
        level = min(len(SPARK) - 1, max(0, int((value - bottom) / (top - bottom) * (len(SPARK) - 1) + 0.5)))
        cells.append(SPARK[level])
    return "".join(cells).rjust(width)


def short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
