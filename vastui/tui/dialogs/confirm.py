"""The confirmation dialog, and the ``Approver`` that shows it.

Cancel has the focus when the dialog opens, so Enter cancels; Escape cancels. What is asked scrolls when the
terminal is short; the typed answer and the buttons are always on screen. Bulk destroys and rents need the
count typed, money above the configured threshold needs the amount typed. Approvals come out bound to each
request's action and target (money requests carry their cost cap: ``make_proposal`` refuses them without one).
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from vastui.approval import Approval, ApprovalRequest
from vastui.clock import Clock
from vastui.tui.proposal import Proposal, make_proposal

GRANTED_BY = "console dialog"


TYPED_PLACEHOLDER = "type it here"


class ConfirmDialog(ModalScreen[bool]):
    """Shows a proposal; dismisses with True only when Confirm is pressed with the right text typed."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", show=True)]

    def __init__(self, proposal: Proposal) -> None:
        super().__init__(classes="confirm-dialog")
        self.proposal = proposal

    def compose(self) -> ComposeResult:
        p = self.proposal
        with Vertical(id="confirm-box", classes="dialog-box"):
            yield Label(p.title, id="confirm-title")
            with VerticalScroll(id="confirm-body", classes="dialog-body"):  # scrolls; the answer part never does
                yield Static("\n".join(p.lines), id="confirm-what", markup=False)
                yield Static(p.consequence, id="confirm-consequence", markup=False)
            if p.typed is not None:
                yield Label(p.typed_hint, id="confirm-hint")
                # no placeholder of the value itself: a greyed "2" reads as already typed
                yield Input(placeholder=TYPED_PLACEHOLDER, id="confirm-typed")
            yield Static("", id="confirm-error", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button("Confirm", id="confirm", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed, "#cancel")
    def _cancelled(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed, "#confirm")
    def _confirmed(self) -> None:
        self._try_confirm()

    @on(Input.Submitted, "#confirm-typed")
    def _typed_submitted(self) -> None:
        self._try_confirm()

    def _try_confirm(self) -> None:
        typed = self.query("#confirm-typed")
        text = typed.first(Input).value if typed else ""
        if not self.proposal.accepts(text):
            self.query_one("#confirm-error", Static).update(f"not confirmed: {self.proposal.typed_hint}")
            return
        self.dismiss(True)


class DialogApprover:
    """An ``Approver`` (and a proposal approver) that asks through ``ConfirmDialog`` on ``app``."""

    def __init__(self, app: App[Any], *, clock: Clock, money_confirm_over_usd: float) -> None:
        self._app = app
        self._clock = clock
        self._money_confirm_over_usd = money_confirm_over_usd

    async def approve(self, proposal: Proposal) -> list[Approval]:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def done(result: bool | None) -> None:
            if not answer.done():
                answer.set_result(bool(result))

        self._app.push_screen(ConfirmDialog(proposal), callback=done)
        if not await answer:
            return []
        now = self._clock.now()
        return [Approval(request, granted_by=GRANTED_BY, granted_at=now) for request in proposal.requests]

    async def request(self, request: ApprovalRequest) -> Approval | None:
        """The single-request ``Approver`` protocol (e.g. for engine code run from the console)."""
        amount = request.cost_cap_usd
        proposal = make_proposal(title=str(request.action).replace("_", " ").capitalize(), requests=[request],
                                 lines=[request.summary], consequence="", amount_usd=amount,
                                 money_confirm_over_usd=self._money_confirm_over_usd)
        approvals = await self.approve(proposal)
        return approvals[0] if approvals else None
