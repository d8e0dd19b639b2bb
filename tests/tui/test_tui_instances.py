"""Instances on the simulator: prepay (typed amount above the threshold), stop, start, label, copy ssh, and a
partial listing shown as INCOMPLETE (never as fewer instances) that recovers by itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, Input, Static

from tests.tui.console_support import (
    cells_of,
    confirm_dialog,
    dialog,
    rent_outside,
    sim_console,
    wait_for,
    with_settings,
)
from vastui.tui.dialogs.prompt import PromptScreen
from vastui.tui.views.instances import COLUMNS, InstancesView
from vastui.tui.widgets.statusbar import StatusBar


def prepays(sim: object) -> list[int]:
    return [r.target_id or 0 for r in sim.requests()  # type: ignore[attr-defined]
            if r.method == "PUT" and r.path.startswith("/api/v0/instances/prepay/") and r.status == 200]


@pytest.mark.slow
async def test_prepay_stop_start_label_and_copy_ssh(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(initial_view="instances",
                                                            money_confirm_over_usd=20.0)) as sim:
        instance_id = await rent_outside(sim, label="mine")
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            view = app.query_one(InstancesView)
            await wait_for(pilot, lambda: view.table.keys_in_order == (str(instance_id),), what="the instance row")

            def cell(column: str) -> str:   # by the column's key: a new column moves the others
                index = [key for key, _title in COLUMNS].index(column)
                return str(cells_of(view.table, str(instance_id))[index])  # type: ignore[index]

            await wait_for(pilot, lambda: cell("status") == "running", what="running", deadline_s=60.0)

            # text that is not an amount is said and dropped: no dialog, nothing sent
            await pilot.press("p")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the amount prompt")
            await pilot.press(*"ten", "enter")
            await wait_for(pilot, lambda: any(n.message == "not an amount of USD: 'ten'" for n in app._notifications),
                           what="the refusal of a non-amount")
            assert not isinstance(app.screen, PromptScreen) and dialog(app) is None and prepays(sim) == []

            # prepay over the threshold: the amount must be typed; Confirm alone does nothing
            await pilot.press("p")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the amount prompt")
            await pilot.press("2", "5", "enter")
            await wait_for(pilot, lambda: dialog(app) is not None, what="the prepay dialog")
            box = dialog(app)
            assert box is not None and box.proposal.typed == "25.00"
            assert box.proposal.requests[0].cost_cap_usd == 25.0
            assert app.focused is box.query_one("#cancel", Button)
            box.query_one("#confirm", Button).focus()
            await pilot.press("enter")
            assert dialog(app) is box and prepays(sim) == []
            box.query_one("#confirm-typed", Input).focus()
            await pilot.press("2", "4", "enter")  # a different amount is refused too
            assert dialog(app) is box and prepays(sim) == []
            box.query_one("#confirm-typed", Input).value = ""
            await pilot.press(*"25.00", "enter")
            await wait_for(pilot, lambda: prepays(sim) == [instance_id], what="the prepay call")

            # under the threshold a plain confirmation is enough
            await pilot.press("p")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the amount prompt")
            await pilot.press("5", "enter")
            await wait_for(pilot, lambda: dialog(app) is not None, what="the small prepay dialog")
            assert dialog(app).proposal.typed is None  # type: ignore[union-attr]
            await confirm_dialog(pilot, app)
            await wait_for(pilot, lambda: prepays(sim) == [instance_id, instance_id], what="the second prepay")

            # stop, then start, each confirmed
            await pilot.press("o")
            await confirm_dialog(pilot, app)
            await wait_for(pilot, lambda: cell("status") == "stopped", what="stopped")
            assert cell("storage").startswith("$"), "a stopped instance shows what its storage burns"
            await pilot.press("u")
            await confirm_dialog(pilot, app)
            await wait_for(pilot, lambda: cell("status") in ("loading", "running"), what="started again")

            # label
            await pilot.press("L")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the label prompt")
            app.screen.query_one(Input).value = "renamed"
            await pilot.press("enter")
            await confirm_dialog(pilot, app)
            await wait_for(pilot, lambda: cell("label") == "renamed", what="the new label")

            # copy the ssh command (no dialog: it changes nothing)
            await wait_for(pilot, lambda: cell("status") == "running", what="running again", deadline_s=60.0)
            await pilot.press("c")
            assert app.clipboard.startswith("ssh -p ")
            assert all(outcome.errors == [] for outcome in app.outcomes)


async def test_a_partial_listing_is_incomplete_never_fewer_and_recovers(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(initial_view="instances")) as sim:
        for i in range(27):  # more than one page of 25
            await rent_outside(sim, label=f"fleet-{i}", query="")
        assert sim.transport is not None
        sim.transport.fault = lambda r: 502 if r.url.params.get("after_token") else None
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            view = app.query_one(InstancesView)
            warning = view.query_one("#instances-warning", Static)
            await wait_for(pilot, lambda: "INCOMPLETE" in str(warning.render()), what="the INCOMPLETE warning")
            assert len(view.table.keys_in_order) == 25
            assert "INCOMPLETE" in str(view.query_one("#instances-title", Static).render())
            bar = app.query_one(StatusBar)
            await wait_for(pilot, lambda: "instances STALE" in bar.plain_text, what="the stale marker")
            sim.transport.fault = lambda r: None
            await wait_for(pilot, lambda: len(view.table.keys_in_order) == 27, what="the whole listing")
            assert str(warning.render()) == ""
            await wait_for(pilot, lambda: "instances STALE" not in bar.plain_text, what="fresh again")


async def test_an_odd_row_is_named_above_the_table_and_the_other_instances_are_shown(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(initial_view="instances")) as sim:
        ids = [await rent_outside(sim, label=f"fleet-{i}", query="") for i in range(3)]
        odd = ids[1]
        assert sim.transport is not None

        def spoil(request: object, body: object) -> object:
            if isinstance(body, dict) and isinstance(body.get("instances"), list):
                body["instances"] = [{**row, "dph_total": "lots"} if row.get("id") == odd else row
                                     for row in body["instances"]]
            return body

        sim.transport.rewrite = spoil
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            view = app.query_one(InstancesView)
            warning = view.query_one("#instances-warning", Static)
            await wait_for(pilot, lambda: "not shown" in str(warning.render()), what="the odd-row warning")
            assert f"instance {odd}: unreadable row" in str(warning.render())
            assert sorted(view.table.keys_in_order) == sorted(str(i) for i in ids if i != odd)
            sim.transport.rewrite = None
            await wait_for(pilot, lambda: len(view.table.keys_in_order) == 3, what="the whole listing")
            assert str(warning.render()) == ""
