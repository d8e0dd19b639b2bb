"""Instances: every instance of the account (all pages), what it costs, and whether it is leaking.

A listing that failed part-way is shown as INCOMPLETE above the rows it did read, never as a shorter list.
Keys act on the marked rows (or the cursor row): destroy, stop, start, label, prepay, copy the ssh command, and
``l`` opens the logs pane, which keeps streaming the instance's logs while it is open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Log, Static

from vastui.bench import billing
from vastui.campaign.adhoc import renter_of
from vastui.campaign.watch import Leak, campaign_of_label
from vastui.tui.cells import accrued_usd, leak_reason, num, usd
from vastui.tui.dialogs.prompt import PromptScreen, ask_usd
from vastui.tui.health import format_age
from vastui.tui.messages import LogsFailed, LogsFetched
from vastui.tui.state import ConsoleState, InstancePage
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, KeyedTable, restyle
from vastui.vast.models import Instance, InstanceStatus

MARK = "●"
COLUMNS: tuple[tuple[str, str], ...] = (
    ("mark", " "), ("id", "id"), ("label", "label"), ("campaign", "campaign"), ("owner", "owner"), ("gpu", "GPU"),
    ("status", "status"), ("since", "in status"), ("dph", "$/h"), ("accrued", "accrued"),
    ("storage", "storage $/h"), ("deadline", "deadline"), ("leak", "leak"),
)
# dropped first to fit a narrow terminal: accrued, deadline and leak stay to the last
DROP_ORDER = ("storage", "label", "owner", "campaign", "since", "dph", "gpu")


# statuses an instance holds from its rent until it first runs: ``start_date`` is when they began
SINCE_RENT = frozenset({"provisioning", InstanceStatus.CREATED, InstanceStatus.LOADING, InstanceStatus.SCHEDULING})


@dataclass(frozen=True, slots=True)
class StatusSince:
    """Since when an instance is in ``status``, on the marketplace's clock: from its own figures (``uptime_mins``
    while running, ``start_date`` until it first runs) or from the listing that first showed the change; None
    when the console met it already in that status with nothing to date it (shown as at least since then)."""

    status: str
    since: float | None
    first_seen: float


def status_since(inst: Instance, previous: StatusSince | None, *, listed_at: float) -> StatusSince:
    status = str(inst.actual_status or "provisioning")
    if inst.actual_status is InstanceStatus.RUNNING and inst.uptime_mins is not None:
        return StatusSince(status, listed_at - 60.0 * inst.uptime_mins, listed_at)
    if previous is not None and previous.status == status:
        return previous
    if previous is not None:   # changed while the console watched: the listing that first showed it
        return StatusSince(status, listed_at, listed_at)
    if status in SINCE_RENT and inst.start_date is not None:
        return StatusSince(status, inst.start_date, listed_at)
    return StatusSince(status, None, listed_at)


def since_text(since: StatusSince, now: float) -> str:
    if since.since is None:
        return f"≥{format_age(max(0.0, now - since.first_seen))}"
    return format_age(max(0.0, now - since.since))


def merge_log(seen: list[str], text: str) -> list[str]:
    """The lines of ``text`` not yet in ``seen`` (the marketplace returns a tail that slides forward)."""
    lines = text.splitlines()
    if not seen:
        return lines
    for overlap in range(min(len(seen), len(lines)), 0, -1):
        if seen[-overlap:] == lines[:overlap]:
            return lines[overlap:]
    return lines


class InstancesView(ConsoleView):
    view_name = "instances"
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("campaign", "the campaign that owns the instance (its intent in the store, or its vastui label)"),
        ("owner", "the operator and host that rented it (a team's shared store says whose each is)"),
        ("in status", "how long it has been in its current status"),
        ("accrued", "what it has billed since it started, at its current $/h"),
        ("storage $/h", "what a stopped instance still bills for its disk"),
        ("deadline", "when its campaign must have destroyed it (PAST: overdue)"),
        ("leak", "ok, unowned (nobody in this store rented it) or LEAK and why (the leak watcher's verdict)"),
    )
    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset({"destroy", "stop", "start", "label", "prepay"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "mark", "Mark"),
        Binding("d", "destroy", "Destroy"),
        Binding("o", "stop", "Stop"),
        Binding("u", "start", "Start"),
        Binding("L", "label", "Label"),
        Binding("p", "prepay", "Prepay"),
        Binding("c", "copy_ssh", "Copy ssh"),
        Binding("l", "logs", "Logs"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.marked: set[int] = set()
        self.page: InstancePage | None = None
        self.leaks: dict[int, Leak] = {}
        self.logs_of: int | None = None
        self.log_lines: list[str] = []
        self._since: dict[int, StatusSince] = {}

    def compose(self) -> ComposeResult:
        yield Static("Instances", classes="view-title", id="instances-title")
        yield Static("", id="instances-warning", classes="warning-line", markup=False)
        yield KeyedTable(columns=COLUMNS, drop_order=DROP_ORDER, squeeze="leak", id="instances-table")
        yield Log(id="logs-pane", max_lines=5000)

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#instances-table", KeyedTable)

    def focus_main(self) -> None:
        focus_now(self.table)

    def instance(self, instance_id: int) -> Instance | None:
        return None if self.page is None else self.page.listing.find(instance_id)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        page = state.instances
        if page is None:
            return
        self.page = page
        self.leaks = {leak.instance_id: leak for leak in state.leaks.leaks} if state.leaks else {}
        listing = page.listing
        self._since = {inst.id: status_since(inst, self._since.get(inst.id), listed_at=page.at)
                       for inst in listing.instances}
        ids = [inst.id for inst in listing.instances]
        self.marked &= set(ids)
        rows = {str(inst.id): self._cells(inst, state, now) for inst in listing.instances}
        self.table.sync(rows, [str(i) for i in ids])
        warning = "" if listing.is_complete else (
            f"INCOMPLETE: {len(ids)} instance(s) read before the listing failed ({listing.error}); "
            "more may exist and be billing")
        if listing.unreadable:
            odd = "; ".join(row.describe() for row in listing.unreadable[:3])
            warning = " ".join(filter(None, (warning, f"{len(listing.unreadable)} row(s) not shown: {odd}")))
        self.query_one("#instances-warning", Static).update(warning)
        complete = "" if listing.is_complete else " (INCOMPLETE)"
        self.query_one("#instances-title", Static).update(
            f"Instances: {len(ids)}{complete}, {len(self.marked)} marked")

    def _cells(self, inst: Instance, state: ConsoleState, now: float) -> tuple[Cell, ...]:
        assert self.page is not None
        intent = self.page.intents.get(inst.id)
        campaign = intent.campaign_id if intent is not None else campaign_of_label(inst.label)
        since = self._since[inst.id]
        accrued = None
        if inst.dph_total is not None and inst.start_date is not None:
            accrued = billing.accrued_usd(dph_total=inst.dph_total, start_at=inst.start_date, now=now)
        stopped = InstanceStatus.STOPPED in (inst.actual_status, inst.intended_status)
        deadline = "-"
        if intent is not None and intent.deadline_at is not None:
            left = intent.deadline_at - now
            deadline = f"in {format_age(left)}" if left >= 0 else f"PAST {format_age(-left)}"
        leak = self.leaks.get(inst.id)
        if leak is not None:
            verdict: Cell = "unowned" if leak.is_unowned else leak_reason(leak.reason, prefix="LEAK: ")
        elif state.leaks is None:
            verdict = "…"
        else:
            verdict = "ok" if state.leaks.is_complete else "?"
        cells: list[Cell] = [
            MARK if inst.id in self.marked else "", str(inst.id), inst.label or "-",
            renter_of(campaign) or campaign or "-",
            intent.by.short if intent is not None and intent.by is not None else "-",
            f"{num(inst.num_gpus, 'd')}x {inst.gpu_name or '?'}", since.status, since_text(since, now),
            usd(inst.dph_total), accrued_usd(accrued), usd(inst.storage_total_cost, 4) if stopped else "-",
            deadline, verdict,
        ]
        if leak is not None and not leak.is_unowned:
            return tuple(restyle(c, "bold red") for c in cells)
        return tuple(cells)

    # --- keys -------------------------------------------------------------------------------------------------------

    def _targets(self) -> list[Instance]:
        ids = sorted(self.marked)
        if not ids and (key := self.table.cursor_key) is not None:
            ids = [int(key)]
        return [inst for i in ids if (inst := self.instance(i)) is not None]

    def _cursor_instance(self) -> Instance | None:
        key = self.table.cursor_key
        return None if key is None else self.instance(int(key))

    def action_mark(self) -> None:
        key = self.table.cursor_key
        if key is not None:
            self.marked.symmetric_difference_update({int(key)})
            self.render_state(self.console.state, now=self.console.services.clock.now())

    def action_destroy(self) -> None:
        targets = self._targets()
        if targets:
            self.marked.clear()
            self.console.perform(lambda actions: actions.destroy(targets))

    def action_stop(self) -> None:
        targets = self._targets()
        if targets:
            self.console.perform(lambda actions: actions.stop(targets))

    def action_start(self) -> None:
        targets = self._targets()
        if targets:
            self.console.perform(lambda actions: actions.start(targets))

    def action_label(self) -> None:
        inst = self._cursor_instance()
        if inst is None:
            return

        def chosen(text: str | None) -> None:
            if text is not None and text.strip():
                self.console.perform(lambda actions: actions.label(inst, text.strip()))

        self.app.push_screen(PromptScreen(question=f"New label for instance {inst.id}", value=inst.label or ""),
                             callback=chosen)

    def action_prepay(self) -> None:
        inst = self._cursor_instance()
        if inst is None:
            return

        def chosen(amount: float) -> None:
            user = self.console.state.user
            credit = None if user is None else user.credit
            self.console.perform(lambda actions: actions.prepay(inst, amount, credit_usd=credit))

        ask_usd(self, question=f"Prepay how many USD onto instance {inst.id}?", placeholder="e.g. 25.00", then=chosen)

    def action_copy_ssh(self) -> None:
        inst = self._cursor_instance()
        endpoint = None if inst is None else inst.ssh_endpoint()
        if inst is None or endpoint is None:
            self.notify("no ssh endpoint yet", severity="warning")
            return
        command = f"ssh -p {endpoint[1]} root@{endpoint[0]}"
        self.app.copy_to_clipboard(command)
        self.notify(f"copied: {command}")

    def action_logs(self) -> None:
        pane = self.query_one("#logs-pane", Log)
        inst = self._cursor_instance()
        if pane.has_class("-open") and (inst is None or inst.id == self.logs_of):
            pane.remove_class("-open")
            self.logs_of = None
            self.console.stop_logs()
            return
        if inst is None:
            return
        pane.clear()
        self.log_lines = []
        self.logs_of = inst.id
        pane.border_title = f"logs of instance {inst.id}"
        pane.add_class("-open")
        self.console.start_logs(inst.id)

    def show_logs(self, message: LogsFetched | LogsFailed) -> None:
        if message.instance_id != self.logs_of:
            return
        pane = self.query_one("#logs-pane", Log)
        if isinstance(message, LogsFailed):
            pane.border_subtitle = f"error: {message.error[:100]}"
            return
        pane.border_subtitle = ""
        new = merge_log(self.log_lines, message.text)
        if new:
            self.log_lines.extend(new)
            pane.write_lines(new)
