"""Offers: a live table of the marketplace's offers, filtered with the ``vastai search offers`` language.

Rows are keyed by offer id and refreshed in place; marks, cursor and scroll survive refreshes. The filter bar takes
``QUERY [-o ORDER]``; a bad query is shown under the bar with a caret at the bad column and the table keeps the
last good results. ``s`` sorts by the next column, ``S`` reverses, space marks, ``r`` rents what is marked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Input, Static

from vastui.errors import QueryError
from vastui.store.records import BadHost, HostKnowledge
from vastui.tui.actions import ConsoleActions, Outcome
from vastui.tui.cells import duration, gib_from_mb, num
from vastui.tui.health import format_age
from vastui.tui.knowledge import MeasuredCost, measured_cost
from vastui.tui.state import ConsoleState, OfferPage
from vastui.tui.view_memory import ViewMemo
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, Forms, KeyedTable
from vastui.vast.models import Offer
from vastui.vast.query import build_search_body

SortValue = Callable[[Offer, "OffersView"], float | str]
MARK = "●"

COLUMNS: tuple[tuple[str, str], ...] = (
    ("mark", " "), ("id", "id"), ("gpu", "GPU"), ("n", "n"), ("dph", "$/h"), ("dlperf", "dlperf"),
    ("dlperf_usd", "dlperf/$"), ("reliability", "reliab"), ("inet", "inet ↓/↑"), ("pcie", "PCIe GB/s"),
    ("cpu", "CPU"), ("ram", "RAM GB"), ("disk", "disk GB"), ("location", "location"), ("max_dur", "max dur"),
    ("measured", "measured $/1k"), ("bad", "bad host"),
)
# dropped first to fit a narrow terminal: price, measured cost and a bad host stay to the last
DROP_ORDER = ("max_dur", "pcie", "disk", "cpu", "ram", "inet", "dlperf", "location", "reliability", "dlperf_usd")


def _f(value: float | None) -> float:
    return float("-inf") if value is None else value


SORT_KEYS: dict[str, SortValue] = {
    "id": lambda o, v: o.id, "gpu": lambda o, v: o.gpu_name, "n": lambda o, v: o.num_gpus,
    "dph": lambda o, v: o.dph_total, "dlperf": lambda o, v: _f(o.dlperf),
    "dlperf_usd": lambda o, v: _f(o.dlperf_per_dphtotal), "reliability": lambda o, v: _f(o.reliability),
    "inet": lambda o, v: _f(o.inet_down), "pcie": lambda o, v: _f(o.pcie_bw),
    "cpu": lambda o, v: _f(o.cpu_cores_effective), "ram": lambda o, v: _f(o.cpu_ram),
    "disk": lambda o, v: _f(o.disk_space), "location": lambda o, v: o.geolocation or "",
    "max_dur": lambda o, v: _f(o.duration),
    "measured": lambda o, v: _f(m.median_usd_per_1k) if (m := v.measured(o)) else float("inf"),
    "bad": lambda o, v: 1 if o.machine_id in v.bad_hosts else 0,
}
SORTABLE = tuple(key for key, _ in COLUMNS if key in SORT_KEYS)


def split_filter(text: str) -> tuple[str, str | None]:
    """``"gpu_name=RTX_4090 -o dph+"`` -> (``"gpu_name=RTX_4090"``, ``"dph+"``); the order is optional."""
    words = text.split()
    if "-o" in words:
        at = words.index("-o")
        order = words[at + 1] if at + 1 < len(words) else ""
        return " ".join(words[:at] + words[at + 2:]), order
    return text.strip(), None


class OffersView(ConsoleView):
    view_name = "offers"
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("●", "marked (space); r rents the marked offers, or the one under the cursor"),
        ("$/h", "what the offer bills per hour, GPUs, storage and bandwidth included (dph_total)"),
        ("dlperf/$", "the provider's deep-learning score per $/h: a prior, not a measurement"),
        ("reliab", "the host's reliability score (0–1)"),
        ("measured $/1k", "your workload's measured cost per 1,000 units on this host: median [range], runs, age"),
        ("bad host", "a host vastui caught misbehaving (wrong output, died), with the reason and until when"),
        ("▲ ▼", "the column sorted by (s: next column, S: reverse); the order is remembered"),
    )
    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset({"rent"})
    FOCUS_ACTIONS: ClassVar[frozenset[str]] = frozenset({"filter"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", key_display="/", priority=True),
        Binding("space", "mark", "Mark"),
        Binding("r", "rent", "Rent marked"),
        Binding("s", "sort", "Sort", tooltip="sort by the next column"),
        Binding("S", "reverse_sort", "Reverse", tooltip="reverse the sort"),
        Binding("escape", "escape", "Leave the filter / unmark all", show=False, priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.marked: set[int] = set()
        self.sort_column: str | None = None
        self.sort_reverse = False
        self.page: OfferPage | None = None
        self.bad_hosts: dict[int, BadHost] = {}
        self.knowledge: dict[tuple[int, str, int], HostKnowledge] = {}
        self.query_error: QueryError | None = None
        self._now = 0.0

    def compose(self) -> ComposeResult:
        yield Static("Offers", classes="view-title", id="offers-title")
        yield Input(placeholder="filter: gpu_name=RTX_4090 num_gpus>=2 reliability>0.98 -o dph+",
                    id="offers-filter", classes="filter-bar")
        yield Static("", id="offers-error", classes="inline-error", markup=False)
        yield KeyedTable(columns=COLUMNS, drop_order=DROP_ORDER, squeeze="bad", id="offers-table")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#offers-table", KeyedTable)

    def focus_main(self) -> None:
        focus_now(self.table)

    def on_mount(self) -> None:
        """Take back the filter and sort this view had when the console last closed."""
        memo = self.console.memory.recall(self.view_name)
        if memo.sort in SORT_KEYS:
            self.sort_column, self.sort_reverse = memo.sort, memo.reverse
        if memo.filter:
            self.query_one("#offers-filter", Input).value = memo.filter
            self.apply_filter(memo.filter)

    def _remember(self) -> None:
        self.console.memory.remember(self.view_name, ViewMemo(
            filter=self.query_one("#offers-filter", Input).value.strip(), sort=self.sort_column,
            reverse=self.sort_reverse))

    def measured(self, offer: Offer) -> MeasuredCost | None:
        k = self.knowledge.get((offer.machine_id, offer.gpu_name, offer.num_gpus))
        return None if k is None else measured_cost(k, dph_total=offer.dph_total, now=self._now)

    # --- rendering --------------------------------------------------------------------------------------------------

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        page = state.offers
        self._now = now
        if page is None:
            return
        self.page = page
        self.bad_hosts = page.bad_hosts
        self.knowledge = page.knowledge
        offers = page.offers
        if self.sort_column is not None:
            key = SORT_KEYS[self.sort_column]
            offers = tuple(sorted(offers, key=lambda o: key(o, self), reverse=self.sort_reverse))
        self.marked &= {o.id for o in page.offers}
        rows = {str(o.id): self._cells(o) for o in offers}
        self.table.show_sort(self.sort_column, reverse=self.sort_reverse)
        self.table.sync(rows, [str(o.id) for o in offers])
        sort = "" if self.sort_column is None else f"  sorted by {self.sort_column}{'-' if self.sort_reverse else '+'}"
        self.query_one("#offers-title", Static).update(
            f"Offers: {len(offers)} shown, {len(self.marked)} marked{sort}")

    def _cells(self, o: Offer) -> tuple[Cell, ...]:
        m = self.measured(o)
        measured = "-" if m is None else (f"{m.median_usd_per_1k:.4f} [{m.low_usd_per_1k:.4f}–{m.high_usd_per_1k:.4f}]"
                                          f" n={m.runs} {format_age(m.age_s)}")
        bad = self.bad_hosts.get(o.machine_id)
        bad_cell: Cell = ""
        if bad is not None:   # squeezed, the verdict stays whole: "BAD until 6d", "BAD" (the reason at a wider width)
            until = "" if bad.expires_at is None else f" until {format_age(bad.expires_at - self._now)}"
            bad_cell = Forms(Text(f"BAD {bad.reason}{until}", style="bold red"),
                             (Text(f"BAD{until}", style="bold red"), Text("BAD", style="bold red")))
        return (MARK if o.id in self.marked else "", str(o.id), o.gpu_name, str(o.num_gpus), f"{o.dph_total:.3f}",
                num(o.dlperf, ".1f"), num(o.dlperf_per_dphtotal, ".1f"), num(o.reliability, ".3f"),
                f"{num(o.inet_down, '.0f')}/{num(o.inet_up, '.0f')}", num(o.pcie_bw, ".1f"),
                num(o.cpu_cores_effective, ".0f"), gib_from_mb(o.cpu_ram), num(o.disk_space, ".0f"),
                o.geolocation or "-", duration(o.duration), measured, bad_cell)

    def rerender(self) -> None:
        self.render_state(self.console.state, now=self.console.services.clock.now())

    # --- keys -------------------------------------------------------------------------------------------------------

    def action_filter(self) -> None:
        focus_now(self.query_one("#offers-filter", Input))

    @on(Input.Submitted, "#offers-filter")
    def _filter(self, event: Input.Submitted) -> None:
        event.stop()
        if self.apply_filter(event.value):
            self._remember()
            self.focus_main()

    def apply_filter(self, text: str) -> bool:
        """Search with ``text`` (``QUERY [-o ORDER]``); False, with the error shown under the bar, when it is bad."""
        query, order = split_filter(text)
        settings = self.console.settings
        error = self.query_one("#offers-error", Static)
        try:
            body = build_search_body(query, order=order or settings.offers_order, limit=settings.offers_limit)
        except QueryError as exc:
            self.query_error = exc
            pointer = " " * (exc.column - 1) + "^"
            error.update(f"{exc.query}\n{pointer} {exc.reason} (column {exc.column})")
            return False
        self.query_error = None
        error.update("")
        if order:
            self.sort_column = None  # the server's order
        self.console.set_offers_query(body)
        return True

    def action_mark(self) -> None:
        key = self.table.cursor_key
        if key is None:
            return
        offer_id = int(key)
        self.marked.symmetric_difference_update({offer_id})
        self.rerender()

    def action_escape(self) -> None:
        """Escape leaves the filter bar for the table (the query stays as typed); in the table it unmarks all."""
        if self.query_one("#offers-filter", Input).has_focus:
            self.focus_main()
            return
        self.marked.clear()
        self.rerender()

    def action_sort(self) -> None:
        """Sort by the next column, ascending (the first press: by id)."""
        at = SORTABLE.index(self.sort_column) + 1 if self.sort_column in SORTABLE else 0
        self.sort_by(SORTABLE[at % len(SORTABLE)])

    def action_reverse_sort(self) -> None:
        self.sort_by(self.sort_column or SORTABLE[0], reverse=not self.sort_reverse)

    def sort_by(self, column: str, *, reverse: bool = False) -> None:
        if column not in SORT_KEYS:
            self.notify(f"cannot sort by {column!r}", severity="warning")
            return
        self.sort_column, self.sort_reverse = column, reverse
        self._remember()
        self.rerender()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column in SORT_KEYS:
            self.sort_by(column, reverse=column == self.sort_column and not self.sort_reverse)

    def action_rent(self) -> None:
        ids = sorted(self.marked)
        if not ids and (key := self.table.cursor_key) is not None:
            ids = [int(key)]
        offers = [o for i in ids if (o := self.console.offer_by_id(i)) is not None]
        if not offers:
            self.notify("mark offers with space first", severity="warning")
            return
        self.console.perform(lambda actions: self._rent(actions, offers))

    async def _rent(self, actions: ConsoleActions, offers: list[Offer]) -> Outcome:
        """Rent; the offers that became instances are unmarked (an offer that comes back later is not)."""
        outcome = await actions.rent(offers)
        if outcome.offers_rented:
            self.marked -= set(outcome.offers_rented)
            self.rerender()
        return outcome
