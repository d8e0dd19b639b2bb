"""A running campaign, as a view (the TUI) or the headless CLI holds it: start it, read its whole state at any
moment, answer its approvals, abort it, await its result.

    handle = start_campaign(services, manifest=manifest, plan=plan)      # inside a running event loop
    events = handle.subscribe()                                          # numbered; EventsLost when behind
    state = handle.snapshot()                                            # everything, as frozen values
    handle.broker.approve(state.pending_approvals[0].request_id)         # or approve_plan(), refuse(id)
    handle.abort("operator pressed q")                                   # stop work, tear down, prove gone
    result = await handle.result()                                       # receipt and outcome
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from vastui.approval import Approver
from vastui.bench.manifest import Manifest
from vastui.bench.receipt import Receipt
from vastui.campaign.approvers import PlanTerms
from vastui.campaign.broker import DEFAULT_EXPIRY_S, ApprovalBroker
from vastui.campaign.engine import CampaignEngine, CampaignOutcome
from vastui.campaign.plan import Plan
from vastui.campaign.session import CampaignServices, make_engine, record_campaign, write_receipt
from vastui.campaign.snapshot import CampaignSnapshot, CampaignStage
from vastui.campaign.tracker import CampaignTracker
from vastui.clock import Clock
from vastui.errors import VastuiError
from vastui.events import EventBus, Subscription
from vastui.events_live import AbortRequested
from vastui.store.records import CampaignPhase

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CampaignResult:
    """How a campaign ended: its receipt (also in the store) and the engine's outcome; ``aborted`` is the reason
    when it was aborted (its instances were still destroyed and proven gone — see the receipt)."""

    receipt: Receipt
    outcome: CampaignOutcome
    aborted: str | None


class CampaignHandle:
    """One campaign started by ``start_campaign``. Its methods are safe to call from the event loop's thread at
    any time, before, during and after the run."""

    def __init__(self, services: CampaignServices, *, manifest: Manifest, plan: Plan, broker: ApprovalBroker,
                 on_owned: Callable[[int], None] | None) -> None:
        self.campaign_id = plan.campaign_id
        self.plan = plan
        self.manifest = manifest
        self.broker = broker
        self.bus: EventBus = services.bus
        self._services = services
        self._on_owned = on_owned
        self._engine: CampaignEngine | None = None
        self._abort_reason: str | None = None
        self._tracker = CampaignTracker(plan=plan, workload=manifest.workload.name, created_at=services.clock.now())
        self._stop_listening = self.bus.listen(self._tracker.apply)
        self._task: asyncio.Task[CampaignResult] = asyncio.get_running_loop().create_task(
            self._run(), name=f"campaign {plan.campaign_id}")

    def snapshot(self) -> CampaignSnapshot:
        """The whole current state (plan, candidates, race, spend, pending approvals, decision, cleanup)."""
        engine = self._engine
        spend = (engine.spent_usd(), engine.reserved_usd()) if engine is not None else None
        return self._tracker.snapshot(now=self._services.clock.now(), pending=self.broker.pending(), spend=spend)

    def subscribe(self, *, queue_size: int | None = None) -> Subscription:
        """A queue of this bus's events from now on (numbered; an ``EventsLost`` marker when it falls behind)."""
        return self.bus.subscribe(queue_size=queue_size)

    @property
    def is_done(self) -> bool:
        return self._task.done()

    def instances(self) -> tuple[tuple[int, ...], int]:
        """The campaign's instances now: the ids rented and not yet proven gone, and how many are proven gone
        (what a last line must say when the process ends, whichever way it ends)."""
        cleanup = self._tracker.instances()
        alive = tuple(sorted(i.instance_id for i in cleanup if not i.is_proven_gone))
        return alive, sum(1 for i in cleanup if i.is_proven_gone)

    @property
    def abort_reason(self) -> str | None:
        return self._abort_reason

    def abort(self, reason: str) -> None:
        """Stop the campaign: no more rents, pending approvals cancelled, every candidate stopped, then the usual
        teardown destroys every instance and proves it gone. Returns at once; ``await result()`` for the end.
        Idempotent; does nothing once the campaign is done."""
        if self._abort_reason is not None or self._task.done():
            return
        self._abort_reason = reason
        self.bus.publish(AbortRequested(at=self._services.clock.now(), campaign_id=self.campaign_id, reason=reason))
        self.broker.abort(reason)
        if self._engine is not None:
            self._engine.abort(reason)

    async def result(self, *, abort_if_cancelled: str | None = None) -> CampaignResult:
        """Wait for the end (receipt written); raises what the campaign raised.

        Cancelling this wait leaves the campaign running (a view that closes may detach) — unless
        ``abort_if_cancelled`` is given: then the campaign is aborted with that reason and the wait lasts until its
        teardown is proven, before the cancellation goes on. That is what Ctrl-C on a headless run needs: the
        store and the client must outlive the teardown.
        """
        try:
            return await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if abort_if_cancelled is None or self._task.done():
                raise
            self.abort(abort_if_cancelled)
            try:
                await asyncio.shield(self._task)
            except Exception as exc:   # the last line names what was left; a traceback would hide it
                log.error("campaign %s failed while aborting: %s", self.campaign_id, exc)
            raise

    async def _run(self) -> CampaignResult:
        services = self._services
        try:
            await record_campaign(services, manifest=self.manifest, plan=self.plan)
            engine = make_engine(services, manifest=self.manifest, plan=self.plan, approver=self.broker,
                                 on_owned=self._owned)
            self._engine = engine
            if self._abort_reason is not None:
                engine.abort(self._abort_reason)
            try:
                outcome = await engine.run()
            except BaseException:
                await services.store.set_campaign_phase(campaign_id=self.campaign_id, phase=CampaignPhase.CRASHED,
                                                        at=services.clock.now())
                raise
            receipt = await write_receipt(services, manifest=self.manifest, plan=self.plan, outcome=outcome)
            return CampaignResult(receipt, outcome, self._abort_reason)
        except BaseException as exc:
            self._tracker.stage = CampaignStage.FAILED
            self._tracker.error = str(exc) or type(exc).__name__
            raise
        finally:
            self._stop_listening()
            with contextlib.suppress(VastuiError):   # no answer kept for `vastui campaign approve` can matter now
                await self.broker.stop_keeping("the campaign ended")
            with contextlib.suppress(VastuiError):   # the campaign is no longer this process's to run
                await self._services.store.release_campaign(self.campaign_id, pid=os.getpid())

    def _owned(self, instance_id: int) -> None:
        self.broker.mark_owned(instance_id)
        if self._on_owned is not None:
            self._on_owned(instance_id)


