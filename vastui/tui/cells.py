"""How numbers become cells: one place for units and for what a missing value looks like (``-``)."""

from __future__ import annotations

from vastui.tui.health import format_age


def num(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def usd(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"${value:,.{digits}f}"


def accrued_usd(value: float | None) -> str:
    """Money that accrues by the second: four decimals below $100, so a running instance's cost visibly moves
    between two refreshes (a $0.30/h instance adds $0.0008 in ten seconds); two above."""
    return usd(value, 4 if value is not None and abs(value) < 100 else 2)


def gib_from_mb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1000:.0f}"


def duration(seconds: float | None) -> str:
    """A remaining duration: ``3.5d``, ``7h``, ``-``."""
    if seconds is None:
        return "-"
    if seconds >= 86400:
        return f"{seconds / 86400:.1f}d"
    return format_age(seconds)
