"""Approvals: nothing is created, changed, destroyed or funded without one.

An ``Approval`` is single-use and bound to one action and one target (and, for spending actions, a cost cap).
Only an ``Approver`` grants them: the TUI dialog, an interactive prompt, or flags that approve a printed plan.
Mutating client methods call ``Approval.consume`` before any network I/O.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass, field
from typing import Protocol

from vastui.errors import ApprovalRequired


class Action(enum.StrEnum):
    CREATE_INSTANCE = "create_instance"
    DESTROY_INSTANCE = "destroy_instance"
    STOP_INSTANCE = "stop_instance"
    START_INSTANCE = "start_instance"
    LABEL_INSTANCE = "label_instance"
    PREPAY_INSTANCE = "prepay_instance"
    TRANSFER_CREDIT = "transfer_credit"
    CREATE_SSH_KEY = "create_ssh_key"
    ATTACH_SSH_KEY = "attach_ssh_key"


def offer_target(offer_id: int) -> str:
    return f"offer:{offer_id}"


def instance_target(instance_id: int) -> str:
    return f"instance:{instance_id}"


def recipient_target(recipient: str) -> str:
    """The approval target of a credit transfer."""
    return f"recipient:{recipient}"


class RequestState(enum.StrEnum):
    """Where an approval request stands: waiting, or how it was answered (the broker's states; a request kept in the
    store for ``vastui campaign approve`` records the same ones)."""

    PENDING = "pending"
    GRANTED = "granted"
    REFUSED = "refused"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the operator is asked to approve, in words and in machine terms (the facts a view shows as fields:
    the GPU, its price per hour and the deadline by which a rented instance is destroyed)."""

    action: Action
    target: str
    summary: str
    cost_cap_usd: float | None = None
    campaign_id: str | None = None
    gpu_name: str | None = None
    num_gpus: int | None = None
    dph_usd: float | None = None
    deadline_at: float | None = None
    # a create asked again because the marketplace refused the first outright (scheduling could not place it):
    # nothing was rented, so a printed plan's "each offer once" is not spent by that refusal
    asked_again: bool = False


@dataclass(slots=True, eq=False)
class Approval:
    """A granted request. Use it once, for exactly its action and target."""

    request: ApprovalRequest
    granted_by: str
    granted_at: float
    approval_id: str = field(default_factory=lambda: secrets.token_hex(8))
    used: bool = False

    def consume(self, *, action: Action, target: str) -> None:
        """Mark this approval used for ``action`` on ``target``; raise ApprovalRequired if it does not fit."""
        if self.used:
            raise ApprovalRequired(
                f"approval {self.approval_id} was already used; {action} on {target} needs a new one",
                title="Approval already used",
            )
        if self.request.action != action or self.request.target != target:
            raise ApprovalRequired(
                f"approval {self.approval_id} is for {self.request.action} on {self.request.target}, "
                f"not {action} on {target}",
                title="Approval does not match",
            )
        self.used = True


def require(approval: Approval | None, *, action: Action, target: str) -> Approval:
    """Check and consume an approval; called by every mutating method before any I/O."""
    if approval is None:
        raise ApprovalRequired(f"{action} on {target} needs an explicit approval", title="Approval required")
    approval.consume(action=action, target=target)
    return approval


class Approver(Protocol):
    """Something that can ask the operator. Returns None when the operator declines."""

    async def request(self, request: ApprovalRequest) -> Approval | None: ...


class AuditKind(enum.StrEnum):
    """What an audit record says (the value is what the audit log stores)."""

    APPROVAL = "approval"   # an approval granted
    DECLINED = "declined"   # a request refused, expired or cancelled
    SENDING = "sending"     # a mutating call about to go out
    CALL = "call"           # that call's outcome


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One line of the audit log: an approval granted or declined, or a mutating call and its outcome."""

    at: float
    kind: AuditKind
    action: Action
    target: str
    approval_id: str | None
    granted_by: str | None
    outcome: str
    campaign_id: str | None = None
    # who wrote it, as the store read it back ("ana@ws-3": operator and host; None before schema v6): not part of what
    # was recorded, so two records of the same event compare equal whoever wrote them
    by: str | None = field(default=None, compare=False)


class AuditSink(Protocol):
    """Where approvals and mutating calls are written (the store implements it)."""

    async def record_audit(self, record: AuditRecord) -> None: ...
