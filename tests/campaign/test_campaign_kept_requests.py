"""A detached campaign's requests kept for ``vastui campaign approve``: the broker writes every request that waits for
a human (those waiting when keeping starts and every later one) to a real SQLite file, another connection to that
file answers them, and the broker applies the answer through its own approve/refuse (audited, naming who); expiry
stays on the broker's wall clock, an expired request is refused as expired and its row can no longer be approved;
the campaign's end cancels what is still kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.campaign.campaign_support import ManualClock
from tests.fakes import FakeClock
from tests.waiting import until
from vastui.approval import Action, Approval, ApprovalRequest, AuditKind, offer_target
from vastui.campaign.approvers import PlanTerms
from vastui.campaign.broker import ApprovalBroker
from vastui.events import Event, EventBus, Notice
from vastui.events_live import ApprovalAnswered, ApprovalExpired
from vastui.store import KeptRequest, RequestState, SqliteStore

CAMPAIGN = "ckept"
EXPIRY_S = 600.0
WAIT_S = 10.0   # wall-clock bound on waiting for a condition (never reached when things work)
BY_COMMAND = "vastui campaign approve (pid 4242)"


def rent(offer_id: int, *, cap: float = 1.0) -> ApprovalRequest:
    return ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(offer_id), summary=f"rent {offer_id}",
                           cost_cap_usd=cap, campaign_id=CAMPAIGN, gpu_name="RTX_4090", num_gpus=2, dph_usd=0.55,
                           deadline_at=1_800_003_600.0)


@pytest.fixture
async def paths(tmp_path: Path) -> AsyncIterator[Path]:
    path = tmp_path / "kept.sqlite3"
    async with await SqliteStore.open(path) as store:
        await store.save_manifest(digest="d1", name="resnet", toml_text='name = "resnet"', stored_at=1.0)
        await store.create_campaign(campaign_id=CAMPAIGN, manifest_digest="d1", created_at=1.0, phase="measure")
    yield path


@pytest.fixture
async def store(paths: Path) -> AsyncIterator[SqliteStore]:
    async with await SqliteStore.open(paths) as s:
        yield s


@pytest.fixture
async def other(paths: Path) -> AsyncIterator[SqliteStore]:
    """A second connection to the same file: what `vastui campaign approve` opens in its own process."""
    async with await SqliteStore.open(paths) as s:
        yield s


@pytest.fixture
def wall() -> ManualClock:
    return ManualClock(start=5_000.0)


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture
def broker(wall: ManualClock, store: SqliteStore, events: list[Event]) -> ApprovalBroker:
    bus = EventBus()
    bus.listen(events.append)
    terms = PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset({501}), max_spend_usd=4.0)
    return ApprovalBroker(clock=FakeClock(), bus=bus, audit=store, terms=terms, expiry_s=EXPIRY_S, wall=wall)


def kept_in(store: SqliteStore, count: int, state: RequestState = RequestState.PENDING,
            ) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(await store.kept_requests(CAMPAIGN, state=state)) == count
    return check


async def test_kept_requests_are_written_and_answered_from_a_second_connection(
        broker: ApprovalBroker, store: SqliteStore, other: SqliteStore, wall: ManualClock,
        events: list[Event]) -> None:
    epoch = FakeClock(start=1_900_000_000.0)
    waiting = asyncio.create_task(broker.request(rent(777, cap=2.5)))
    await until(lambda: len(broker.pending()) == 1, "a request waiting for a human")
    wall.advance(30.0)   # it has waited 30 wall seconds when the operator detaches
    broker.keep_for_command(store, campaign_id=CAMPAIGN, epoch=epoch)
    later = asyncio.create_task(broker.request(rent(778)))
    await until(kept_in(other, 2), "both requests kept in the store")

    first, second = await other.kept_requests(CAMPAIGN)
    assert (first.request_id, first.action, first.target, first.summary) == (
        broker_id(broker, 777), "create_instance", "offer:777", "rent 777")
    assert (first.cost_cap_usd, first.gpu_name, first.num_gpus, first.dph_usd, first.deadline_at) == (
        2.5, "RTX_4090", 2, 0.55, 1_800_003_600.0)
    assert first.asked_at == epoch.now() - 30.0 and first.expires_at == epoch.now() + EXPIRY_S - 30.0
    assert second.target == "offer:778" and second.expires_at == epoch.now() + EXPIRY_S
    told = [e.text for e in events if isinstance(e, Notice)]
    command = f"vastui campaign approve {CAMPAIGN}"
    assert told == [f"{first.request_id} waits for `{command}`: rent 777, cap $2.50 (expires in 10 min)",
                    f"{second.request_id} waits for `{command}`: rent 778, cap $1.00 (expires in 10 min)"], (
        "the headless run says what waits")
    assert not waiting.done() and not later.done(), "kept, not refused"

    assert await other.answer_kept_requests(campaign_id=CAMPAIGN, request_ids=[first.request_id], grant=True,
                                            answered_by=BY_COMMAND, at=epoch.now()) == [first.request_id]
    assert await other.answer_kept_requests(campaign_id=CAMPAIGN, request_ids=[second.request_id], grant=False,
                                            answered_by=BY_COMMAND, at=epoch.now(), reason="too dear") == [
        second.request_id]
    await until(lambda: waiting.done() and later.done(), "the broker to apply both",
                between=lambda: wall.advance(1.0))
    approval = waiting.result()
    assert isinstance(approval, Approval) and approval.granted_by == BY_COMMAND
    assert approval.request.target == "offer:777"
    assert later.result() is None

    audit = {r.target: r for r in await store.audit_records(campaign_id=CAMPAIGN)}
    assert audit["offer:777"].kind is AuditKind.APPROVAL and audit["offer:777"].granted_by == BY_COMMAND
    assert audit["offer:778"].kind is AuditKind.DECLINED and "too dear" in audit["offer:778"].outcome
    refused = [e for e in events if isinstance(e, ApprovalAnswered) and not e.granted]
    assert [(e.target, e.answered_by) for e in refused] == [("offer:778", BY_COMMAND)]
    states = {k.target: (k.state, k.answered_by) for k in await other.kept_requests(CAMPAIGN)}
    assert states == {"offer:777": (RequestState.GRANTED, BY_COMMAND),
                      "offer:778": (RequestState.REFUSED, BY_COMMAND)}


def broker_id(broker: ApprovalBroker, offer_id: int) -> str:
    return next(p.request_id for p in broker.pending() if p.offer_id == offer_id)


async def test_a_request_the_plan_grants_is_not_kept(broker: ApprovalBroker, store: SqliteStore,
                                                     other: SqliteStore, wall: ManualClock) -> None:
    broker.approve_plan()
    broker.keep_for_command(store, campaign_id=CAMPAIGN)
    assert isinstance(await asyncio.wait_for(broker.request(rent(501)), WAIT_S), Approval)
    outside = asyncio.create_task(broker.request(rent(900)))
    await until(kept_in(other, 1), "the request outside the plan kept")
    assert [k.target for k in await other.kept_requests(CAMPAIGN)] == ["offer:900"]
    assert not outside.done()
    assert await broker.stop_keeping("the campaign ended") == 1
    [row] = await other.kept_requests(CAMPAIGN)
    assert row.state is RequestState.CANCELLED, "nobody picks up an answer once keeping stopped"
    assert await other.answer_kept_requests(campaign_id=CAMPAIGN, request_ids=[row.request_id], grant=True,
                                            answered_by=BY_COMMAND, at=0.0) == []
    outside.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outside


async def test_expiry_stays_on_the_wall_clock_and_an_expired_request_cannot_be_approved(
        broker: ApprovalBroker, store: SqliteStore, other: SqliteStore, wall: ManualClock,
        events: list[Event]) -> None:
    epoch = FakeClock(start=1_900_000_000.0)
    broker.keep_for_command(store, campaign_id=CAMPAIGN, epoch=epoch)
    waiting = asyncio.create_task(broker.request(rent(777)))
    await until(kept_in(other, 1), "the request kept")
    [kept] = await other.kept_requests(CAMPAIGN)
    # the command checks the expiry itself: past it, even a row still marked pending is not granted
    assert await other.answer_kept_requests(campaign_id=CAMPAIGN, request_ids=[kept.request_id], grant=True,
                                            answered_by=BY_COMMAND, at=kept.expires_at) == []

    wall.advance(EXPIRY_S)
    assert await asyncio.wait_for(waiting, WAIT_S) is None
    assert [e.target for e in events if isinstance(e, ApprovalExpired)] == ["offer:777"]
    await until(kept_in(other, 1, RequestState.EXPIRED), "the row marked expired")
    assert await other.answer_kept_requests(campaign_id=CAMPAIGN, request_ids=[kept.request_id], grant=True,
                                            answered_by=BY_COMMAND, at=epoch.now()) == []
    [row] = await other.kept_requests(CAMPAIGN)
    assert (row.state, row.answered_by) == (RequestState.EXPIRED, "expiry")
    [audit] = await store.audit_records(campaign_id=CAMPAIGN)
    assert audit.kind is AuditKind.DECLINED and "expired" in audit.outcome


async def test_a_late_grant_of_a_request_the_broker_expired_is_overwritten_as_expired(
        broker: ApprovalBroker, store: SqliteStore, other: SqliteStore, wall: ManualClock) -> None:
    broker.keep_for_command(store, campaign_id=CAMPAIGN, epoch=FakeClock(start=1_900_000_000.0))
    waiting = asyncio.create_task(broker.request(rent(777)))
    await until(kept_in(other, 1), "the request kept")
    [kept] = await other.kept_requests(CAMPAIGN)
    # granted in the store just before its expiry, but the broker's wall clock reaches the expiry first
    assert await other.answer_kept_requests(campaign_id=CAMPAIGN, request_ids=[kept.request_id], grant=True,
                                            answered_by=BY_COMMAND, at=kept.asked_at) == [kept.request_id]
    wall.advance(EXPIRY_S)
    assert await asyncio.wait_for(waiting, WAIT_S) is None, "expiry refuses, it never approves"
    await until(kept_in(other, 1, RequestState.EXPIRED), "the row corrected to expired")
    rows: list[KeptRequest] = await other.kept_requests(CAMPAIGN)
    assert rows[0].answered_by == "expiry"


@pytest.mark.parametrize("keep", [True, False])
async def test_after_a_detach_the_console_keeps_or_refuses_what_waits(
        keep: bool, broker: ApprovalBroker, store: SqliteStore, other: SqliteStore, paths: Path,
        events: list[Event]) -> None:
    from vastui.cli.campaign_console import leave_pending

    waiting = asyncio.create_task(broker.request(rent(777)))
    await until(lambda: len(broker.pending()) == 1, "a request waiting for a human")
    command = leave_pending(broker, store, campaign_id=CAMPAIGN, keep=keep)
    if keep:
        assert command == ("vastui", "campaign", "approve", CAMPAIGN, "--db", str(paths))
        await until(kept_in(other, 1), "the request kept")
        assert not waiting.done(), "kept, not refused"
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    else:
        assert command is None
        assert await asyncio.wait_for(waiting, WAIT_S) is None, "refused: nobody is left to answer"
        assert await other.kept_requests(CAMPAIGN) == []
    await broker.stop_keeping("the test ended")
