"""Whole demo campaigns on the embedded simulator, driven through ``CampaignHandle`` as a view drives it: the
event stream is complete and every rent follows a granted approval; a snapshot taken mid-race holds everything a
view draws; an abort during the race destroys every instance and proves it gone; a refused rent is never sent;
unanswered approvals expire as refusals in the audit log."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.waiting import until
from vastui.approval import AuditKind, offer_target
from vastui.campaign.candidate import NotRented
from vastui.campaign.handle import CampaignHandle
from vastui.campaign.snapshot import CampaignSnapshot, CampaignStage
from vastui.events import (
    CampaignFinished,
    DecisionMade,
    Event,
    EventsLost,
    InstanceConfirmedGone,
    InstanceRented,
    SampleTaken,
)
from vastui.events_live import (
    AbortRequested,
    ApprovalAnswered,
    ApprovalExpired,
    ApprovalRequested,
    CampaignPhaseChanged,
    ProgressReported,
    StandingsUpdated,
    WarmupEnded,
)
from vastui.sim.demo import DemoSession, open_demo
from vastui.store import SqliteStore

# Slower than the other campaign tests' 300: these watch the race itself, which a loaded machine at 300x can
# squeeze out entirely (every candidate reaches its deadline in the canary).
TIME_SCALE = 100.0
_CREATE = re.compile(r"^/api/v0/asks/(\d+)/$")

pytestmark = pytest.mark.slow


def racing(handle: CampaignHandle) -> bool:
    if handle.is_done:
        raise AssertionError(f"the campaign ended before the race was seen: {handle.snapshot().candidates}")
    state = handle.snapshot()
    return bool(state.race.rows) and any(c.phase == "measuring" for c in state.candidates)


def created_offers(demo: DemoSession) -> list[int]:
    return [int(m.group(1)) for r in demo.market.request_log
            if r.method == "PUT" and (m := _CREATE.match(r.path))]


async def market_instances(demo: DemoSession) -> list[int]:
    await demo.market.refresh()
    return list(demo.market.instance_ids())


def check_mid_race(state: CampaignSnapshot, handle: CampaignHandle) -> None:
    """A snapshot taken while candidates race holds the plan, phases, standings, spend, GPUs and instances."""
    plan = handle.plan
    assert state.stage is CampaignStage.RUNNING and state.campaign_id == plan.campaign_id
    assert [c.candidate_id for c in state.plan.candidates] == [c.candidate_id for c in plan.candidates]
    assert all(c.hypothesis and c.dph_usd > 0 and c.max_spend_usd > 0 for c in state.plan.candidates)
    assert state.plan.budget_usd == plan.budget_usd and state.plan.spend_cap_usd == plan.spend_upper_bound_usd
    assert state.plan.started_at is not None and state.plan.deadline_at is not None
    assert state.plan.deadline_at > state.plan.started_at
    assert all(c.time_in_phase_s >= 0 and c.phase_since <= state.taken_at for c in state.candidates)
    measuring = [c for c in state.candidates if c.phase == "measuring"]
    assert measuring and all(c.instance_id is not None and c.deadline_at is not None for c in measuring)
    assert any(c.warmup_s is not None and c.steps > 0 and c.units_total > 0 for c in state.candidates)
    assert state.race.rows and state.race.updated_at is not None
    measured = [r for r in state.race.rows if r.blocks > 0]
    assert measured and all(r.cost_per_unit_usd is not None for r in measured)
    for row in measured:
        band = row.cost_per_unit_usd
        assert band is not None and band.low <= band.point <= band.high
    assert 0 < state.spend.spent_usd and 0 < state.spend.reserved_usd <= state.spend.budget_usd + 1e-9
    assert state.gpus and {g.purpose for g in state.gpus} <= {"canary", "race", "tuning"}
    assert all(g.util_history and g.power_w is not None for g in state.gpus)
    rented = [i for i in state.instances if i.rented_at is not None]
    assert rented and all(i.candidate is not None and i.deadline_at is not None for i in rented)
    assert state.pending_approvals == () and state.decision is None
    assert 0 < state.seq <= handle.bus.last_seq


async def test_a_whole_campaign_streams_every_event_in_order_and_its_snapshot_draws_everything(
        tmp_path: Path) -> None:
    async with open_demo(seed=2, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        events: list[Event] = []
        demo.services.bus.listen(events.append)
        lagging = demo.services.bus.subscribe(queue_size=25)
        handle = demo.start(plan_approved=True)
        await until(lambda: racing(handle), "the race")
        check_mid_race(handle.snapshot(), handle)
        result = await handle.result()
        final = handle.snapshot()
        alive = await market_instances(demo)

    # the sequence is complete: 1, 2, 3, ... with nothing missing
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    # every rent follows an approval-answered event that granted exactly that offer
    granted: set[str] = set()
    rented = 0
    for event in events:
        if isinstance(event, ApprovalAnswered) and event.granted:
            granted.add(event.target)
        elif isinstance(event, InstanceRented):
            assert offer_target(event.offer_id) in granted, event
            rented += 1
    assert rented >= 2
    requested = {e.request_id for e in events if isinstance(e, ApprovalRequested)}
    answered = [e.request_id for e in events if isinstance(e, ApprovalAnswered)]
    assert sorted(answered) == sorted(requested), "each request answered exactly once"
    # what a live view needs is in the stream
    progress = [e for e in events if isinstance(e, ProgressReported)]
    assert {"canary", "race"} <= {e.purpose for e in progress}
    assert all(e.steps >= 1 and e.units_total >= e.units for e in progress)
    assert any(isinstance(e, WarmupEnded) for e in events)
    standings = [e for e in events if isinstance(e, StandingsUpdated)]
    assert standings and all(e.rows and e.budget_usd > 0 for e in standings)
    samples = [e for e in events if isinstance(e, SampleTaken)]
    assert samples and all(e.purpose in ("canary", "race", "tuning") and e.instance_id for e in samples)
    assert any(e.power_w is not None and e.mem_total_mib is not None for e in samples)
    stages = [e.phase for e in events if isinstance(e, CampaignPhaseChanged)]
    assert stages == ["running", "teardown"]
    [decision] = [e for e in events if isinstance(e, DecisionMade)]
    assert decision.chosen == result.receipt.decision.chosen and decision.units is not None
    assert isinstance(events[-1], CampaignFinished) and events[-1].status == "clean"

    # the subscriber that never read learns how many it lost, then reads the last events without a gap
    marker = lagging.get_nowait()
    assert isinstance(marker, EventsLost) and marker.count == len(events) - 25
    assert (marker.first_seq, marker.last_seq) == (1, len(events) - 25)
    assert [lagging.get_nowait().seq for _ in range(25)] == list(range(len(events) - 24, len(events) + 1))

    # the final snapshot: decision with runner-up and margin, every instance destroyed and proven gone
    assert final.stage is CampaignStage.FINISHED and final.finished_status == "clean"
    assert final.decision is not None and final.decision.chosen == result.receipt.decision.chosen
    assert final.decision.runner_up == result.receipt.decision.runner_up
    assert final.decision.margin == result.receipt.decision.margin
    gone = {e.instance_id for e in events if isinstance(e, InstanceConfirmedGone)}
    assert {i.instance_id for i in final.instances} == gone == {d.instance_id for d in result.receipt.destroyed}
    assert all(i.is_proven_gone and i.destroy_sent_at is not None for i in final.instances)
    assert all(i.destroy_sent_at <= i.missed_listing_at[0] for i in final.instances)  # type: ignore[operator]
    assert alive == []


async def test_abort_during_the_race_destroys_everything_and_proves_it_gone(tmp_path: Path) -> None:
    async with open_demo(seed=3, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        events: list[Event] = []
        demo.services.bus.listen(events.append)
        handle = demo.start(plan_approved=True)
        # as Ctrl-C on a headless run: the wait is cancelled, the campaign aborts, the wait outlives the teardown
        waiter = asyncio.create_task(handle.result(abort_if_cancelled="operator pressed q"))
        await until(lambda: racing(handle), "the race")
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert handle.is_done, "the cancelled wait lasted until the campaign ended"
        handle.abort("pressed twice")  # nothing to do any more
        result = await handle.result()
        state = handle.snapshot()
        alive = await market_instances(demo)
        listed = await demo.instances_left()
        open_runs = await demo.services.store.open_runs(campaign_id=handle.campaign_id)
        runs = await demo.services.store.runs(campaign_id=handle.campaign_id)
    assert result.aborted == "operator pressed q" and state.abort_reason == "operator pressed q"
    assert [e.reason for e in events if isinstance(e, AbortRequested)] == ["operator pressed q"]
    assert alive == [] and listed == 0
    rented = {e.instance_id for e in events if isinstance(e, InstanceRented)}
    assert rented and {i.instance_id for i in state.instances if i.is_proven_gone} == rented
    assert result.receipt.teardown_passed and not result.receipt.leaked_instance_ids
    assert any("aborted: operator pressed q" in note for note in result.receipt.notes)
    assert state.stage is CampaignStage.FINISHED
    assert any(c.phase == "aborted" and "stopped in measuring" in c.detail for c in state.candidates)
    assert all(c.phase not in ("renting", "loading", "ssh", "canary", "measuring", "tuning") for c in state.candidates)
    assert open_runs == [] and any(r.status == "interrupted" for r in runs), "runs cut short are closed"
    # nothing was rented after the abort
    abort_seq = next(e.seq for e in events if isinstance(e, AbortRequested))
    assert not [e for e in events if isinstance(e, InstanceRented) and e.seq > abort_seq]


async def test_a_refused_rent_leaves_its_candidate_out_and_is_never_sent(tmp_path: Path) -> None:
    async with open_demo(seed=4, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        handle = demo.start(plan_approved=False)
        refused: list[int] = []

        async def view() -> None:
            """Answers as an operator at the keys would: refuse the first rent, approve every other."""
            queue = handle.subscribe()
            while True:
                event = await queue.get()
                if not isinstance(event, ApprovalRequested) or event.offer_id is None:
                    continue
                if not refused:
                    refused.append(event.offer_id)
                    assert handle.broker.refuse(event.request_id, by="key x")
                else:
                    assert handle.broker.approve(event.request_id, by="key a")

        keys = asyncio.create_task(view())
        try:
            result = await handle.result()
        finally:
            keys.cancel()
        creates = created_offers(demo)
        alive = await market_instances(demo)
        db_path = demo.db_path
    assert len(refused) == 1 and refused[0] not in creates
    assert creates, "the approved candidates were rented"
    [left_out] = [r for r in result.outcome.runs if r.candidate.offer.id == refused[0]]
    assert left_out.instance_id is None and left_out.not_rented is NotRented.NOT_APPROVED
    assert alive == []
    async with await SqliteStore.open(db_path) as store:
        audit = await store.audit_records(campaign_id=handle.campaign_id)
    decisions = [(r.kind, r.granted_by) for r in audit if r.target == offer_target(refused[0])]
    assert decisions == [(AuditKind.DECLINED, None)]
    granted_creates = {r.target for r in audit if r.kind is AuditKind.APPROVAL and str(r.action) == "create_instance"}
    assert {offer_target(o) for o in creates} <= granted_creates


async def test_approvals_nobody_answers_expire_and_are_audited_as_refused(tmp_path: Path) -> None:
    expiry_s = 1.0   # wall seconds: the operator's time, whatever the simulator's scale
    async with open_demo(seed=5, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        events: list[Event] = []
        demo.services.bus.listen(events.append)
        handle = demo.start(plan_approved=False, expiry_s=expiry_s)
        await until(lambda: bool(handle.snapshot().pending_approvals), "a pending approval")
        pending = handle.snapshot().pending_approvals[0]
        assert pending.expires_wall_s == pending.asked_wall_s + expiry_s and pending.cost_cap_usd is not None
        result = await handle.result()
        creates = created_offers(demo)
        db_path = demo.db_path
    expired = [e for e in events if isinstance(e, ApprovalExpired)]
    requested = [e for e in events if isinstance(e, ApprovalRequested)]
    assert expired and len(expired) == len(requested)
    assert creates == [] and result.receipt.decision.chosen is None
    assert all(r.instance_id is None for r in result.outcome.runs)
    async with await SqliteStore.open(db_path) as store:
        audit = await store.audit_records(campaign_id=handle.campaign_id)
    creates_audited = [r for r in audit if str(r.action) == "create_instance"]
    assert len(creates_audited) == len(expired)
    assert all(r.kind is AuditKind.DECLINED and "expired" in r.outcome and "counts as refused" in r.outcome
               for r in creates_audited)
