"""Activity: the audit log, newest first — every approval given, every refusal and expiry, every mutating call
(about to go out, and how it ended), whoever asked: the console's dialogs, a campaign's queue, a headless command.

The records are read from the store by the console's worker; without a store there is no log to show.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from vastui.approval import AuditKind, AuditRecord
from vastui.tui.health import format_age
from vastui.tui.state import ConsoleState
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, KeyedTable

COLUMNS: tuple[tuple[str, str], ...] = (
    ("at", "when (UTC)"), ("age", "ago"), ("what", "what"), ("action", "action"), ("target", "target"),
    ("campaign", "campaign"), ("by", "by"), ("operator", "operator"), ("outcome", "outcome"),
)
# dropped first to fit a narrow terminal: what happened, to what, and how it ended stay to the last
DROP_ORDER = ("operator", "by", "campaign", "at", "action")
NOTES: tuple[tuple[str, str], ...] = (
    ("what", "approved / refused / expired (an approval's answer), sending (a mutating call about to go out), "
             "done (the call's outcome)"),
    ("target", "what the action is on: offer:ID for a rent, instance:ID for the rest"),
    ("by", "who granted the approval (the console dialog, a campaign's queue, a policy)"),
    ("operator", "the operator and host whose process wrote the record (a team's store holds everyone's)"),
)


def what_happened(record: AuditRecord) -> Cell:
    """The record's kind in an operator's words; refusals and expiries stand out."""
    if record.kind is AuditKind.APPROVAL:
        return Text("approved", style="green")
    if record.kind is AuditKind.DECLINED:
        expired = "expired" in record.outcome
        return Text("expired" if expired else "refused", style="yellow" if expired else "bold red")
    return "sending" if record.kind is AuditKind.SENDING else "done"


def record_keys(records: tuple[AuditRecord, ...]) -> list[str]:
    """Row keys that stay the same while newer records arrive above them (twins get a counter)."""
    keys: list[str] = []
    seen: dict[str, int] = {}
    for r in reversed(records):                 # oldest first, so a twin's counter does not shift
        base = f"{r.at:.6f}|{r.kind}|{r.action}|{r.target}|{r.approval_id}|{r.outcome}"
        seen[base] = seen.get(base, 0) + 1
        keys.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return keys[::-1]


def activity_cells(record: AuditRecord, *, now: float) -> tuple[Cell, ...]:
    at = datetime.fromtimestamp(record.at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    return (at, format_age(now - record.at), what_happened(record), str(record.action).replace("_", " "),
            record.target, record.campaign_id or "-", record.granted_by or "-", record.by or "-", record.outcome)


class ActivityView(ConsoleView):
    view_name = "activity"
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = NOTES

    def compose(self) -> ComposeResult:
        yield Static("Activity: reading the audit log…", id="activity-title", classes="view-title", markup=False)
        yield KeyedTable(columns=COLUMNS, drop_order=DROP_ORDER, squeeze="outcome", id="activity-table")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#activity-table", KeyedTable)

    def focus_main(self) -> None:
        focus_now(self.table)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        title = self.query_one("#activity-title", Static)
        page = state.activity
        if page is None:
            if not self.console.has_store:
                title.update("Activity: no store, so no audit log to show")
            return
        records = page.records          # newest first
        keys = record_keys(records)
        self.table.sync({k: activity_cells(r, now=now) for k, r in zip(keys, records, strict=True)}, keys)
        refused = sum(1 for r in records if r.kind is AuditKind.DECLINED)
        title.update(f"Activity: the latest {len(records)} audit record(s), newest first — {refused} refused or "
                     f"expired")
