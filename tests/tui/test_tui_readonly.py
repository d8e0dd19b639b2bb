"""``--readonly``: the mutating keys are off (no dialog opens) and the action layer refuses every mutation itself;
the simulator's request log shows no mutating call from the console."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tui.console_support import dialog, rent_outside, sim_console, wait_for, with_settings
from vastui.tui.actions import ReadOnlyRefused
from vastui.tui.views.instances import InstancesView
from vastui.tui.views.offers import OffersView
from vastui.tui.widgets.statusbar import StatusBar


async def test_readonly_refuses_every_mutation(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(readonly=True)) as sim:
        instance_id = await rent_outside(sim, label="vastui-ghost-c1-1")
        before = len(sim.mutations())
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            assert "READ-ONLY" in app.query_one(StatusBar).plain_text
            offers = app.query_one(OffersView)
            await wait_for(pilot, lambda: len(offers.table.keys_in_order) > 1, what="offers")
            offers.table.focus()
            await pilot.press("space", "r")
            assert dialog(app) is None
            enabled = {b.binding.action for b in app.screen.active_bindings.values() if b.enabled}
            assert "rent" not in enabled and "mark" in enabled

            await pilot.press("2")
            instances = app.query_one(InstancesView)
            await wait_for(pilot, lambda: str(instance_id) in instances.table.keys_in_order, what="the instance")
            for key in ("d", "o", "u", "L", "p"):
                await pilot.press(key)
                assert dialog(app) is None and app.screen is app.screen_stack[0], key
            await pilot.press("3", "d", "4", "t")
            assert dialog(app) is None and app.screen is app.screen_stack[0]

            # the action layer refuses on its own, before any dialog or request
            offer = app.state.offers.offers[0]  # type: ignore[union-attr]
            instance = app.state.instances.listing.find(instance_id)  # type: ignore[union-attr]
            assert instance is not None
            calls = [app.actions.rent([offer]), app.actions.destroy([instance]), app.actions.stop([instance]),
                     app.actions.start([instance]), app.actions.label(instance, "x"),
                     app.actions.prepay(instance, 50.0), app.actions.transfer("a@b.c", 5.0, credit_usd=100.0)]
            for call in calls:
                with pytest.raises(ReadOnlyRefused):
                    await call
            assert dialog(app) is None
            await pilot.pause()
        assert sim.mutations()[before:] == []
        assert all(r.method in ("GET", "POST", "PUT") for r in sim.requests()[before:])
