"""What the console rents by hand is owned: rented through the Offers view, it is listed with its renter, the status
bar counts it neither leaked nor unowned, and the offer's mark is cleared. Quitting while it bills asks first,
listing it with its burn rate; Cancel stays, "leave them billing" quits. The simulator over ASGI, a real store."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button

from tests.tui.console_support import cells_of, confirm_dialog, destroys, sim_console, wait_for
from vastui.campaign.watch import find_leaks
from vastui.tui.dialogs.choice import ChoiceDialog
from vastui.tui.views.instances import COLUMNS as INSTANCE_COLUMNS
from vastui.tui.views.instances import InstancesView
from vastui.tui.views.leaks import LeaksView
from vastui.tui.views.offers import OffersView
from vastui.tui.widgets.statusbar import StatusBar

CAMPAIGN = [key for key, _ in INSTANCE_COLUMNS].index("campaign")


@pytest.mark.slow
async def test_a_console_rent_is_owned_and_quitting_while_it_bills_asks(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            view = app.query_one(OffersView)
            await wait_for(pilot, lambda: len(view.table.keys_in_order) > 0, what="offers")
            view.table.focus()
            view.table.move_cursor(row=0)
            offer_id = int(view.table.keys_in_order[0])
            await pilot.press("space")
            assert view.marked == {offer_id}
            await pilot.press("r")
            await confirm_dialog(pilot, app)
            await wait_for(pilot, lambda: bool(app.outcomes), what="the rent outcome")
            outcome = app.outcomes[-1]
            assert not outcome.errors and len(outcome.done) == 1
            instance_id = outcome.done[0]
            assert view.marked == set()          # a successful rent clears its mark

            # owned: the watcher's own check finds no leak and nothing unowned
            report = await find_leaks(market=sim.client, store=sim.store, clock=sim.clock)
            assert instance_id in {i.id for i in (await sim.client.list_instances()).instances}
            assert report.is_complete and report.leaks == ()
            app.action_refresh()
            bar = app.query_one(StatusBar)
            await wait_for(pilot, lambda: app.state.leaks is not None and app.state.instances is not None
                           and app.state.instances.listing.find(instance_id) is not None
                           and app.state.leaks.listed_count >= 1, what="a leak check that lists it")
            assert "leaked 0" in bar.plain_text and "unowned" not in bar.plain_text

            await pilot.press("2")
            instances = app.query_one(InstancesView)
            await wait_for(pilot, lambda: cells_of(instances.table, str(instance_id)) is not None, what="the row")
            cells = cells_of(instances.table, str(instance_id))
            assert cells is not None and str(cells[CAMPAIGN]) == "ad-hoc (console)"
            await pilot.press("colon", *"leaks", "enter")
            leaks = app.query_one(LeaksView)
            await wait_for(pilot, lambda: cells_of(leaks.table, str(instance_id)) is not None, what="the owned row")
            row = [str(c) for c in cells_of(leaks.table, str(instance_id)) or ()]
            assert "owned, not a leak" in row and any(c.startswith("ad-hoc (console) adhoc-") for c in row)

            # quitting asks, listing it with its burn rate; Cancel (focused) stays
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the quit question")
            box = app.screen
            assert isinstance(box, ChoiceDialog) and app.focused is box.query_one("#choice-cancel", Button)
            listed = await sim.client.show_instance(instance_id)
            assert listed is not None and listed.dph_total is not None
            assert any(f"instance {instance_id}" in line and f"${listed.dph_total:.3f}/h" in line
                       for line in box.lines)
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, ChoiceDialog), what="the dialog to close")
            assert app.is_running and [r for r in sim.requests() if r.method == "DELETE"] == []

            # quit and leave it billing: the console's claim is dropped, the instance stays owned
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the quit question again")
            app.screen.query_one("#choice-leave", Button).press()
            await wait_for(pilot, lambda: not app.is_running, what="the console to quit")
        assert [r for r in sim.requests() if r.method == "DELETE"] == []
        assert (await find_leaks(market=sim.client, store=sim.store, clock=sim.clock)).leaks == ()
        assert app.actions.owner is not None and app.actions.owner.campaign_id not in await sim.store.campaign_owners()


@pytest.mark.slow
async def test_quitting_can_destroy_what_the_console_rented_through_the_usual_dialog(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            view = app.query_one(OffersView)
            await wait_for(pilot, lambda: len(view.table.keys_in_order) > 0, what="offers")
            view.table.focus()
            view.table.move_cursor(row=0)
            await pilot.press("r")
            await confirm_dialog(pilot, app)
            await wait_for(pilot, lambda: bool(app.outcomes) and bool(app.outcomes[-1].done), what="the rent")
            instance_id = app.outcomes[-1].done[0]
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the quit question")
            app.screen.query_one("#choice-destroy", Button).press()
            await confirm_dialog(pilot, app)     # the destroy's own dialog, Cancel focused as always
            await wait_for(pilot, lambda: not app.is_running, what="the console to quit after the destroy")
        assert destroys(sim.requests()) == [instance_id]
        owner = app.actions.owner
        assert owner is not None and owner.campaign_id is not None
        campaign = await sim.store.campaign(owner.campaign_id)
        assert campaign is not None and not campaign.is_active   # nothing left billing: the ad-hoc campaign ended


@pytest.mark.slow
async def test_quitting_without_having_rented_anything_does_not_ask(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: app.state.instances is not None, what="the listing")
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running, what="the console to quit")
        assert await sim.store.campaigns() == []    # no ad-hoc campaign was written
