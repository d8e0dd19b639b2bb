"""The console's action layer: every mutation, each behind a confirmation, refused outright in read-only mode.

Views call these methods; nothing here knows about widgets. The read-only check comes first, before any
confirmation is shown or any request is sent, so a read-only console cannot mutate even if a key slips through.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from vastui.approval import (
    Action,
    Approval,
    ApprovalRequest,
    AuditKind,
    AuditRecord,
    AuditSink,
    instance_target,
    offer_target,
    recipient_target,
)
from vastui.bench.billing import accrued_usd
from vastui.campaign.adhoc import AdhocOwner
from vastui.clock import Clock
from vastui.errors import CreateUncertain, VastuiError
from vastui.tui.proposal import ProposalApprover, make_proposal
from vastui.tui.services import ConsoleMarket, ConsoleSettings
from vastui.vast.models import Instance, Offer

T = TypeVar("T")


class ReadOnlyRefused(VastuiError):
    """A mutation was asked of a read-only console."""

    def __init__(self, action: Action) -> None:
        super().__init__(f"{action} refused: the console is read-only (--readonly)", title="Read-only")
        self.action = action


@dataclass(slots=True)
class Outcome:
    """What one action did: ids it acted on, errors per target, or declined (nothing sent)."""

    action: Action
    done: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    declined: bool = False
    offers_rented: list[int] = field(default_factory=list)   # a rent's offers that became instances
    sentence: str | None = None                              # what was done, in words, where ids say nothing

    def summary(self) -> str:
        if self.declined:
            return f"{self.action}: cancelled, nothing sent"
        if self.sentence is not None and not self.errors:
            return self.sentence
        ok = f"{self.action}: {len(self.done)} done" + (f" ({', '.join(map(str, self.done))})" if self.done else "")
        return ok + (f"; {len(self.errors)} failed: {'; '.join(self.errors)}" if self.errors else "")


class ConsoleActions:
    """Rent, destroy, stop, start, label, prepay and transfer — each asks ``approver`` first."""

    def __init__(self, *, market: ConsoleMarket, approver: ProposalApprover, clock: Clock,
                 settings: ConsoleSettings, audit: AuditSink | None = None,
                 owner: AdhocOwner | None = None) -> None:
        self._market = market
        self.owner = owner          # records each rent as an intent of the console's ad-hoc campaign (when a store)
        self._approver = approver
        self._clock = clock
        self._settings = settings
        self._audit = audit

    @property
    def readonly(self) -> bool:
        return self._settings.readonly

    def _writable(self, action: Action) -> None:
        if self._settings.readonly:
            raise ReadOnlyRefused(action)

    async def _ask(self, *, title: str, requests: Sequence[ApprovalRequest], lines: Sequence[str],
                   consequence: str, amount_usd: float | None = None) -> list[Approval]:
        proposal = make_proposal(title=title, requests=requests, lines=lines, consequence=consequence,
                                 amount_usd=amount_usd,
                                 money_confirm_over_usd=self._settings.money_confirm_over_usd)
        approvals = await self._approver.approve(proposal)
        for request in proposal.requests:
            granted = next((a for a in approvals if a.request is request), None)
            await self._record(request, granted)
        return approvals

    async def _record(self, request: ApprovalRequest, approval: Approval | None) -> None:
        if self._audit is None:
            return
        await self._audit.record_audit(AuditRecord(
            at=self._clock.now(), kind=AuditKind.APPROVAL if approval else AuditKind.DECLINED, action=request.action,
            target=request.target, approval_id=approval.approval_id if approval else None,
            granted_by=approval.granted_by if approval else None, outcome=request.summary))

    async def rent(self, offers: Sequence[Offer]) -> Outcome:
        """Rent each offer (one approval each, one confirmation for all)."""
        self._writable(Action.CREATE_INSTANCE)
        hours = self._settings.rent_cap_hours
        requests = [ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(o.id),
                                    summary=f"rent offer {o.id}: {o.num_gpus}x {o.gpu_name} at ${o.dph_total:.3f}/h",
                                    cost_cap_usd=round(o.dph_total * hours, 2)) for o in offers]
        total = sum(o.dph_total for o in offers)
        lines = [f"offer {o.id}  {o.num_gpus}x {o.gpu_name}  ${o.dph_total:.3f}/h  {o.geolocation or '-'}"
                 for o in offers]
        approvals = await self._ask(
            title=f"Rent {len(offers)} offer(s)", requests=requests, lines=lines,
            consequence=f"billing starts at once: ${total:.3f}/h together (cap {hours:g} h each, "
                        f"${total * hours:.2f})\nimage {self._settings.rent_image}, {self._settings.rent_disk_gib:g} GiB")
        outcome = Outcome(Action.CREATE_INSTANCE, declined=not approvals)
        for offer, approval in zip(offers, approvals, strict=False):
            await self._rent_one(offer, approval, hours=hours, outcome=outcome)
        return outcome

    async def _rent_one(self, offer: Offer, approval: Approval, *, hours: float, outcome: Outcome) -> None:
        """One create, written as an intent of the ad-hoc campaign first (as a campaign does), then bound."""
        intent = None
        label = f"console-{offer.id}-{secrets.token_hex(3)}"
        if self.owner is not None:
            intent = await self.owner.intend(offer_id=offer.id, machine_id=offer.machine_id, dph_usd=offer.dph_total,
                                             deadline_at=self._clock.now() + hours * 3600.0)
            label = intent.label
        made = await _attempt(outcome, f"offer {offer.id}", self._market.create_instance(
            offer_id=offer.id, image=self._settings.rent_image, disk_gib=self._settings.rent_disk_gib, label=label,
            approval=approval))
        if isinstance(made, VastuiError):
            if self.owner is not None and intent is not None:
                if isinstance(made, CreateUncertain):   # it may exist: the intent stays owned, found by its label
                    await self.owner.maybe_rented(intent, made.message)
                else:
                    await self.owner.not_rented(intent, made.message)
            return
        outcome.done.append(made.instance_id)
        outcome.offers_rented.append(offer.id)
        if self.owner is not None and intent is not None:
            await self.owner.bound(intent, made.instance_id)

    async def destroy(self, instances: Sequence[Instance]) -> Outcome:
        return await self._per_instance(
            Action.DESTROY_INSTANCE, instances, verb="Destroy",
            consequence="irreversible: the instance and its disk are deleted, billing stops")

    async def stop(self, instances: Sequence[Instance]) -> Outcome:
        return await self._per_instance(
            Action.STOP_INSTANCE, instances, verb="Stop",
            consequence="the GPU is released (someone else may rent it); the disk keeps billing until destroyed")

    async def start(self, instances: Sequence[Instance]) -> Outcome:
        return await self._per_instance(Action.START_INSTANCE, instances, verb="Start",
                                        consequence="GPU billing resumes once it runs")

    async def _per_instance(self, action: Action, instances: Sequence[Instance], *, verb: str,
                            consequence: str) -> Outcome:
        self._writable(action)
        requests = [ApprovalRequest(action=action, target=instance_target(i.id),
                                    summary=f"{verb.lower()} instance {i.id}") for i in instances]
        lines = [_instance_line(i, self._clock.now()) for i in instances]
        approvals = await self._ask(title=f"{verb} {len(instances)} instance(s)", requests=requests, lines=lines,
                                    consequence=consequence)
        outcome = Outcome(action, declined=not approvals)
        call = {Action.DESTROY_INSTANCE: self._market.destroy_instance, Action.STOP_INSTANCE: self._market.stop_instance,
                Action.START_INSTANCE: self._market.start_instance}[action]
        for instance, approval in zip(instances, approvals, strict=False):
            sent = await _attempt(outcome, f"instance {instance.id}", call(instance.id, approval=approval))
            if not isinstance(sent, VastuiError):
                outcome.done.append(instance.id)
        return outcome

    async def label(self, instance: Instance, label: str) -> Outcome:
        self._writable(Action.LABEL_INSTANCE)
        request = ApprovalRequest(action=Action.LABEL_INSTANCE, target=instance_target(instance.id),
                                  summary=f"label instance {instance.id} {label!r}")
        approvals = await self._ask(title=f"Label instance {instance.id}", requests=[request],
                                    lines=[_instance_line(instance, self._clock.now()), f"new label: {label!r}"],
                                    consequence=f"replaces the label {instance.label!r}")
        outcome = Outcome(Action.LABEL_INSTANCE, declined=not approvals)
        for approval in approvals:
            sent = await _attempt(outcome, f"instance {instance.id}",
                                  self._market.label_instance(instance.id, label, approval=approval))
            if not isinstance(sent, VastuiError):
                outcome.done.append(instance.id)
        return outcome

    async def prepay(self, instance: Instance, amount_usd: float, *, credit_usd: float | None = None) -> Outcome:
        """Move ``amount_usd`` of credit onto an instance; the approval's cost cap is that amount."""
        self._writable(Action.PREPAY_INSTANCE)
        request = ApprovalRequest(action=Action.PREPAY_INSTANCE, target=instance_target(instance.id),
                                  summary=f"prepay ${amount_usd:.2f} on instance {instance.id}",
                                  cost_cap_usd=round(amount_usd, 2))
        approvals = await self._ask(
            title=f"Prepay instance {instance.id}", requests=[request], amount_usd=amount_usd,
            lines=[_instance_line(instance, self._clock.now()), f"amount: ${amount_usd:.2f} from your credit"
                   + ("" if credit_usd is None else f" (${credit_usd:.2f} -> ${credit_usd - amount_usd:.2f})")],
            consequence="the credit is committed to this instance (a discount in exchange); not refundable")
        outcome = Outcome(Action.PREPAY_INSTANCE, declined=not approvals)
        for approval in approvals:
            sent = await _attempt(outcome, f"instance {instance.id}",
                                  self._market.prepay_instance(instance.id, amount_usd, approval=approval))
            if not isinstance(sent, VastuiError):
                outcome.done.append(instance.id)
        return outcome

    async def transfer(self, recipient: str, amount_usd: float, *, credit_usd: float | None) -> Outcome:
        """Send credit to another account; the approval's cost cap is the amount."""
        self._writable(Action.TRANSFER_CREDIT)
        request = ApprovalRequest(action=Action.TRANSFER_CREDIT, target=recipient_target(recipient),
                                  summary=f"transfer ${amount_usd:.2f} to {recipient}",
                                  cost_cap_usd=round(amount_usd, 2))
        after = "" if credit_usd is None else f"; your credit goes from ${credit_usd:.2f} to ${credit_usd - amount_usd:.2f}"
        approvals = await self._ask(title="Transfer credit", requests=[request], amount_usd=amount_usd,
                                    lines=[f"to: {recipient}", f"amount: ${amount_usd:.2f}"],
                                    consequence=f"irreversible: the credit leaves this account{after}")
        outcome = Outcome(Action.TRANSFER_CREDIT, declined=not approvals)
        for approval in approvals:
            sent = await _attempt(outcome, recipient,
                                  self._market.transfer_credit(recipient, amount_usd, approval=approval))
            if not isinstance(sent, VastuiError):
                outcome.sentence = f"transferred ${amount_usd:,.2f} to {recipient}"
        return outcome


async def _attempt(outcome: Outcome, target: str, request: Awaitable[T]) -> T | VastuiError:
    """Send one approved request. A failure is written into ``outcome`` under ``target`` and handed back (the
    caller may need its kind); the console keeps going with the next target."""
    try:
        return await request
    except VastuiError as exc:
        outcome.errors.append(f"{target}: {exc.message}")
        return exc


def _instance_line(instance: Instance, now: float) -> str:
    """The instance's facts on one line, its label (often 50 characters) on the next: a narrow dialog then wraps
    nothing in the middle of a field (``1x`` / ``RTX 5060 Ti``)."""
    accrued = ""
    if instance.dph_total is not None and instance.start_date is not None:
        accrued = f"  accrued ${accrued_usd(dph_total=instance.dph_total, start_at=instance.start_date, now=now):.4f}"
    price = "-" if instance.dph_total is None else f"${instance.dph_total:.3f}/h"
    label = f"\n    label {instance.label}" if instance.label else ""
    return (f"instance {instance.id}  {instance.num_gpus or '?'}x {instance.gpu_name or '?'}  "
            f"{instance.actual_status or 'provisioning'}  {price}{accrued}{label}")
