"""The key footer fits its terminal: no hint is cut at the right edge, the least useful hints go first, and the
approval keys and ``?`` always stay — at 80x24 an approval is answered with ``a`` from the busiest view."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.widgets._footer import FooterKey

from tests.tui.campaign_console_support import campaign_console, wait_until
from tests.tui.console_support import wait_for
from tests.tui.snapshot_support import capture_scene_async, scene_app
from vastui.events import InstanceRented
from vastui.events_live import ApprovalAnswered
from vastui.tui.widgets.footer import PALETTE_WIDTH, Hint, fit_hints


def keys_on_screen(app: App[None]) -> list[str]:
    """The footer's keys that are drawn whole inside the screen."""
    width = app.size.width
    return [k.key for k in app.query(FooterKey) if k.region.width > 0 and 0 <= k.region.x and k.region.right <= width]


def keys_cut(app: App[None]) -> list[str]:
    width = app.size.width
    return [k.key for k in app.query(FooterKey) if k.region.right > width]


INSTANCE_HINTS = [Hint(k, label, action) for k, label, action in (
    ("space", "Mark", "mark"), ("d", "Destroy", "destroy"), ("o", "Stop", "stop"), ("u", "Start", "start"),
    ("L", "Label", "label"), ("p", "Prepay", "prepay"), ("c", "Copy ssh", "copy_ssh"), ("l", "Logs", "logs"),
    (":", "View…", "open_command"), ("?", "Help", "help"), ("^r", "Refresh", "refresh"), ("q", "Quit", "quit"),
    ("a", "Approve oldest", "approve_oldest"), ("x", "Refuse oldest", "refuse_oldest"),
    ("A", "Approve plan", "approve_plan"), ("^a", "Approvals", "approvals"))]


def test_a_row_that_fits_is_left_as_it_is() -> None:
    few = INSTANCE_HINTS[:3]
    assert fit_hints(few, 200) == (tuple(few), False, True)


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120])
def test_a_narrow_row_keeps_the_approval_keys_and_help_and_drops_the_least_useful_first(width: int) -> None:
    kept, compact, palette = fit_hints(INSTANCE_HINTS, width)
    assert compact
    assert sum(h.width(compact=True) for h in kept) + (PALETTE_WIDTH if palette else 0) <= width
    actions = [h.action for h in kept]
    assert {"approve_oldest", "refuse_oldest", "approvals", "help"} <= set(actions)
    assert actions == [h.action for h in INSTANCE_HINTS if h.action in actions], "the order is kept"
    dropped = [h.action for h in INSTANCE_HINTS if h.action not in actions]
    if "mark" in actions:
        assert "refresh" in dropped and "open_command" in dropped, "refresh and the view menu go before view keys"
    if "destroy" not in actions:
        assert "logs" not in actions, "a view's later keys go before its first ones"


@pytest.mark.parametrize("size", [(80, 24), (120, 30)])
@pytest.mark.parametrize("view", ["offers", "instances", "leaks", "account", "activity"])
async def test_no_footer_hint_is_cut_at_the_edge(tmp_path: Path, view: str, size: tuple[int, int]) -> None:
    app = scene_app(await capture_scene_async(tmp_path), view=view)
    async with app.run_test(size=size) as pilot:
        await app.wait_shown(pilot)
        await wait_for(pilot, lambda: bool(keys_on_screen(app)), what="the footer drawn")
        await pilot.pause()
        assert keys_cut(app) == []
        assert "question_mark" in keys_on_screen(app)


async def test_the_footer_refits_when_the_terminal_is_resized(tmp_path: Path) -> None:
    app = scene_app(await capture_scene_async(tmp_path), view="instances")
    async with app.run_test(size=(160, 48)) as pilot:
        await app.wait_shown(pilot)
        await wait_for(pilot, lambda: "ctrl+p" in keys_on_screen(app), what="the full footer, palette key included")
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: "ctrl+p" not in keys_on_screen(app), what="the footer refitted to 80 columns")
        await pilot.pause()
        assert keys_cut(app) == []
        assert {"question_mark", "d"} <= set(keys_on_screen(app))


@pytest.mark.slow
async def test_at_80x24_an_approval_is_offered_in_the_footer_and_answered_with_a_from_instances(
        tmp_path: Path) -> None:
    async with campaign_console(tmp_path, seed=4) as console:
        app = console.app
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("2")
            assert app.current_view == "instances"
            await wait_until(pilot, lambda: "a" in keys_on_screen(app) and "ctrl+a" in keys_on_screen(app),
                             what="the approval keys in the footer at 80 columns")
            assert keys_cut(app) == []
            assert "d" in keys_on_screen(app), "the view's first keys stay beside them"
            oldest = app.desk.answerable()[0].request_id
            await pilot.press("a")
            await wait_until(pilot, lambda: any(isinstance(e, ApprovalAnswered) and e.request_id == oldest
                                                and e.granted for e in console.events), what="the oldest granted")
            await wait_until(pilot, lambda: any(isinstance(e, InstanceRented) for e in console.events),
                             what="the approved rent")
