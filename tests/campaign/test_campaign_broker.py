"""The approval broker: several requests pending at once with their facts as fields, answered by id, expiring as
refusals, cancelled on abort; the printed plan approved as a whole; the campaign's own destroys never waiting;
terminal prompts one at a time. Every outcome is checked in a real SQLite audit log and on the bus."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.campaign.campaign_support import ManualClock
from tests.waiting import until
from vastui.approval import Action, Approval, ApprovalRequest, AuditKind, instance_target, offer_target
from vastui.campaign.approvers import PlanTerms, PromptApprover, RefusingApprover
from vastui.campaign.broker import OWN_INSTANCE_RULE, ApprovalBroker
from vastui.errors import ApprovalRequired
from vastui.events import Event, EventBus
from vastui.events_live import ApprovalAnswered, ApprovalCancelled, ApprovalExpired, ApprovalRequested
from vastui.store import SqliteStore

CAMPAIGN = "cbroker"
PLAN_OFFERS = frozenset({501, 502, 503})
EXPIRY_S = 600.0
WAIT_S = 10.0   # wall-clock bound on waiting for a condition (never reached when things work)


def rent(offer_id: int, *, cap: float = 1.0) -> ApprovalRequest:
    return ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(offer_id), summary=f"rent {offer_id}",
                           cost_cap_usd=cap, campaign_id=CAMPAIGN, gpu_name="RTX_4090", num_gpus=2, dph_usd=0.55,
                           deadline_at=1_800_003_600.0)


def destroy(instance_id: int) -> ApprovalRequest:
    return ApprovalRequest(action=Action.DESTROY_INSTANCE, target=instance_target(instance_id),
                           summary=f"destroy {instance_id}", campaign_id=CAMPAIGN)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with await SqliteStore.open(tmp_path / "audit.sqlite3") as s:
        yield s


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture
def bus(events: list[Event]) -> EventBus:
    bus = EventBus()
    bus.listen(events.append)
    return bus


def broker_for(clock: ManualClock, bus: EventBus, store: SqliteStore, **options: object) -> ApprovalBroker:
    terms = PlanTerms(campaign_id=CAMPAIGN, offer_ids=PLAN_OFFERS, max_spend_usd=4.0)
    options.setdefault("wall", clock)   # one clock for both: these tests move time by hand
    return ApprovalBroker(clock=clock, bus=bus, audit=store, terms=terms, expiry_s=EXPIRY_S, **options)  # type: ignore[arg-type]


async def test_several_requests_wait_at_once_and_are_answered_by_id(clock: ManualClock, bus: EventBus,
                                                                    store: SqliteStore, events: list[Event]) -> None:
    broker = broker_for(clock, bus, store)
    asks = [asyncio.create_task(broker.request(r)) for r in (rent(501), rent(777, cap=2.5), rent(502), destroy(9))]
    await until(lambda: len(broker.pending()) == 4, "four pending requests")
    pending = broker.pending()
    assert len({p.request_id for p in pending}) == 4
    first = pending[0]
    assert (first.action, first.offer_id, first.instance_id, first.gpu_name, first.num_gpus) == (
        Action.CREATE_INSTANCE, 501, None, "RTX_4090", 2)
    assert (first.dph_usd, first.cost_cap_usd, first.campaign_id) == (0.55, 1.0, CAMPAIGN)
    assert first.deadline_at == 1_800_003_600.0 and first.expires_wall_s == clock.now() + EXPIRY_S
    assert pending[3].instance_id == 9 and pending[3].offer_id is None and not pending[3].is_spending

    assert broker.approve(pending[1].request_id, by="key a")
    assert broker.refuse(pending[0].request_id, by="key x")
    assert not broker.approve(pending[0].request_id), "an answered request cannot be answered again"
    assert not broker.approve("r999")
    granted = await asyncio.wait_for(asks[1], WAIT_S)
    assert isinstance(granted, Approval) and granted.request.target == offer_target(777)
    assert granted.granted_by == "key a"
    assert await asyncio.wait_for(asks[0], WAIT_S) is None
    assert {p.request_id for p in broker.pending()} == {pending[2].request_id, pending[3].request_id}

    clock.advance(EXPIRY_S + 1)   # the other two were never answered
    assert await asyncio.wait_for(asks[2], WAIT_S) is None
    assert await asyncio.wait_for(asks[3], WAIT_S) is None
    assert broker.pending() == ()

    audit = {r.target: r for r in await store.audit_records(campaign_id=CAMPAIGN)}
    assert audit[offer_target(777)].kind is AuditKind.APPROVAL and audit[offer_target(777)].granted_by == "key a"
    assert audit[offer_target(777)].approval_id == granted.approval_id
    assert audit[offer_target(501)].kind is AuditKind.DECLINED and "refused" in audit[offer_target(501)].outcome
    for target in (offer_target(502), instance_target(9)):
        assert audit[target].kind is AuditKind.DECLINED
        assert "expired" in audit[target].outcome and "counts as refused" in audit[target].outcome
    requested = [e for e in events if isinstance(e, ApprovalRequested)]
    assert [e.request_id for e in requested] == [p.request_id for p in pending]
    assert requested[1].cost_cap_usd == 2.5 and requested[1].offer_id == 777
    answered = {e.request_id: e.granted for e in events if isinstance(e, ApprovalAnswered)}
    assert answered == {pending[1].request_id: True, pending[0].request_id: False}
    assert {e.request_id for e in events if isinstance(e, ApprovalExpired)} == {pending[2].request_id,
                                                                                 pending[3].request_id}


async def test_approving_the_plan_grants_exactly_its_rents_once_each(clock: ManualClock, bus: EventBus,
                                                                     store: SqliteStore) -> None:
    broker = broker_for(clock, bus, store)
    outside = ApprovalRequest(action=Action.TRANSFER_CREDIT, target="account:1", summary="move money",
                              campaign_id=CAMPAIGN)
    asks = {name: asyncio.create_task(broker.request(r)) for name, r in (
        ("plan", rent(501)), ("not in plan", rent(999)), ("over cap", rent(502, cap=40.0)), ("credit", outside))}
    await until(lambda: len(broker.pending()) == 4, "four pending requests")
    assert broker.approve_plan(by="key A") == 1
    approval = await asyncio.wait_for(asks["plan"], WAIT_S)
    assert approval is not None and approval.granted_by == "key A"
    assert len(broker.pending()) == 3 and not any(asks[n].done() for n in ("not in plan", "over cap", "credit"))
    # later requests within the plan are granted at once; the same offer a second time is not
    later = await asyncio.wait_for(broker.request(rent(503)), WAIT_S)
    assert later is not None and later.request.target == offer_target(503)
    again = asyncio.create_task(broker.request(rent(501)))
    await until(lambda: len(broker.pending()) == 4, "the repeated rent to wait")
    assert broker.cancel_pending("test over") == 4
    for task in (*asks.values(), again):
        await asyncio.wait_for(task, WAIT_S)
    cancelled = [r for r in await store.audit_records(campaign_id=CAMPAIGN) if "cancelled" in r.outcome]
    assert len(cancelled) == 4 and all(r.kind is AuditKind.DECLINED for r in cancelled)


async def test_the_campaigns_own_destroys_never_wait_and_others_do(clock: ManualClock, bus: EventBus,
                                                                   store: SqliteStore) -> None:
    broker = broker_for(clock, bus, store, operator=PromptApprover(_never_answers, clock=clock))
    broker.mark_owned(41)
    approval = await asyncio.wait_for(broker.request(destroy(41)), WAIT_S)   # the clock never moved
    assert approval is not None and approval.granted_by == OWN_INSTANCE_RULE
    stranger = asyncio.create_task(broker.request(destroy(42)))
    await until(lambda: len(broker.pending()) == 1, "the stranger's destroy to wait")
    assert broker.pending()[0].instance_id == 42
    clock.advance(EXPIRY_S)
    assert await asyncio.wait_for(stranger, WAIT_S) is None


async def _never_answers(_text: str) -> bool:
    await asyncio.Event().wait()
    return True


async def test_abort_cancels_what_waits_refuses_new_rents_and_still_destroys_its_own(
        clock: ManualClock, bus: EventBus, store: SqliteStore, events: list[Event]) -> None:
    broker = broker_for(clock, bus, store)
    waiting = asyncio.create_task(broker.request(rent(501)))
    await until(lambda: len(broker.pending()) == 1, "a pending rent")
    assert broker.abort("operator pressed q") == 1
    assert await asyncio.wait_for(waiting, WAIT_S) is None
    broker.approve_plan()
    assert await broker.request(rent(502)) is None, "no rent during an abort, even within the approved plan"
    broker.mark_owned(7)
    assert await broker.request(destroy(7)) is not None
    records = await store.audit_records(campaign_id=CAMPAIGN)
    assert [(r.kind, r.target) for r in records] == [(AuditKind.DECLINED, offer_target(501)),
                                                    (AuditKind.DECLINED, offer_target(502)),
                                                    (AuditKind.APPROVAL, instance_target(7))]
    assert "cancelled: operator pressed q" in records[0].outcome and "aborting" in records[1].outcome
    assert [e.reason for e in events if isinstance(e, ApprovalCancelled)] == ["operator pressed q"]


async def test_a_request_whose_asker_stops_is_audited_as_cancelled(clock: ManualClock, bus: EventBus,
                                                                   store: SqliteStore, events: list[Event]) -> None:
    broker = broker_for(clock, bus, store)
    asker = asyncio.create_task(broker.request(rent(501)))
    await until(lambda: len(broker.pending()) == 1, "a pending rent")
    asker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asker
    assert broker.pending() == ()
    [record] = await store.audit_records(campaign_id=CAMPAIGN)
    assert record.kind is AuditKind.DECLINED and "cancelled" in record.outcome
    assert any(isinstance(e, ApprovalCancelled) for e in events)


async def test_a_policy_decides_without_waiting_and_its_refusal_is_audited(clock: ManualClock, bus: EventBus,
                                                                           store: SqliteStore) -> None:
    broker = broker_for(clock, bus, store, policy=RefusingApprover("no terminal"))
    with pytest.raises(ApprovalRequired, match="no terminal"):
        await broker.request(rent(501))
    [record] = await store.audit_records(campaign_id=CAMPAIGN)
    assert record.kind is AuditKind.DECLINED and "no terminal" in record.outcome


async def test_terminal_prompts_come_one_at_a_time_in_order(clock: ManualClock, bus: EventBus,
                                                            store: SqliteStore) -> None:
    shown: list[str] = []
    answers: list[asyncio.Future[bool]] = []
    on_screen = 0
    most_on_screen = 0

    async def ask(text: str) -> bool:
        nonlocal on_screen, most_on_screen
        on_screen += 1
        most_on_screen = max(most_on_screen, on_screen)
        shown.append(text)
        answers.append(asyncio.get_running_loop().create_future())
        try:
            return await answers[-1]
        finally:
            on_screen -= 1

    broker = broker_for(clock, bus, store, operator=PromptApprover(ask, clock=clock))
    asks = [asyncio.create_task(broker.request(rent(offer))) for offer in (501, 502, 503)]
    await until(lambda: len(shown) == 1, "the first prompt")
    await asyncio.sleep(0.05)
    assert len(shown) == 1, "the second prompt must wait until the first is answered"
    answers[0].set_result(True)
    await until(lambda: len(shown) == 2, "the second prompt")
    # a view answers the request on screen: its prompt is withdrawn and the next one shows
    assert broker.refuse(broker.pending()[0].request_id, by="view")
    await until(lambda: len(shown) == 3, "the third prompt")
    answers[2].set_result(False)
    results = [await asyncio.wait_for(task, WAIT_S) for task in asks]
    assert results[0] is not None and results[0].granted_by == "interactive prompt"
    assert results[1] is None and results[2] is None
    assert most_on_screen == 1
    assert ["501" in shown[0], "502" in shown[1], "503" in shown[2]] == [True, True, True]
    assert answers[1].cancelled(), "the withdrawn prompt stopped waiting for the terminal"


async def test_an_unanswered_prompt_expires_as_a_refusal(clock: ManualClock, bus: EventBus,
                                                         store: SqliteStore) -> None:
    broker = broker_for(clock, bus, store, operator=PromptApprover(_never_answers, clock=clock))
    asker = asyncio.create_task(broker.request(rent(501)))
    await until(lambda: len(broker.pending()) == 1, "a pending rent")
    clock.advance(EXPIRY_S - 1)
    await asyncio.sleep(0.02)
    assert not asker.done(), "not expired before its time"
    clock.advance(1)
    assert await asyncio.wait_for(asker, WAIT_S) is None
    [record] = await store.audit_records(campaign_id=CAMPAIGN)
    assert record.kind is AuditKind.DECLINED and "expired" in record.outcome


async def test_expiry_is_wall_time_and_an_expired_request_cannot_be_approved(bus: EventBus, store: SqliteStore,
                                                                             events: list[Event]) -> None:
    market, wall = ManualClock(), ManualClock(start=500.0)   # the campaign's clock and the operator's
    broker = broker_for(market, bus, store, wall=wall)
    first = asyncio.create_task(broker.request(rent(501)))
    second = asyncio.create_task(broker.request(rent(502)))
    await until(lambda: len(broker.pending()) == 2, "two pending rents")
    market.advance(20 * 60.0)   # a simulator at x120 moves 20 minutes in 10 wall seconds
    await asyncio.sleep(0.05)
    assert not first.done() and len(broker.pending()) == 2, "the marketplace's clock does not expire a request"
    pending = broker.pending()[0]
    assert pending.expires_in_s(wall.now()) == EXPIRY_S and pending.waited_s(wall.now()) == 0.0

    wall.advance(EXPIRY_S)   # its time is up; its timer has not run yet (nothing awaited since)
    assert pending.is_expired(wall.now())
    assert not broker.approve(pending.request_id, by="key a"), "expiry refuses, never approves"
    assert broker.approve_plan(by="key A") == 0, "the plan does not grant an expired request either"
    assert await asyncio.wait_for(first, WAIT_S) is None
    assert await asyncio.wait_for(second, WAIT_S) is None
    records = await store.audit_records(campaign_id=CAMPAIGN)
    assert [(r.kind, "expired" in r.outcome) for r in records] == [(AuditKind.DECLINED, True),
                                                                  (AuditKind.DECLINED, True)]
    assert len([e for e in events if isinstance(e, ApprovalExpired)]) == 2
    assert [e.expires_in_s for e in events if isinstance(e, ApprovalRequested)] == [EXPIRY_S, EXPIRY_S]


async def test_once_nobody_answers_what_waits_and_what_comes_is_refused_unless_the_plan_covers_it(
        clock: ManualClock, bus: EventBus, store: SqliteStore) -> None:
    broker = broker_for(clock, bus, store)
    waiting = asyncio.create_task(broker.request(rent(999)))
    await until(lambda: len(broker.pending()) == 1, "a pending rent")
    assert broker.approve_plan(by="detach: the printed plan") == 0
    assert broker.stop_asking("the operator detached") == 1
    assert await asyncio.wait_for(waiting, WAIT_S) is None
    assert await asyncio.wait_for(broker.request(rent(998)), WAIT_S) is None, "refused at once, not left to expire"
    within = await asyncio.wait_for(broker.request(rent(501)), WAIT_S)
    assert within is not None and within.granted_by == "detach: the printed plan"
    records = await store.audit_records(campaign_id=CAMPAIGN)
    assert [(r.kind, r.target) for r in records] == [(AuditKind.DECLINED, offer_target(999)),
                                                    (AuditKind.DECLINED, offer_target(998)),
                                                    (AuditKind.APPROVAL, offer_target(501))]
    assert all("the operator detached" in r.outcome for r in records[:2])
