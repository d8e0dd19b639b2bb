"""The approval broker: where a campaign's requests wait for an answer, several at once, each with an expiry.

A request is answered, in this order, by:

1. the rules: during an abort no rent is granted; a destroy of an instance this campaign rented is granted at once
   (its rent was approved with a deadline, so destroying it never waits on a human);
2. the printed plan, once it is approved as a whole (``approve_plan``): exactly its rents, once each, under its cap;
3. a ``policy`` — an approver that decides without a human (``--approve-plan``, "no terminal: refuse") — when one
   is given: its answer is final;
4. otherwise a human: a view calls ``approve(request_id)`` / ``refuse(request_id)``, or the ``operator`` (a terminal
   prompt) is asked, one request at a time so two prompts never interleave. Unanswered at ``expires_wall_s``, the
   request counts as refused.

Expiry is the operator's time, not the marketplace's: it is measured on ``wall`` (a monotonic wall clock by
default), so a simulator running 120 times faster than the wall still leaves a human the whole expiry to answer. A
request whose time is up cannot be granted, even in the instant before its timer fires: ``approve`` expires it
instead (expiry refuses, it never approves). Once nobody is left to answer (``stop_asking``, the console detached),
a request that no rule or plan grants is refused at once.

When the operator detaches but will answer from a shell (``keep_for_command``), every request that waits for a
human — those waiting now and every later one — is kept in the store (its ``kept_requests`` table) instead, with
its expiry in epoch wall seconds; ``vastui campaign approve``/``refuse``, another process on the same file, answers
it there, and the broker polls the store on ``wall`` (about once a second) and applies the answer through
``approve``/``refuse`` — so a grant is audited as any other, naming the command that gave it. The expiry still
runs on ``wall`` here: an expired request is refused as expired, and its row says so.

Every grant, refusal, expiry and cancellation goes to the audit log and to the bus (``events_live.Approval*``).
The broker is an ``Approver``: the engine asks it like any other.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass
from typing import Any

from vastui.approval import Action, Approval, ApprovalRequest, Approver, AuditKind, AuditRecord, AuditSink, RequestState
from vastui.campaign.approvers import PlanApprover, PlanTerms
from vastui.campaign.ports import CampaignStore
from vastui.clock import Clock, MonotonicClock, WallClock
from vastui.errors import ApprovalRequired, VastuiError
from vastui.events import EventBus, Notice
from vastui.events_live import ApprovalAnswered, ApprovalCancelled, ApprovalExpired, ApprovalRequested

log = logging.getLogger(__name__)

DEFAULT_EXPIRY_S = 15 * 60.0
OWN_INSTANCE_RULE = "own-instance rule: rented by this campaign, destroyed by its deadline"
KEEP_POLL_S = 1.0   # how often a detached broker looks in the store for a command's answers (wall seconds)


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A request waiting for an answer, with its facts as fields.

    ``requested_at`` and ``deadline_at`` are on the campaign's clock; ``asked_wall_s`` and ``expires_wall_s`` are
    readings of the broker's ``wall`` clock (monotonic seconds: compare them with ``broker.wall.now()`` only)."""

    request_id: str
    action: Action
    target: str
    summary: str
    campaign_id: str | None
    offer_id: int | None
    instance_id: int | None
    gpu_name: str | None
    num_gpus: int | None
    dph_usd: float | None
    cost_cap_usd: float | None
    deadline_at: float | None
    requested_at: float
    asked_wall_s: float
    expires_wall_s: float

    @property
    def is_spending(self) -> bool:
        return self.action is Action.CREATE_INSTANCE

    def waited_s(self, wall_now: float) -> float:
        """Wall seconds since it was asked."""
        return max(0.0, wall_now - self.asked_wall_s)

    def expires_in_s(self, wall_now: float) -> float:
        """Wall seconds left to answer it (0 once expired)."""
        return max(0.0, self.expires_wall_s - wall_now)

    def is_expired(self, wall_now: float) -> bool:
        return wall_now >= self.expires_wall_s


@dataclass(frozen=True, slots=True)
class _Answer:
    state: RequestState
    approval: Approval | None
    by: str
    reason: str = ""


@dataclass(slots=True)
class _Entry:
    pending: PendingApproval
    request: ApprovalRequest
    answer: asyncio.Future[_Answer]
    asks_human: bool = False       # it waits for a human (no rule, plan or policy answered it)
    keeping: bool = False          # it is being (or has been) written to the store for a command to answer
    kept_row: int | None = None    # its row in the store, once written


