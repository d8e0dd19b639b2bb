"""An API that answers 5xx or 429 for a while, or stops answering: stale markers and an error line on the status
bar, a console that keeps working, and a recovery without anyone touching it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tui.console_support import sim_console, wait_for, with_settings
from vastui.tui.health import Source
from vastui.tui.views.offers import OffersView
from vastui.tui.widgets.statusbar import StatusBar


@pytest.mark.slow
async def test_5xx_and_429_storms_mark_stale_and_recover(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(instances_interval_s=6.0)) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            bar = app.query_one(StatusBar)
            await wait_for(pilot, lambda: app.state.user is not None and app.state.instances is not None,
                           what="first data")
            for storm in ("5xx", "429"):
                if storm == "5xx":
                    sim.market.chaos.error_5xx_rate = 1.0
                else:
                    sim.market.chaos.rate_limit_every_n = 1
                    sim.market.chaos.retry_after_s = 1.0
                app.action_refresh()
                await wait_for(pilot, lambda: "API error" in bar.plain_text, what=f"the {storm} error line")
                await wait_for(pilot, lambda: "instances STALE" in bar.plain_text, what=f"{storm} stale marker")
                assert app.state.user is not None, "the last good data is kept"
                # the console keeps working: views switch, the help opens and closes
                await pilot.press("2", "1", "question_mark", "escape")
                assert app.current_view == "offers" and app.screen is app.screen_stack[0]
                sim.market.chaos.error_5xx_rate = 0.0
                sim.market.chaos.rate_limit_every_n = 0
                await wait_for(pilot, lambda: "API error" not in bar.plain_text and "STALE" not in bar.plain_text,
                               what=f"recovery after the {storm} storm", deadline_s=60.0)


@pytest.mark.slow
async def test_an_api_that_stops_answering_is_stale_then_recovers(tmp_path: Path) -> None:
    settings = with_settings(instances_interval_s=6.0, account_interval_s=6.0)
    async with sim_console(tmp_path, settings=settings, over_socket=True, timeout_s=0.3, max_attempts=1) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            bar = app.query_one(StatusBar)
            offers = app.query_one(OffersView)
            await wait_for(pilot, lambda: app.state.user is not None and len(offers.table.keys_in_order) > 0,
                           what="first data")
            shown = offers.table.keys_in_order
            sim.market.chaos.latency_s = 1.0  # longer than the client's timeout: no answer in time
            app.action_refresh()
            await wait_for(pilot, lambda: "API error" in bar.plain_text and "account STALE" in bar.plain_text
                           and app.state.health[Source.ACCOUNT].is_failing,
                           what="the timeout on the status bar and the account source failing")
            assert offers.table.keys_in_order == shown, "what was shown stays"
            sim.market.chaos.latency_s = 0.0
            await wait_for(pilot, lambda: "API error" not in bar.plain_text and "STALE" not in bar.plain_text,
                           what="recovery", deadline_s=60.0)
