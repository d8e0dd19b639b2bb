"""What a confirmation asks: the requests to approve, the words shown, and what the operator must type.

Kept free of Textual so the rules (typed count for bulk, typed amount above the money threshold, no money
approval without a cost cap) are plain functions the dialog and the tests share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vastui.approval import Action, Approval, ApprovalRequest
from vastui.errors import ApprovalRequired

MONEY_ACTIONS = frozenset({Action.PREPAY_INSTANCE, Action.TRANSFER_CREDIT})
BULK_TYPED_ACTIONS = frozenset({Action.CREATE_INSTANCE, Action.DESTROY_INSTANCE})


@dataclass(frozen=True, slots=True)
class Proposal:
    """One confirmation: every request in it is granted together or not at all.

    ``typed`` is the exact text the operator must type before Confirm works (None: pressing Confirm is enough).
    """

    title: str
    requests: tuple[ApprovalRequest, ...]
    lines: tuple[str, ...]
    consequence: str
    typed: str | None = None
    typed_hint: str = ""

    @property
    def action(self) -> Action:
        return self.requests[0].action

    def accepts(self, text: str) -> bool:
        """Whether ``text`` satisfies the typed confirmation (amounts compare as money, to the cent)."""
        if self.typed is None:
            return True
        if self.action in MONEY_ACTIONS:
            given_usd, typed_usd = parse_usd(text), parse_usd(self.typed)
            return given_usd is not None and typed_usd is not None and math.isclose(given_usd, typed_usd,
                                                                                    abs_tol=0.005)
        return text.strip().lstrip("$") == self.typed


def parse_usd(text: str) -> float | None:
    """An amount of USD as the operator types it (``25``, ``$25.00``, spaces around); None when it is not one."""
    try:
        return float(text.strip().lstrip("$"))
    except ValueError:
        return None


def make_proposal(*, title: str, requests: Sequence[ApprovalRequest], lines: Sequence[str], consequence: str,
                  amount_usd: float | None = None, money_confirm_over_usd: float) -> Proposal:
    """Build a proposal, deciding what must be typed; refuse a money request without a cost cap."""
    if not requests:
        raise ApprovalRequired("nothing to approve", title="Nothing selected")
    actions = {r.action for r in requests}
    if len(actions) != 1:
        raise ApprovalRequired("one confirmation covers one kind of action", title="Mixed actions")
    action = requests[0].action
    typed: str | None = None
    hint = ""
    if action in MONEY_ACTIONS:
        if amount_usd is None or any(r.cost_cap_usd is None for r in requests):
            raise ApprovalRequired(f"{action} moves money and needs an amount and a cost cap", title="No cost cap")
        if amount_usd > money_confirm_over_usd:
            typed = f"{amount_usd:.2f}"
            hint = f"type the amount ({typed}) to confirm: it is over ${money_confirm_over_usd:.2f}"
    elif action in BULK_TYPED_ACTIONS and len(requests) > 1:
        typed = str(len(requests))
        hint = f"type {typed} (the number of instances) to confirm"
    return Proposal(title=title, requests=tuple(requests), lines=tuple(lines), consequence=consequence,
                    typed=typed, typed_hint=hint)


class ProposalApprover(Protocol):
    """Asks the operator about a whole proposal: one approval per request, in order, or an empty list."""

    async def approve(self, proposal: Proposal) -> list[Approval]: ...