@dataclass(slots=True)
class _Keeping:
    """Where a detached broker keeps its requests, and the task that polls for their answers."""

    store: CampaignStore
    campaign_id: str
    epoch: Clock
    poll_s: float
    task: asyncio.Task[None] | None = None


def _target_id(target: str, kind: str) -> int | None:
    prefix, _, raw = target.partition(":")
    return int(raw) if prefix == kind and raw.isascii() and raw.isdigit() else None


class ApprovalBroker:
    """Holds a campaign's approval requests until each is answered, refused, expired or cancelled."""

    def __init__(self, *, clock: Clock, bus: EventBus, audit: AuditSink, terms: PlanTerms | None = None,
                 policy: Approver | None = None, operator: Approver | None = None,
                 expiry_s: float = DEFAULT_EXPIRY_S, wall: Clock | None = None) -> None:
        if expiry_s <= 0:
            raise ValueError("expiry_s must be positive")
        self._clock, self._bus, self._audit = clock, bus, audit
        self.wall: Clock = wall if wall is not None else MonotonicClock()
        self._nobody_answers: str | None = None
        self._terms = terms
        self._plan: PlanApprover | None = None
        self._policy, self._operator = policy, operator
        self.expiry_s = expiry_s
        self._open: dict[str, _Entry] = {}
        self._ids = itertools.count(1)
        self._owned: set[int] = set()
        self._aborting: str | None = None
        self._prompt_lock = asyncio.Lock()
        self._keeping: _Keeping | None = None

    # --- what a view reads -------------------------------------------------------------------------------------
    def pending(self) -> tuple[PendingApproval, ...]:
        """Requests waiting for an answer, oldest first."""
        return tuple(e.pending for e in self._open.values() if not e.answer.done())

    # --- what a view (or the campaign) calls -------------------------------------------------------------------
    def approve(self, request_id: str, *, by: str = "operator") -> bool:
        """Grant one pending request; False when it is no longer pending (answered, expired or unknown). A request
        whose time is up is expired here, not granted."""
        entry = self._open.get(request_id)
        if entry is None or entry.answer.done():
            return False
        if entry.pending.is_expired(self.wall.now()):
            entry.answer.set_result(self._expired())
            return False
        approval = Approval(entry.request, granted_by=by, granted_at=self._clock.now())
        entry.answer.set_result(_Answer(RequestState.GRANTED, approval, by))
        return True

    def refuse(self, request_id: str, *, by: str = "operator", reason: str = "refused") -> bool:
        """Refuse one pending request; False when it is no longer pending."""
        entry = self._open.get(request_id)
        if entry is None or entry.answer.done():
            return False
        entry.answer.set_result(_Answer(RequestState.REFUSED, None, by, reason))
        return True

    def approve_plan(self, *, by: str = "operator: the printed plan") -> int:
        """Approve the printed plan as a whole: exactly its rents (once each, under its cap) and the destroys of
        the campaign's own instances — the pending ones that fit now, and those asked later. Returns how many
        pending requests it granted. Needs the plan's terms."""
        if self._terms is None:
            raise ApprovalRequired("there is no printed plan to approve", title="No plan")
        if self._plan is None:
            self._plan = PlanApprover(self._terms, clock=self._clock, granted_by=by)
            for instance_id in self._owned:
                self._plan.mark_owned(instance_id)
        granted, wall_now = 0, self.wall.now()
        for entry in list(self._open.values()):
            if not entry.answer.done() and entry.pending.is_expired(wall_now):
                entry.answer.set_result(self._expired())
            elif not entry.answer.done() and (approval := self._plan.grant(entry.request)) is not None:
                entry.answer.set_result(_Answer(RequestState.GRANTED, approval, approval.granted_by))
                granted += 1
        return granted

    def mark_owned(self, instance_id: int) -> None:
        """The campaign rented (or found by its label) this instance: destroying it needs nobody's answer."""
        self._owned.add(instance_id)
        if self._plan is not None:
            self._plan.mark_owned(instance_id)
        for setter in (getattr(self._policy, "mark_owned", None), getattr(self._operator, "mark_owned", None)):
            if callable(setter):
                setter(instance_id)

    def abort(self, reason: str) -> int:
        """From now on no rent is granted; every pending request is cancelled. Returns how many were."""
        self._aborting = reason
        return self.cancel_pending(reason)

    def stop_asking(self, reason: str) -> int:
        """Nobody is left to answer (the operator detached): every pending request that needs a human is refused
        now, and so is every later one that no rule or approved plan grants. Returns how many were refused."""
        self._nobody_answers = reason
        refused = 0
        for entry in list(self._open.values()):
            if not entry.answer.done():
                entry.answer.set_result(_Answer(RequestState.REFUSED, None, "campaign", reason))
                refused += 1
        return refused

    def cancel_pending(self, reason: str) -> int:
        cancelled = 0
        for entry in list(self._open.values()):
            if not entry.answer.done():
                entry.answer.set_result(_Answer(RequestState.CANCELLED, None, "campaign", reason))
                cancelled += 1
        return cancelled

    # --- kept for a command (the operator detached, and answers from a shell) ---------------------------------
    def keep_for_command(self, store: CampaignStore, *, campaign_id: str, epoch: Clock | None = None,
                         poll_s: float = KEEP_POLL_S) -> None:
        """Nobody is at the console, but the operator answers from a shell: every request that waits for a human
        now, and every later one, is kept in ``store`` under ``campaign_id`` (asked-at and expires-at on ``epoch``,
        the real clock unless given) and answered when another process answers it there; the store is polled every
        ``poll_s`` seconds of ``wall``. Expiry is unchanged. Idempotent; needs a running event loop; does nothing
        once ``stop_asking`` was called. ``stop_keeping`` ends it (the campaign's end does)."""
        if poll_s <= 0:
            raise ValueError("poll_s must be positive")
        if self._keeping is not None or self._nobody_answers is not None:
            return
        keeping = _Keeping(store, campaign_id, epoch if epoch is not None else WallClock(), poll_s)
        self._keeping = keeping
        keeping.task = asyncio.get_running_loop().create_task(self._keep_answering(keeping),
                                                              name=f"kept requests of {campaign_id}")

    async def stop_keeping(self, reason: str) -> int:
        """Stop polling the store; the kept requests still pending there are marked cancelled (nobody will pick up
        their answer). Returns how many were. Raises StoreError when the store refuses."""
        keeping = self._keeping
        if keeping is None or keeping.task is None or keeping.task.done():
            return 0
        keeping.task.cancel()
        await asyncio.wait({keeping.task})
        return await keeping.store.cancel_kept_requests(keeping.campaign_id, at=keeping.epoch.now(), reason=reason)

    async def _keep_answering(self, keeping: _Keeping) -> None:
        """Keep what waits now, then apply the command's answers from the store, every ``poll_s`` of wall time."""
        for entry in list(self._open.values()):
            if entry.asks_human and not entry.answer.done():
                await self._keep(entry)
        told = False
        while True:
            await self.wall.sleep(keeping.poll_s)
            waiting = {e.kept_row: e for e in self._open.values() if e.kept_row is not None and not e.answer.done()}
            if not waiting:
                continue
            try:
                rows = await keeping.store.kept_requests(keeping.campaign_id)
            except VastuiError as exc:
                if not told:   # once: the requests still expire on time if the store stays unreadable
                    log.warning("could not read the answers to the kept requests: %s", exc.message)
                told = True
                continue
            for row in rows:
                answered = waiting.get(row.row_id)
                if answered is None:
                    continue
                by = row.answered_by or "vastui campaign approve"
                if row.state is RequestState.GRANTED:
                    self.approve(answered.pending.request_id, by=by)
                elif row.state is RequestState.REFUSED:
                    self.refuse(answered.pending.request_id, by=by,
                                reason=row.reason or "refused at the command line")

    async def _keep(self, entry: _Entry) -> None:
        """Write one waiting request to the store (once); a request the store refuses is refused, with why."""
        keeping = self._keeping
        if keeping is None or entry.keeping:
            return
        entry.keeping = True
        p, wall_now, epoch_now = entry.pending, self.wall.now(), keeping.epoch.now()
        try:
            kept = await keeping.store.keep_request(
                campaign_id=keeping.campaign_id, request_id=p.request_id, action=str(p.action), target=p.target,
                summary=p.summary, cost_cap_usd=p.cost_cap_usd, gpu_name=p.gpu_name, num_gpus=p.num_gpus,
                dph_usd=p.dph_usd, deadline_at=p.deadline_at, asked_at=epoch_now - p.waited_s(wall_now),
                expires_at=epoch_now + (p.expires_wall_s - wall_now))
        except VastuiError as exc:
            if not entry.answer.done():
                entry.answer.set_result(_Answer(RequestState.REFUSED, None, "campaign",
                                                f"could not keep it for `vastui campaign approve`: {exc.message}"))
            return
        entry.kept_row = kept.row_id
        if entry.answer.done() and entry.pending.request_id not in self._open:
            await self._settle_kept(entry, entry.answer.result())   # it was closed while being written
            return
        cap = f", cap ${p.cost_cap_usd:.2f}" if p.cost_cap_usd is not None else ""
        self._bus.publish(Notice(
            at=self._clock.now(), campaign_id=keeping.campaign_id, level="info",
            text=f"{p.request_id} waits for `vastui campaign approve {keeping.campaign_id}`: {p.summary}{cap} "
                 f"(expires in {p.expires_in_s(wall_now) / 60:.0f} min)"))

    async def _settle_kept(self, entry: _Entry, answer: _Answer) -> None:
        keeping = self._keeping
        if keeping is None or entry.kept_row is None:
            return
        try:
            await keeping.store.settle_kept_request(entry.kept_row, state=answer.state,
                                                    answered_by=answer.by, at=keeping.epoch.now(),
                                                    reason=answer.reason or None)
        except VastuiError as exc:
            log.warning("could not record the answer to kept request %s: %s", entry.pending.request_id, exc.message)

    # --- what the campaign calls -------------------------------------------------------------------------------
    async def request(self, request: ApprovalRequest) -> Approval | None:
        """Ask; returns the approval, or None when refused, expired or cancelled (each audited and published).
        A policy that refuses with ``ApprovalRequired`` has it raised here, after the audit."""
        entry = self._enter(request)
        try:
            answer = self._by_rule(entry) or await self._by_policy(entry) or await self._by_human(entry)
        except ApprovalRequired as exc:
            await self._close(entry, _Answer(RequestState.REFUSED, None, "policy", str(exc)))
            raise
        except asyncio.CancelledError:
            await self._close(entry, _Answer(RequestState.CANCELLED, None, "campaign", "its asker stopped"))
            raise
        await self._close(entry, answer)
        return answer.approval if answer.state is RequestState.GRANTED else None

    def _enter(self, request: ApprovalRequest) -> _Entry:
        now, wall_now = self._clock.now(), self.wall.now()
        request_id = f"r{next(self._ids)}"
        pending = PendingApproval(
            request_id=request_id, action=request.action, target=request.target, summary=request.summary,
            campaign_id=request.campaign_id, offer_id=_target_id(request.target, "offer"),
            instance_id=_target_id(request.target, "instance"), gpu_name=request.gpu_name,
            num_gpus=request.num_gpus, dph_usd=request.dph_usd, cost_cap_usd=request.cost_cap_usd,
            deadline_at=request.deadline_at, requested_at=now, asked_wall_s=wall_now,
            expires_wall_s=wall_now + self.expiry_s)
        entry = _Entry(pending, request, asyncio.get_running_loop().create_future())
        self._open[request_id] = entry
        self._bus.publish(ApprovalRequested(
            at=now, request_id=request_id, campaign_id=pending.campaign_id, action=str(pending.action),
            target=pending.target, summary=pending.summary, expires_in_s=self.expiry_s, offer_id=pending.offer_id,
            instance_id=pending.instance_id, gpu_name=pending.gpu_name, num_gpus=pending.num_gpus,
            dph_usd=pending.dph_usd, cost_cap_usd=pending.cost_cap_usd, deadline_at=pending.deadline_at))
        return entry

    def _by_rule(self, entry: _Entry) -> _Answer | None:
        request = entry.request
        if self._aborting is not None and request.action is Action.CREATE_INSTANCE:
            return _Answer(RequestState.REFUSED, None, "campaign", f"the campaign is aborting: {self._aborting}")
        instance_id = entry.pending.instance_id
        own_campaign = self._terms is None or request.campaign_id == self._terms.campaign_id
        if request.action is Action.DESTROY_INSTANCE and instance_id in self._owned and own_campaign:
            own = Approval(request, granted_by=OWN_INSTANCE_RULE, granted_at=self._clock.now())
            return _Answer(RequestState.GRANTED, own, OWN_INSTANCE_RULE)
        if self._plan is not None and (approval := self._plan.grant(request)) is not None:
            return _Answer(RequestState.GRANTED, approval, approval.granted_by)
        return None

    async def _by_policy(self, entry: _Entry) -> _Answer | None:
        if self._policy is None:
            return None
        approval = await self._policy.request(entry.request)
        if approval is None:
            return _Answer(RequestState.REFUSED, None, "policy", "not within what was approved")
        return _Answer(RequestState.GRANTED, approval, approval.granted_by)

    async def _by_human(self, entry: _Entry) -> _Answer:
        """Wait for a view's answer or the operator's, until the request expires (on the wall clock)."""
        if self._nobody_answers is not None:
            return _Answer(RequestState.REFUSED, None, "campaign", self._nobody_answers)
        entry.asks_human = True
        if self._keeping is not None:
            await self._keep(entry)
        asks_operator = self._operator is not None and self._keeping is None
        prompt = asyncio.create_task(self._prompt(entry)) if asks_operator else None
        timer = asyncio.create_task(self._expiry(entry.pending))
        waiting: set[asyncio.Future[Any]] = {entry.answer, timer}
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if prompt is not None:
                prompt.cancel()
        if entry.answer.done():
            return entry.answer.result()
        return self._expired()

    async def _expiry(self, pending: PendingApproval) -> None:
        """Return once the wall clock reaches the request's expiry (a sleep that woke early sleeps again)."""
        while not pending.is_expired(self.wall.now()):
            await self.wall.sleep(pending.expires_wall_s - self.wall.now())

    def _expired(self) -> _Answer:
        return _Answer(RequestState.EXPIRED, None, "expiry", f"unanswered for {self.expiry_s:.0f} wall seconds")

    async def _prompt(self, entry: _Entry) -> None:
        """Ask the operator about this request once the prompts before it are answered (one at a time)."""
        assert self._operator is not None
        async with self._prompt_lock:
            if entry.answer.done():
                return
            approval = await self._operator.request(entry.request)
        if entry.answer.done():
            return
        if entry.pending.is_expired(self.wall.now()):
            entry.answer.set_result(self._expired())
        elif approval is None:
            entry.answer.set_result(_Answer(RequestState.REFUSED, None, "operator prompt", "refused at the prompt"))
        else:
            entry.answer.set_result(_Answer(RequestState.GRANTED, approval, approval.granted_by))

    async def _close(self, entry: _Entry, answer: _Answer) -> None:
        """Settle the request (the first answer wins), audit it and publish it."""
        if not entry.answer.done():
            entry.answer.set_result(answer)
        answer = entry.answer.result()
        self._open.pop(entry.pending.request_id, None)
        await self._settle_kept(entry, answer)
        p, now = entry.pending, self._clock.now()
        granted = answer.state is RequestState.GRANTED and answer.approval is not None
        note = p.summary if granted else f"{p.summary} — {answer.state}: {answer.reason}"
        if answer.state is RequestState.EXPIRED:
            note += " (counts as refused)"
        try:
            await self._audit.record_audit(AuditRecord(
                at=now, kind=AuditKind.APPROVAL if granted else AuditKind.DECLINED, action=p.action, target=p.target,
                approval_id=answer.approval.approval_id if granted and answer.approval else None,
                granted_by=answer.by if granted else None, outcome=note, campaign_id=p.campaign_id))
        except VastuiError as exc:
            if p.action is not Action.DESTROY_INSTANCE:
                raise
            # Destroy before paperwork: the store and its journal both refused (a full disk); the destroy that
            # stops the billing still goes out, and the log says what could not be written.
            log.error("the approval to %s on %s goes ahead unrecorded: %s", p.action, p.target, exc.message)
        if answer.state is RequestState.EXPIRED:
            self._bus.publish(ApprovalExpired(at=now, request_id=p.request_id, campaign_id=p.campaign_id,
                                              action=str(p.action), target=p.target))
        elif answer.state is RequestState.CANCELLED:
            self._bus.publish(ApprovalCancelled(at=now, request_id=p.request_id, campaign_id=p.campaign_id,
                                                action=str(p.action), target=p.target, reason=answer.reason))
        else:
            self._bus.publish(ApprovalAnswered(
                at=now, request_id=p.request_id, campaign_id=p.campaign_id, action=str(p.action), target=p.target,
                granted=granted, answered_by=answer.by, reason=answer.reason,
                approval_id=answer.approval.approval_id if granted and answer.approval else None))
