"""The console starts on the simulator, fills its views and status bar, and switches views."""

from __future__ import annotations

from pathlib import Path

from tests.tui.console_support import sim_console, wait_for
from vastui.tui.views.offers import OffersView


async def test_console_starts_and_fills_offers_and_status(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as sim:
        async with sim.app.run_test(size=(160, 48)) as pilot:
            offers = sim.app.query_one(OffersView)
            await wait_for(pilot, lambda: len(offers.table.keys_in_order) > 0, what="offers")
            await wait_for(pilot, lambda: sim.app.state.user is not None, what="account")
            from vastui.tui.widgets.statusbar import StatusBar

            bar = sim.app.query_one(StatusBar)
            assert "credit $1,000.00" in bar.plain_text
