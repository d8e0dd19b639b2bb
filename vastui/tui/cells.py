"""How numbers become cells: one place for units and for what a missing value looks like (``-``)."""

from __future__ import annotations

from vastui.campaign.watch import REASON_TEXT, LeakReason
from vastui.tui.health import format_age
from vastui.tui.widgets.keyed_table import Forms

# a leak's reason in a few words, for a table squeezed by a narrow terminal (the full text is REASON_TEXT)
REASON_SHORT: dict[LeakReason, str] = {
    LeakReason.CAMPAIGN_FINISHED: "campaign finished",
    LeakReason.CAMPAIGN_CRASHED: "campaign crashed",
    LeakReason.CAMPAIGN_UNKNOWN: "unknown campaign",
    LeakReason.PAST_DEADLINE: "past deadline",
    LeakReason.STOPPED_BILLING: "stopped, storage bills",
    LeakReason.UNOWNED: "not vastui's",
}


def leak_reason(reason: LeakReason, *, prefix: str = "") -> Forms:
    """A leak's reason, whole or in a few words when the column is squeezed; ``prefix`` (``LEAK: ``) stays, and
    alone it is the shortest form."""
    shortest = (prefix.rstrip(": "),) if prefix else ()
    return Forms(prefix + REASON_TEXT[reason], (prefix + REASON_SHORT[reason], *shortest))


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