def start_campaign(services: CampaignServices, *, manifest: Manifest, plan: Plan, plan_approved: bool = False,
                   policy: Approver | None = None, operator: Approver | None = None,
                   expiry_s: float = DEFAULT_EXPIRY_S, plan_approved_by: str = "approve-plan",
                   on_owned: Callable[[int], None] | None = None, wall: Clock | None = None) -> CampaignHandle:
    """Start a planned campaign in the running event loop and return its handle at once.

    Approvals go through the handle's ``broker``: ``plan_approved`` approves the printed plan as a whole up front;
    a ``policy`` (an approver that needs no human) answers every request the rules leave; otherwise requests wait
    for a view (``handle.broker.approve(id)``) or the ``operator`` (a terminal prompt), each for ``expiry_s`` seconds
    of ``wall`` (the operator's clock: monotonic wall time unless a test gives another) and then count as refused.
    Destroys of the campaign's own instances never wait.
    """
    terms = PlanTerms(campaign_id=plan.campaign_id, offer_ids=plan.offer_ids, max_spend_usd=plan.budget_usd)
    broker = ApprovalBroker(clock=services.clock, bus=services.bus, audit=services.store, terms=terms,
                            policy=policy, operator=operator, expiry_s=expiry_s, wall=wall)
    if plan_approved:
        broker.approve_plan(by=plan_approved_by)
    return CampaignHandle(services, manifest=manifest, plan=plan, broker=broker, on_owned=on_owned)
