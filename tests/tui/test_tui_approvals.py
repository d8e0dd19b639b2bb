"""Approvals wherever the operator is: a request arriving while another view is shown is counted on the status bar,
announced (toast and bell) and approved with ``a`` there; expiry follows the operator's wall clock, not a simulator
running 120 times faster, and an expired request cannot be approved; detaching with requests pending asks what
becomes of them, and a receipt that decided without measuring every candidate says so and is provisional."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import FakeWallClock
from tests.tui.campaign_console_support import CampaignConsole, campaign_console, wait_until
from tests.tui.console_support import cells_of
from tests.waiting import until
from vastui.bench.receipt import render_markdown
from vastui.clock import ScaledClock
from vastui.events import InstanceRented
from vastui.events_live import ApprovalAnswered, ApprovalExpired, ApprovalRequested
from vastui.store import RequestState
from vastui.tui.app import VastuiApp
from vastui.tui.campaign_control import Leaving
from vastui.tui.dialogs.approvals import ApprovalsScreen
from vastui.tui.dialogs.choice import ChoiceDialog
from vastui.tui.widgets.statusbar import StatusBar

pytestmark = pytest.mark.slow

EXPIRY_S = 15 * 60.0


def status(console: CampaignConsole) -> str:
    return console.app.query_one(StatusBar).plain_text


def answerable(console: CampaignConsole) -> int:
    return len(console.app.desk.answerable())


def needed_toasts(app: VastuiApp) -> list[str]:
    return [n.title for n in app._notifications if "pproval" in n.title and "needed" in n.title]


def granted_by(console: CampaignConsole, request_id: str) -> str | None:
    return next((e.answered_by for e in console.events if isinstance(e, ApprovalAnswered)
                 and e.request_id == request_id and e.granted), None)


@pytest.mark.parametrize(("key", "view"), [("1", "offers"), ("4", "account"), ("6", "gpus")])
async def test_an_approval_arriving_in_another_view_is_counted_announced_and_approved_there(
        tmp_path: Path, key: str, view: str) -> None:
    async with campaign_console(tmp_path, seed=4) as console:
        app = console.app
        bells: list[str] = []
        app.bell = lambda: bells.append("bell")  # type: ignore[method-assign]   # the terminal's bell, recorded
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(key)
            assert app.current_view == view
            await wait_until(pilot, lambda: answerable(console) > 0 and "TO APPROVE" in status(console),
                             what="a request counted on the status bar")
            assert app.current_view == view, "nothing switched the view for the operator"
            count = answerable(console)
            assert f"{count} TO APPROVE, oldest" in status(console)
            assert bells, "the bell rang when the request arrived"
            assert needed_toasts(app), "a toast said so"
            assert app.check_action("approve_oldest", ()) is True, "the footer offers a"
            oldest = app.desk.answerable()[0].request_id
            assert console.created_offers() == []
            await pilot.press("a")
            await wait_until(pilot, lambda: granted_by(console, oldest) is not None, what="the oldest request granted")
            assert granted_by(console, oldest) == "console key a (oldest)"
            await wait_until(pilot, lambda: any(isinstance(e, InstanceRented) for e in console.events),
                             what="the approved rent")
            assert app.current_view == view
            # once none of the requests a toast announced waits any more, the toast is taken down at once, not
            # left up for its 20 s saying approvals are needed (the bound is well inside those 20 s)
            while answerable(console) > 0:
                await pilot.press("a")
            await wait_until(pilot, lambda: not needed_toasts(app) or answerable(console) > 0,
                             what="the arrival toast taken down", deadline_s=10.0)
            assert answerable(console) > 0 or not needed_toasts(app)


async def test_expiry_follows_the_wall_clock_not_a_simulator_at_x120(tmp_path: Path) -> None:
    wall = FakeWallClock()
    async with campaign_console(tmp_path, seed=5, expiry_s=EXPIRY_S, wall=wall, time_scale=120.0) as console:
        app = console.app
        market_clock = console.demo.services.clock
        assert isinstance(market_clock, ScaledClock) and market_clock.scale == 120.0
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: answerable(console) > 0, what="the first approval request")
            request = app.desk.answerable()[0]
            # ten wall seconds at x120 is twenty minutes of the marketplace's time: jump it at once
            market_clock.advance(20 * 60.0)
            await wait_until(pilot, lambda: market_clock.now() >= request.requested_at + 20 * 60.0,
                             what="the market clock past the old, simulated expiry")
            await pilot.pause(0.3)
            assert request.request_id in {p.request_id for p in console.handle.broker.pending()}
            assert request.request_id in {p.request_id for p in app.desk.answerable()}, "still within its time"
            assert not any(isinstance(e, ApprovalExpired) for e in console.events)
            app.render_current()   # what the queue shows now, not what it showed before the jump
            cells = cells_of(console.view.approvals, request.request_id)
            assert cells is not None and str(cells[7]) == "15m", "it still has its whole 15 minutes"

            wall.advance(EXPIRY_S)   # fifteen minutes of the operator's time
            assert not app.desk.approve(request.request_id), "an expired request cannot be approved"
            await pilot.press("a")   # nothing left to approve: the key does nothing
            await wait_until(pilot, lambda: any(isinstance(e, ApprovalExpired) and e.request_id == request.request_id
                                                for e in console.events), what="the request to expire")
            await wait_until(pilot, lambda: any(p.request_id == request.request_id for p in app.desk.expired),
                             what="the console to keep it as expired")
            assert granted_by(console, request.request_id) is None
            assert "TO APPROVE" not in status(console) or answerable(console) > 0
            await pilot.press("ctrl+a")
            await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen), what="the approvals pop-up")
            popup = app.screen
            assert isinstance(popup, ApprovalsScreen)
            row = cells_of(popup.table, f"expired:{request.request_id}")
            assert row is not None and str(row[-1]) == "EXPIRED"
            popup.table.move_cursor(row=popup.table.keys_in_order.index(f"expired:{request.request_id}"))
            await pilot.press("a")
            await pilot.pause()
            assert granted_by(console, request.request_id) is None
            assert request.offer_id not in console.created_offers()


async def test_detach_with_pending_requests_asks_and_the_receipt_names_the_unmeasured(tmp_path: Path) -> None:
    async with campaign_console(tmp_path, seed=4) as console:
        app = console.app
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: answerable(console) > 0, what="the first approval request")
            await pilot.press("a")   # one candidate is rented and measured
            await wait_until(pilot, lambda: any(isinstance(e, InstanceRented) for e in console.events),
                             what="the approved rent")
            await wait_until(pilot, lambda: answerable(console) > 0, what="another request waiting")
            waiting = {p.request_id for p in app.desk.answerable()}
            await pilot.press("q")
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the leave dialog")
            await pilot.press("tab", "tab", "enter")   # Detach
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog)
                             and app.screen.title_text.startswith("Detach: what about"), what="the pending question")
            question = app.screen
            assert isinstance(question, ChoiceDialog)
            assert all(any(r in line for line in question.lines) for r in waiting), "it lists what waits"
            assert app.focused is not None and app.focused.id == "choice-stay", "the safe answer has the focus"
            await pilot.press("tab", "tab", "enter")   # Refuse all
            await until(lambda: not app.is_running, "the console to quit")
        assert app.control.leaving is Leaving.DETACHED
        result = await console.handle.result()
        requested = {e.request_id for e in console.events if isinstance(e, ApprovalRequested)}
        answered = {e.request_id for e in console.events if isinstance(e, ApprovalAnswered)}
        assert waiting <= answered and requested == answered, "every request answered, none left to expire"
        assert not any(isinstance(e, ApprovalExpired) for e in console.events)

    receipt = result.receipt
    unmeasured = receipt.never_measured
    assert unmeasured and len(unmeasured) < len(receipt.candidates)
    assert receipt.is_provisional
    text = render_markdown(receipt)
    assert f"- Provisional: **yes** — never measured: {', '.join(unmeasured)}" in text
    assert "every finalist was measured" not in text
    rents = [a for a in receipt.approvals if a.action == "create_instance"]
    assert rents and all(a.cost_cap_usd is not None and a.cost_cap_usd > 0 for a in rents)
    assert all(f"| {a.target} | {a.cost_cap_usd:.2f} |" in text for a in rents), "the cap that was approved"


async def test_detach_can_keep_pending_requests_for_the_approve_command(tmp_path: Path) -> None:
    async with campaign_console(tmp_path, seed=4) as console:
        app = console.app
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: answerable(console) > 0, what="the first approval request")
            waiting = {p.request_id for p in app.desk.answerable()}
            await pilot.press("q")
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the leave dialog")
            await pilot.press("tab", "tab", "enter")   # Detach
            await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog)
                             and app.screen.title_text.startswith("Detach: what about"), what="the pending question")
            question = app.screen
            assert isinstance(question, ChoiceDialog)
            assert [c for c, _label in question.choices] == ["stay", "approve", "refuse", "keep"]
            assert any(f"vastui campaign approve {console.handle.campaign_id}" in line for line in question.lines)
            await pilot.press("tab", "tab", "tab", "enter")   # Keep for approve
            await until(lambda: not app.is_running, "the console to quit")
        assert app.control.leaving is Leaving.DETACHED and app.control.kept_for_command
        assert not console.handle.is_done, "the campaign runs on"
        store = console.demo.services.store

        async def all_kept() -> bool:
            kept = await store.kept_requests(console.handle.campaign_id, state=RequestState.PENDING)
            return waiting <= {k.request_id for k in kept}

        await until(all_kept, "the requests to be kept in the store")
        answered = {e.request_id for e in console.events if isinstance(e, ApprovalAnswered)}
        assert not waiting & answered, "kept, not refused"
        assert {p.request_id for p in console.handle.broker.pending()} >= waiting
