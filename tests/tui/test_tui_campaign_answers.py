"""Answering a campaign at the console: ``x`` refuses one rent (never sent; that candidate is left out), ``q``
during the race asks, and Abort destroys everything and proves it gone (the simulator lists zero); a request left
unanswered expires and is audited as refused, and the queue shows it leave."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tui.campaign_console_support import CampaignConsole, campaign_console, pending_count, wait_until
from tests.tui.console_support import cells_of
from tests.waiting import until
from vastui.approval import AuditKind, offer_target
from vastui.events import InstanceRented
from vastui.events_live import AbortRequested, ApprovalAnswered, ApprovalExpired, ApprovalRequested
from vastui.store import SqliteStore
from vastui.tui.campaign_control import Leaving
from vastui.tui.dialogs.choice import ChoiceDialog

pytestmark = pytest.mark.slow


def racing(console: CampaignConsole) -> bool:
    picture = console.app.state.campaign
    if console.handle.is_done:
        raise AssertionError("the campaign ended before the race was seen")
    return picture is not None and any(c.phase == "measuring" and c.blocks for c in picture.snapshot.candidates)


async def test_refusing_one_rent_leaves_its_candidate_out_and_abort_during_the_race_proves_all_gone(
        tmp_path: Path) -> None:
    async with campaign_console(tmp_path, seed=4) as console:
        app = console.app
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: pending_count(console) > 0, what="the first approval request")
            table = console.view.approvals
            refused_target = str((cells_of(table, table.keys_in_order[0]) or ())[2])
            await pilot.press("x")
            while not racing(console):
                await wait_until(pilot, lambda: racing(console) or pending_count(console) > 0,
                                 what="a request or the race")
                if pending_count(console) > 0:
                    await pilot.press("a")
            await pilot.press("q")
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the leave dialog")
            assert app.focused is not None and app.focused.id == "choice-stay", "the safe answer has the focus"
            await pilot.press("tab", "enter")   # Abort, then quit
            await until(lambda: console.handle.is_done, "the aborted campaign's end")
            await until(lambda: not app.is_running, "the console to quit after the teardown")
        result = await console.handle.result()
        alive = await console.instances_alive()
        listed = await console.demo.instances_left()
        creates = console.created_offers()
        store_path = console.demo.db_path

    assert app.control.leaving is Leaving.ABORTED
    assert result.aborted == "the operator quit the console"
    assert alive == [] and listed == 0
    assert refused_target.startswith("offer:") and offer_target(int(refused_target[6:])) == refused_target
    refused_offer = int(refused_target[6:])
    assert creates and refused_offer not in creates, "the refused rent was never sent"
    [left_out] = [r for r in result.outcome.runs if r.candidate.offer.id == refused_offer]
    assert left_out.instance_id is None and left_out.detail == "rent not approved"
    rented = {e.instance_id for e in console.events if isinstance(e, InstanceRented)}
    assert rented and {d.instance_id for d in result.receipt.destroyed if d.is_proven_gone} == rented
    abort_seq = next(e.seq for e in console.events if isinstance(e, AbortRequested))
    assert not [e for e in console.events if isinstance(e, InstanceRented) and e.seq > abort_seq]
    async with await SqliteStore.open(store_path) as store:
        audit = await store.audit_records(campaign_id=console.handle.campaign_id)
    assert [(r.kind, r.granted_by) for r in audit if r.target == refused_target] == [(AuditKind.DECLINED, None)]


async def test_an_unanswered_approval_expires_and_is_audited_as_refused(tmp_path: Path) -> None:
    async with campaign_console(tmp_path, seed=5, expiry_s=3.0) as console:   # wall seconds
        app = console.app
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: pending_count(console) > 0, what="the first approval request")
            cells = cells_of(console.view.approvals, console.view.approvals.keys_in_order[0])
            assert cells is not None and cells[7] != "-", "the queue says when the request expires"
            await wait_until(pilot, lambda: console.handle.is_done, what="every request to expire")
            await wait_until(pilot, lambda: app.state.campaign_end is not None, what="the end shown")
            assert pending_count(console) == 0 and console.view.approvals.keys_in_order == ()
        store_path = console.demo.db_path
        creates = console.created_offers()
    expired = [e for e in console.events if isinstance(e, ApprovalExpired)]
    requested = [e for e in console.events if isinstance(e, ApprovalRequested)]
    assert expired and len(expired) == len(requested) and creates == []
    async with await SqliteStore.open(store_path) as store:
        audit = await store.audit_records(campaign_id=console.handle.campaign_id)
    rents = [r for r in audit if str(r.action) == "create_instance"]
    assert len(rents) == len(expired)
    assert all(r.kind is AuditKind.DECLINED and "expired" in r.outcome and "counts as refused" in r.outcome
               for r in rents)


async def test_shift_a_approves_the_printed_plan_as_a_whole_after_a_confirmation(tmp_path: Path) -> None:
    async with campaign_console(tmp_path, seed=6) as console:
        app = console.app
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: pending_count(console) > 0, what="the first approval request")
            await pilot.press("A")
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the plan confirmation")
            await pilot.press("enter")   # Cancel has the focus: nothing approved
            await wait_until(pilot, lambda: not isinstance(app.screen, ChoiceDialog), what="the dialog to close")
            granted = [e for e in console.events if isinstance(e, ApprovalAnswered) and e.granted]
            assert granted == [] and console.created_offers() == []   # nothing approved
            await pilot.press("A")
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the plan confirmation")
            await pilot.press("tab", "enter")
            await wait_until(pilot, lambda: any(isinstance(e, InstanceRented) for e in console.events),
                             what="a rent under the approved plan")
            await wait_until(pilot, lambda: pending_count(console) == 0, what="the queue to empty")
    plan_offers = {c.offer.id for c in (*console.handle.plan.candidates, *console.handle.plan.reserves)}
    assert set(console.created_offers()) <= plan_offers
    rents = [e for e in console.events if isinstance(e, ApprovalAnswered) and e.action == "create_instance"
             and e.granted]
    assert rents and all(e.answered_by == "console key A: the printed plan" for e in rents)


async def test_detach_leaves_the_console_and_the_campaign_runs_on(tmp_path: Path) -> None:
    async with campaign_console(tmp_path, seed=8) as console:
        app = console.app
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: pending_count(console) > 0, what="the first approval request")
            await pilot.press("ctrl+c")
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the leave dialog")
            await pilot.press("escape")   # the safe answer: stay
            await wait_until(pilot, lambda: not isinstance(app.screen, ChoiceDialog), what="the dialog to close")
            assert app.is_running and app.control.leaving is None
            await pilot.press("q")
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the leave dialog")
            await pilot.press("tab", "tab", "enter")   # Detach
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog)
                             and app.screen.title_text.startswith("Detach: what about"),
                             what="the question about the pending requests")
            await pilot.press("tab", "enter")   # Approve plan's
            await until(lambda: not app.is_running, "the console to quit")
        assert app.control.leaving is Leaving.DETACHED
        assert not console.handle.is_done and console.handle.abort_reason is None, "the campaign runs on"
        assert console.handle.snapshot().pending_approvals == (), "nothing left waiting for nobody"
        granted = [e for e in console.events if isinstance(e, ApprovalAnswered) and e.granted]
        assert granted and all(e.answered_by == "console key detach: the printed plan" for e in granted)
