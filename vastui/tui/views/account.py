"""Account: credit, balance, what all instances burn per hour, the runway that leaves, and credit transfer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from vastui.tui.cells import usd
from vastui.tui.dialogs.prompt import PromptScreen, ask_usd
from vastui.tui.state import ConsoleState
from vastui.tui.views.base import ConsoleView, focus_now


def account_text(state: ConsoleState) -> str:
    user = state.user
    if user is None:
        return "waiting for the account…"
    burn = state.burn_usd_per_h
    runway = state.runway_h
    count = "?" if state.instances is None else str(len(state.instances.listing.instances))
    incomplete = "" if state.instances is None or state.instances.listing.is_complete else " (listing INCOMPLETE)"
    lines = [
        f"account      {user.username or user.email or user.id}",
        f"credit       {usd(user.credit, 2)}",
        f"balance      {usd(user.balance, 2)}",
        f"burn         {'?' if burn is None else f'${burn:,.3f}/h'} over {count} instance(s){incomplete}",
        f"runway       {'?' if runway is None else f'{runway:,.1f} h (credit / burn)'}",
        f"can pay      {'-' if user.can_pay is None else ('yes' if user.can_pay else 'no')}",
        "",
    ]
    if state.transfers is None:
        lines.append("transfers    - (no store: the console keeps no audit log)")
    elif not state.transfers:
        lines.append("transfers    none sent from here")
    else:
        lines.append("transfers    (from the audit log, newest first)")
        lines += [f"  {datetime.fromtimestamp(t.at, tz=UTC):%Y-%m-%d %H:%M:%SZ}  to {t.recipient}  {t.outcome}"
                  for t in state.transfers]
    return "\n".join(lines)


class AccountView(ConsoleView):
    can_focus = True
    view_name = "account"
    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset({"transfer"})
    BINDINGS: ClassVar[list[BindingType]] = [Binding("t", "transfer", "Transfer credit")]

    def compose(self) -> ComposeResult:
        yield Static("Account", classes="view-title")
        yield Static("waiting for the account…", id="account-body", markup=False)

    def focus_main(self) -> None:
        focus_now(self)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        self.query_one("#account-body", Static).update(account_text(state))

    def action_transfer(self) -> None:
        def recipient_chosen(recipient: str | None) -> None:
            if recipient is None or not recipient.strip():
                return

            def amount_chosen(amount: float) -> None:
                user = self.console.state.user
                credit = None if user is None else user.credit
                self.console.perform(lambda actions: actions.transfer(recipient.strip(), amount, credit_usd=credit))

            ask_usd(self, question=f"How many USD to send to {recipient.strip()}?", placeholder="e.g. 10.00",
                    then=amount_chosen)

        self.app.push_screen(PromptScreen(question="Send credit to (email or user id)"), callback=recipient_chosen)
