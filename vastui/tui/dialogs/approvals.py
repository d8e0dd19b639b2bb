"""The approvals pop-up: a followed campaign's pending requests with their facts (what, offer or instance, price per
hour, cost cap, how long it has waited, when it expires), and the ones that expired unanswered, marked so.

``a`` (or Approve) grants the highlighted request, ``x`` (or Refuse) refuses it; an expired one cannot be approved.
Close (focused first is the table, Escape closes) leaves everything as it is. Times are the operator's wall time.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from vastui.campaign.broker import PendingApproval
from vastui.tui.approval_desk import ApprovalDesk
from vastui.tui.campaign_cells import span
from vastui.tui.cells import usd
from vastui.tui.widgets.keyed_table import Cell, KeyedTable

COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"), ("what", "what"), ("where", "target"), ("gpu", "gpu"), ("dph", "$/h"),
    ("cap", "cost cap"), ("waited", "waited"), ("expires", "expires in"),
)
VERBS = {"create_instance": "rent", "destroy_instance": "destroy", "stop_instance": "stop",
         "start_instance": "start", "label_instance": "label", "prepay_instance": "prepay"}
EXPIRED_KEY = "expired:"
REFRESH_S = 0.5


def _where(p: PendingApproval) -> str:
    if p.offer_id is not None:
        return f"offer {p.offer_id}"
    return f"instance {p.instance_id}" if p.instance_id is not None else p.target


def row_cells(p: PendingApproval, *, wall_now: float, expired: bool) -> tuple[Cell, ...]:
    gpu = f"{p.gpu_name} ×{p.num_gpus}" if p.gpu_name else "-"
    expires: Cell = (Text("EXPIRED", style="bold red") if expired or p.is_expired(wall_now)
                     else span(p.expires_in_s(wall_now)))
    waited = span(p.expires_wall_s - p.asked_wall_s) if expired else span(p.waited_s(wall_now))
    return (p.request_id, VERBS.get(str(p.action), str(p.action)), _where(p), gpu, usd(p.dph_usd),
            usd(p.cost_cap_usd, 2), waited, expires)


class ApprovalsScreen(ModalScreen[None]):
    """Lists the desk's requests live (refreshed twice a second) and answers the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,ctrl+a", "close", "Close"),
        Binding("a", "approve", "Approve"),
        Binding("x", "refuse", "Refuse"),
    ]

    def __init__(self, desk: ApprovalDesk) -> None:
        super().__init__(classes="approvals-dialog")
        self.desk = desk

    def compose(self) -> ComposeResult:
        with Vertical(id="approvals-box"):
            yield Label("Approvals", id="approvals-title")
            yield KeyedTable(columns=COLUMNS, id="approvals-table")
            yield Static("", id="approvals-facts", markup=False)
            with Horizontal(id="approvals-buttons"):
                yield Button("Close (esc)", id="approvals-close", variant="primary")
                yield Button("Refuse (x)", id="approvals-refuse", variant="warning")
                yield Button("Approve (a)", id="approvals-approve", variant="success")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#approvals-table", KeyedTable)

    def on_mount(self) -> None:
        self.refresh_rows()
        self.table.focus()
        self.set_interval(REFRESH_S, self.refresh_rows)

    def refresh_rows(self) -> None:
        now = self.desk.wall_now()
        listed = self.desk.listed()
        listed_ids = {p.request_id for p in listed}
        expired = [p for p in reversed(self.desk.expired) if p.request_id not in listed_ids]
        rows = {p.request_id: row_cells(p, wall_now=now, expired=False) for p in listed}
        rows |= {EXPIRED_KEY + p.request_id: row_cells(p, wall_now=now, expired=True) for p in expired}
        self.table.sync(rows, [p.request_id for p in listed] + [EXPIRED_KEY + p.request_id for p in expired])
        waiting = sum(1 for p in listed if not p.is_expired(now))
        self.query_one("#approvals-title", Label).update(
            f"Approvals — {waiting} pending" + (f", {len(expired)} expired unanswered" if expired else "")
            + f" · expiry is wall time ({span(self._expiry_s(listed, expired))})")
        self._show_facts(now)

    @staticmethod
    def _expiry_s(listed: list[PendingApproval], expired: list[PendingApproval]) -> float | None:
        for p in (*listed, *expired):
            return p.expires_wall_s - p.asked_wall_s
        return None

    def _highlighted(self) -> tuple[PendingApproval | None, bool]:
        key = self.table.cursor_key
        if key is None:
            return None, False
        if key.startswith(EXPIRED_KEY):
            request_id = key.removeprefix(EXPIRED_KEY)
            return next((p for p in self.desk.expired if p.request_id == request_id), None), True
        p = next((p for p in self.desk.listed() if p.request_id == key), None)
        return p, p is not None and p.is_expired(self.desk.wall_now())

    def _show_facts(self, now: float) -> None:
        p, expired = self._highlighted()
        facts = self.query_one("#approvals-facts", Static)
        if p is None:
            facts.update("Nothing is waiting for an answer.")
        else:
            deadline = "" if p.deadline_at is None else " · destroyed by its deadline (campaign clock)"
            state = ("EXPIRED unanswered: it counted as refused and can no longer be approved" if expired
                     else f"expires in {span(p.expires_in_s(now))} (wall time)")
            facts.update(f"{p.request_id}: {p.summary}\n{state}{deadline}")
        self.query_one("#approvals-approve", Button).disabled = p is None or expired
        self.query_one("#approvals-refuse", Button).disabled = p is None or expired

    @on(KeyedTable.RowHighlighted)
    def _moved(self) -> None:
        self._show_facts(self.desk.wall_now())

    def action_close(self) -> None:
        self.dismiss(None)

    def _answer(self, *, approve: bool) -> None:
        p, expired = self._highlighted()
        if p is None:
            self.notify("no request is highlighted", severity="warning")
        elif expired:
            self.notify(f"{p.request_id} has expired: it counts as refused and cannot be approved",
                        severity="warning")
        elif approve:
            self.desk.approve(p.request_id, by_key="a (pop-up)")
        else:
            self.desk.refuse(p.request_id, by_key="x (pop-up)")
        self.refresh_rows()

    def action_approve(self) -> None:
        self._answer(approve=True)

    def action_refuse(self) -> None:
        self._answer(approve=False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "approvals-close":
            self.dismiss(None)
        else:
            self._answer(approve=event.button.id == "approvals-approve")
