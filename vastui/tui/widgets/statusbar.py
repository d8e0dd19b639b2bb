"""The status bar: money (credit, burn, runway), leaks, and how fresh each source is, with the API's last error.

It renders what it is given (``show``) and never fails on missing data: unknown figures read ``?``.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from vastui.tui.approval_desk import PendingDigest
from vastui.tui.health import Source, format_age
from vastui.tui.state import ConsoleState


def _money(value: float | None) -> str:
    return "?" if value is None else f"${value:,.2f}"


def status_text(state: ConsoleState, *, now: float, readonly: bool, scale: float = 1.0,
                pending: PendingDigest | None = None) -> Text:
    """Two lines: pending approvals (first, so a narrow terminal never cuts them), money and leaks; then freshness
    per source and the current API error, if any. On a scaled marketplace clock (a simulator) the first line says
    so: every duration shown is simulated time."""
    user = state.user
    burn = state.burn_usd_per_h
    runway = state.runway_h
    runway_text = "?" if runway is None else (f"{runway:,.1f}h" if runway < 48 else f"{runway / 24:,.0f}d")
    leaks = state.leak_count
    line = Text()
    if readonly:
        line.append("READ-ONLY ", style="bold reverse")
    if pending is not None:
        # short, so that at 80 columns the money still fits beside it; the footer and ^a say the rest
        line.append(f"⚑ {pending.count} TO APPROVE, oldest {format_age(pending.oldest_waited_s)}",
                    style="bold reverse yellow")
        line.append("  ")
    if scale != 1.0:
        line.append(f"sim ×{scale:g}", style="bold reverse")
        line.append(" ")
    line.append(f"credit {_money(user.credit if user else None)}  ")
    line.append(f"burn {'?' if burn is None else f'${burn:,.3f}/h'}  ")
    line.append(f"runway {runway_text}  ")
    leak_style = "bold red" if leaks else ""
    line.append(f"leaked {'?' if leaks is None else leaks}", style=leak_style)
    if state.leaks is not None and not state.leaks.is_complete:
        line.append(" (UNKNOWN)", style="bold yellow")
    if state.unowned_count:
        line.append(f" +{state.unowned_count} unowned")
    line.append("\n")
    for source in Source:
        health = state.health.get(source)
        if health is None:
            continue
        age = format_age(health.age_s(now))
        if health.is_stale(now):
            line.append(f"{source} STALE {age}", style="bold yellow")
        else:
            line.append(f"{source} {age}", style="dim")
        line.append("  ")
    errors = state.errors()
    if errors:
        source, error = errors[0]
        first = error.splitlines()[0] if error else "error"
        line.append(f"API error ({source}): {first[:120]}", style="bold red")
    return line


class StatusBar(Static):
    """Always visible at the bottom; the app calls ``show`` after every refresh and once a second."""

    DEFAULT_CSS = """
    StatusBar { height: 2; dock: bottom; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__("", id="status-bar", markup=False)
        self.plain_text = ""

    def show(self, state: ConsoleState, *, now: float, readonly: bool, scale: float = 1.0,
             pending: PendingDigest | None = None) -> None:
        text = status_text(state, now=now, readonly=readonly, scale=scale, pending=pending)
        self.plain_text = text.plain
        self.update(text)
