"""Leaks: the leak watcher's latest report — each leaked or unowned instance with why, what it cost, what it burns —
and, greyed below them, what the console rented by hand (owned by its ad-hoc campaign, with its renter): those
become leaks only by the watcher's rules (``campaign/adhoc.py``).

``d`` destroys the marked (or cursor) leaks, through their own confirmation. The verdict line never says "no
leaks" about an incomplete listing.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from vastui.bench import billing
from vastui.campaign.adhoc import renter_of
from vastui.campaign.watch import Leak, LeakReport
from vastui.tui.cells import accrued_usd, leak_reason, usd
from vastui.tui.state import ConsoleState
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, KeyedTable, restyle
from vastui.vast.models import Instance

MARK = "●"
COLUMNS: tuple[tuple[str, str], ...] = (
    ("mark", " "), ("id", "id"), ("label", "label"), ("reason", "reason"), ("campaign", "campaign"),
    ("status", "status"), ("burn", "burn $/h"), ("accrued", "accrued"), ("detail", "detail"),
)
# dropped first to fit a narrow terminal: the reason, burn and accrued stay to the last
DROP_ORDER = ("detail", "campaign", "label", "status")


class LeaksView(ConsoleView):
    view_name = "leaks"
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("reason", "why it is a leak: its campaign finished, its deadline passed, or no campaign owns it"),
        ("burn $/h", "what it bills per hour while it stays"),
        ("accrued", "what it has billed so far"),
    )
    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset({"destroy"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "mark", "Mark"),
        Binding("d", "destroy", "Destroy"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.marked: set[int] = set()
        self.report: LeakReport | None = None
        self._state: ConsoleState | None = None

    def compose(self) -> ComposeResult:
        yield Static("Leaks", classes="view-title", id="leaks-title")
        yield Static("waiting for the first leak check…", id="leaks-summary", classes="warning-line", markup=False)
        yield KeyedTable(columns=COLUMNS, drop_order=DROP_ORDER, squeeze="reason", id="leaks-table")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#leaks-table", KeyedTable)

    def focus_main(self) -> None:
        focus_now(self.table)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        self._state = state
        report = state.leaks
        if report is None:
            return
        self.report = report
        owned = self._owned_by_hand(state, report)
        self.marked &= {leak.instance_id for leak in report.leaks} | {i.id for i in owned}
        rows = {str(leak.instance_id): self._cells(leak) for leak in report.leaks}
        rows |= {str(inst.id): self._owned_cells(inst, state, now) for inst in owned}
        self.table.sync(rows, list(rows))
        self.query_one("#leaks-summary", Static).update(report.summary())
        self.query_one("#leaks-title", Static).update(
            f"Leaks: {len(report.leaked)} leaked, {len(report.unowned)} unowned, verdict {report.verdict}"
            + (f"; {len(owned)} rented by hand, owned (greyed)" if owned else ""))

    @staticmethod
    def _owned_by_hand(state: ConsoleState, report: LeakReport) -> list[Instance]:
        """Listed instances of an ad-hoc campaign that the watcher does not call leaks."""
        page = state.instances
        if page is None:
            return []
        judged = {leak.instance_id for leak in report.leaks}
        return [inst for inst in page.listing.instances if inst.id not in judged
                and (intent := page.intents.get(inst.id)) is not None and renter_of(intent.campaign_id)]

    def _owned_cells(self, inst: Instance, state: ConsoleState, now: float) -> tuple[Cell, ...]:
        assert state.instances is not None
        intent = state.instances.intents[inst.id]
        accrued = None
        if inst.dph_total is not None and inst.start_date is not None:
            accrued = billing.accrued_usd(dph_total=inst.dph_total, start_at=inst.start_date, now=now)
        cells = (MARK if inst.id in self.marked else "", str(inst.id), inst.label or "-", "owned, not a leak",
                 f"{renter_of(intent.campaign_id)} {intent.campaign_id}", str(inst.actual_status or "provisioning"),
                 usd(inst.dph_total), accrued_usd(accrued),
                 "a leak only if its console dies, its deadline passes or it is stopped")
        return tuple(Text(str(c), style="dim") for c in cells)

    def _cells(self, leak: Leak) -> tuple[Cell, ...]:
        cells: tuple[Cell, ...] = (
            MARK if leak.instance_id in self.marked else "", str(leak.instance_id), leak.label or "-",
            leak_reason(leak.reason),
            " ".join(filter(None, (renter_of(leak.campaign_id), leak.campaign_id))) or "-", leak.status or "provisioning",
            usd(leak.burn_usd_per_h), accrued_usd(leak.accrued_usd), leak.detail)
        return cells if leak.is_unowned else tuple(restyle(c, "bold red") for c in cells)

    def action_mark(self) -> None:
        key = self.table.cursor_key
        if key is not None and self._state is not None:
            self.marked.symmetric_difference_update({int(key)})
            self.render_state(self._state, now=self.console.services.clock.now())

    def action_destroy(self) -> None:
        ids = sorted(self.marked)
        if not ids and (key := self.table.cursor_key) is not None:
            ids = [int(key)]
        page = self.console.state.instances
        targets: list[Instance] = []
        for instance_id in ids:
            inst = None if page is None else page.listing.find(instance_id)
            if inst is None:
                self.notify(f"instance {instance_id} is not in the latest listing; refresh first", severity="warning")
                return
            targets.append(inst)
        if targets:
            self.marked.clear()
            self.console.perform(lambda actions: actions.destroy(targets))
