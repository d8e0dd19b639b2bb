"""Snapshot tests of the approvals pop-up, opened with ctrl+a over the Offers view (approvals are global): two
requests pending with their facts and one that expired unanswered, at 80×24, 120×30, 160×48 and 200×60. Canned
state and a frozen clock (``campaign_canned``): the pictures never change."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from tests.tui.campaign_canned import NOW, pending, racing_picture
from tests.tui.snapshot_support import show_state
from tests.tui.test_tui_snapshots_campaign import console
from vastui.tui.app import VastuiApp
from vastui.tui.dialogs.approvals import ApprovalsScreen

pytestmark = pytest.mark.slow


async def popup_open(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, VastuiApp)
    while app.state.user is None or app.state.instances is None or app.state.offers is None:
        await pilot.pause(0.02)   # every source answered once (then nothing moves: live=False)
    show_state(app, dataclasses.replace(app.state, campaign=racing_picture()))
    expired = dataclasses.replace(pending()[0], request_id="r3", target="offer:9005", offer_id=9005,
                                  asked_wall_s=NOW - 1000.0, expires_wall_s=NOW - 100.0)
    app.desk.expired = [expired]
    await pilot.pause()
    await pilot.press("ctrl+a")
    while not isinstance(app.screen, ApprovalsScreen):
        await pilot.pause(0.02)
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 30), (160, 48), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_approvals_popup(snap_compare: Callable[..., bool], size: tuple[int, int]) -> None:
    assert snap_compare(console("offers"), terminal_size=size, run_before=popup_open)
