"""A leaked instance created outside any campaign shows on the status bar and in Leaks; destroying it from there
(with its own confirmation) brings the count back to zero."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from tests.tui.console_support import confirm_dialog, destroys, dialog, rent_outside, sim_console, wait_for
from vastui.tui.views.leaks import LeaksView
from vastui.tui.widgets.statusbar import StatusBar


@pytest.mark.slow
async def test_a_leak_shows_up_and_destroying_it_clears_the_count(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            bar = app.query_one(StatusBar)
            await wait_for(pilot, lambda: "leaked 0" in bar.plain_text, what="a clean first leak check")
            # a vastui-labelled instance whose campaign this store never heard of: nothing will destroy it
            leaked = await rent_outside(sim, label="vastui-ghost-c1-1")
            mine = await rent_outside(sim, label="my-notebook")  # not vastui's: reported apart, never counted
            app.action_refresh()
            # a leak check already under way when the second rental was made may show the first alone: wait for one
            # that saw both
            await wait_for(pilot, lambda: "leaked 1" in bar.plain_text and "+1 unowned" in bar.plain_text,
                           what="the leak and the unowned instance on the status bar")
            await pilot.press("colon")
            await pilot.press(*"leaks", "enter")
            assert app.current_view == "leaks"
            view = app.query_one(LeaksView)
            await wait_for(pilot, lambda: str(leaked) in view.table.keys_in_order, what="the leak in Leaks")
            assert str(mine) in view.table.keys_in_order
            assert "leaked" in str(view.query_one("#leaks-title", Static).render())
            view.table.move_cursor(row=list(view.table.keys_in_order).index(str(leaked)))
            await pilot.press("d")
            await wait_for(pilot, lambda: dialog(app) is not None, what="the destroy dialog")
            assert dialog(app).proposal.requests[0].target == f"instance:{leaked}"  # type: ignore[union-attr]
            await confirm_dialog(pilot, app)
            await wait_for(pilot, lambda: destroys(sim.requests()) == [leaked], what="the destroy")
            await wait_for(pilot, lambda: "leaked 0" in bar.plain_text, what="the count back to zero")
            assert str(leaked) not in view.table.keys_in_order and str(mine) in view.table.keys_in_order
