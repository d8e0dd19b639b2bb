"""The ways an operator approves: a printed plan approved by a flag, an interactive prompt, or nothing at all.

Every grant and every refusal goes to the audit log through ``AuditedApprover``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from vastui.approval import (
    Action,
    Approval,
    ApprovalRequest,
    Approver,
    AuditKind,
    AuditRecord,
    AuditSink,
    instance_target,
    offer_target,
)
from vastui.clock import Clock
from vastui.errors import ApprovalRequired


@dataclass(frozen=True, slots=True)
class PlanTerms:
    """What approving a printed plan means: rent these offers, spend at most this, destroy what was rented."""

    campaign_id: str
    offer_ids: frozenset[int]
    max_spend_usd: float
    destroy_at_end: bool = True


class PlanApprover:
    """Approves exactly a printed plan (``--approve-plan``) and nothing else.

    Creates are approved only for the plan's offers, once each, under the plan's spend cap (and once more for an
    offer whose create the marketplace refused outright, ``ApprovalRequest.asked_again``: that create rented
    nothing); destroys only for instances the campaign itself created (``mark_owned``) — destroying is what the
    plan promised.
    """

    def __init__(self, terms: PlanTerms, *, clock: Clock, granted_by: str = "approve-plan flag") -> None:
        self._terms = terms
        self._clock = clock
        self._granted_by = granted_by
        self._rented: set[int] = set()
        self._asked_again: set[int] = set()
        self._owned: set[int] = set()

    def mark_owned(self, instance_id: int) -> None:
        self._owned.add(instance_id)

    def _fits(self, request: ApprovalRequest) -> bool:
        _, _, raw_id = request.target.partition(":")
        if not (raw_id.isascii() and raw_id.isdigit()) or request.campaign_id != self._terms.campaign_id:
            return False
        target_id = int(raw_id)
        if request.action is Action.CREATE_INSTANCE and request.target == offer_target(target_id):
            within_cap = request.cost_cap_usd is not None and request.cost_cap_usd <= self._terms.max_spend_usd + 1e-9
            once = target_id not in self._rented or (request.asked_again and target_id not in self._asked_again)
            return target_id in self._terms.offer_ids and once and within_cap
        if request.action is Action.DESTROY_INSTANCE and request.target == instance_target(target_id):
            return self._terms.destroy_at_end and target_id in self._owned
        return False

    def grant(self, request: ApprovalRequest) -> Approval | None:
        """The approval when ``request`` is within the plan (a plan offer's create counts once), else None."""
        if not self._fits(request):
            return None
        if request.action is Action.CREATE_INSTANCE:
            offer_id = int(request.target.partition(":")[2])
            (self._asked_again if offer_id in self._rented else self._rented).add(offer_id)
        return Approval(request, granted_by=self._granted_by, granted_at=self._clock.now())

    async def request(self, request: ApprovalRequest) -> Approval | None:
        return self.grant(request)


class PromptApprover:
    """Asks the operator for each action, one prompt at a time (concurrent requests wait their turn, so two
    prompts never interleave); ``ask`` shows the text and returns True only on an explicit yes."""

    def __init__(self, ask: Callable[[str], Awaitable[bool]], *, clock: Clock) -> None:
        self._ask = ask
        self._clock = clock
        self._turn = asyncio.Lock()

    async def request(self, request: ApprovalRequest) -> Approval | None:
        cap = f" (at most ${request.cost_cap_usd:.2f})" if request.cost_cap_usd is not None else ""
        async with self._turn:
            approved = await self._ask(f"{request.summary}{cap}. Approve {request.action} on {request.target}?")
        if approved:
            return Approval(request, granted_by="interactive prompt", granted_at=self._clock.now())
        return None


class OutsidePlanRefuser:
    """For a run approved by its printed plan alone: whatever the plan does not cover is refused at once."""

    async def request(self, request: ApprovalRequest) -> Approval | None:
        return None


class RefusingApprover:
    """For a run with no terminal and no approving flag: every request is refused, with a reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def request(self, request: ApprovalRequest) -> Approval | None:
        raise ApprovalRequired(f"{request.action} on {request.target} was not approved: {self.reason}")


class AuditedApprover:
    """Wraps any approver so every grant and refusal is written to the audit log before it is used."""

    def __init__(self, inner: Approver, *, audit: AuditSink,
                 clock: Clock) -> None:
        self.inner = inner
        self._audit = audit
        self._clock = clock

    async def request(self, request: ApprovalRequest) -> Approval | None:
        try:
            approval = await self.inner.request(request)
        except ApprovalRequired as exc:
            await self._record(request, None, note=f"{request.summary} — refused: {exc}")
            raise
        await self._record(request, approval, note=request.summary)
        return approval

    async def _record(self, request: ApprovalRequest, approval: Approval | None, *, note: str) -> None:
        await self._audit.record_audit(AuditRecord(
            at=self._clock.now(),
            kind=AuditKind.APPROVAL if approval else AuditKind.DECLINED,
            action=request.action,
            target=request.target,
            approval_id=approval.approval_id if approval else None,
            granted_by=approval.granted_by if approval else None,
            outcome=note,
            campaign_id=request.campaign_id,
        ))
