"""Offers to instances on the simulator: filter (good and bad query), sort, mark two, rent through the dialog;
the rented instances in Instances, running, their logs streaming, and one destroyed with confirmation.

The simulator's request log is the witness: a cancelled dialog sends nothing, a confirmed one rents exactly the
marked offers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, Input, Static

from tests.tui.console_support import cells_of, confirm_dialog, create_paths, destroys, dialog, sim_console, wait_for
from vastui.tui.views.instances import InstancesView
from vastui.tui.views.offers import OffersView, split_filter


def test_split_filter_takes_the_order_out() -> None:
    assert split_filter("gpu_name=RTX_4090 -o dph+ num_gpus>=2") == ("gpu_name=RTX_4090 num_gpus>=2", "dph+")
    assert split_filter("  num_gpus>=2 ") == ("num_gpus>=2", None)


@pytest.mark.slow
async def test_filter_sort_mark_and_rent_through_the_dialog(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            view = app.query_one(OffersView)
            await wait_for(pilot, lambda: len(view.table.keys_in_order) > 0, what="first offers")

            # a bad query: shown inline with the column of the bad token, the table keeps its rows
            shown_before = view.table.keys_in_order
            await pilot.press("slash")
            bar = view.query_one("#offers-filter", Input)
            assert bar.has_focus
            bar.value = "num_gpus>=2 reliability>two"
            await pilot.press("enter")
            error = str(view.query_one("#offers-error", Static).render())
            assert view.query_error is not None and view.query_error.column == 25
            assert "column 25" in error and "reliability>two" in error
            assert view.table.keys_in_order == shown_before

            # a good query with an order: only matching offers, in the server's order
            bar.value = "num_gpus>=2 reliability>0.9 -o dph+"
            await pilot.press("enter")
            assert view.query_error is None and str(view.query_one("#offers-error", Static).render()) == ""

            def filtered() -> bool:
                page = app.state.offers
                return page is not None and bool(page.offers) and all(o.num_gpus >= 2 for o in page.offers)

            await wait_for(pilot, filtered, what="filtered offers")
            await pilot.pause()
            offers = app.state.offers.offers
            assert all((o.reliability or 0) > 0.9 for o in offers)
            prices = [o.dph_total for o in offers]
            assert prices == sorted(prices)
            assert list(view.table.keys_in_order) == [str(o.id) for o in offers]

            # sort by a column, then reversed
            await pilot.press("s")
            assert view.sort_column == "id"
            ids = [int(k) for k in view.table.keys_in_order]
            assert ids == sorted(ids)
            await pilot.press("S")
            ids = [int(k) for k in view.table.keys_in_order]
            assert ids == sorted(ids, reverse=True)

            # mark two
            view.table.focus()
            view.table.move_cursor(row=0)
            await pilot.press("space", "down", "space")
            marked = {int(view.table.keys_in_order[0]), int(view.table.keys_in_order[1])}
            assert view.marked == marked

            # r opens the dialog with Cancel focused; Enter cancels and nothing is rented
            await pilot.press("r")
            await wait_for(pilot, lambda: dialog(app) is not None, what="the rent dialog")
            box = dialog(app)
            assert box is not None and app.focused is box.query_one("#cancel", Button)
            assert box.proposal.typed == "2"
            await pilot.press("enter")
            await wait_for(pilot, lambda: dialog(app) is None and bool(app.outcomes), what="cancel")
            assert app.outcomes[-1].declined
            assert create_paths(sim.requests()) == []

            # Confirm without the typed count does nothing either
            await pilot.press("r")
            await wait_for(pilot, lambda: dialog(app) is not None, what="the rent dialog again")
            box = dialog(app)
            assert box is not None
            box.query_one("#confirm", Button).focus()
            await pilot.press("enter")
            assert dialog(app) is box and "not confirmed" in str(box.query_one("#confirm-error", Static).render())
            assert create_paths(sim.requests()) == []

            # typing the count confirms: exactly the two marked offers are rented
            box.query_one("#confirm-typed", Input).focus()
            await pilot.press("2", "enter")
            await wait_for(pilot, lambda: len(app.outcomes) == 2, what="the rent outcome")
            outcome = app.outcomes[-1]
            assert not outcome.declined and not outcome.errors and len(outcome.done) == 2
            creates = create_paths(sim.requests())
            assert sorted(r.target_id or 0 for r in creates) == sorted(marked)
            assert all(r.status == 200 for r in creates)

            # they appear in Instances and reach running
            rented = set(outcome.done)
            await pilot.press("2")
            assert app.current_view == "instances"
            instances = app.query_one(InstancesView)

            def statuses() -> dict[int, str]:
                table = instances.table
                status = table.column_keys.index("status")
                return {int(k): str(cells_of(table, k)[status]) for k in table.keys_in_order
                        if int(k) in rented}

            await wait_for(pilot, lambda: set(statuses()) == rented, what="the rented instances listed")
            first = min(rented)
            instances.table.move_cursor(row=list(instances.table.keys_in_order).index(str(first)))

            # logs stream into the pane while it is open, and what was shown is kept
            await pilot.press("l")
            await wait_for(pilot, lambda: any("created" in line for line in instances.log_lines), what="first logs")
            await wait_for(pilot, lambda: set(statuses().values()) == {"running"}, what="both running",
                           deadline_s=60.0)
            state = sim.market.instance_state(first)
            assert state is not None
            state.log(sim.clock.now(), "hello from the workload")
            await wait_for(pilot, lambda: "hello from the workload" in instances.log_lines[-1], what="a new log line")
            assert any("created" in line for line in instances.log_lines)
            assert len(instances.log_lines) == len(set(instances.log_lines)), "no line shown twice"
            await pilot.press("l")
            assert instances.logs_of is None

            # destroy with confirmation: Enter alone cancels; Confirm destroys exactly that one
            await pilot.press("d")
            await wait_for(pilot, lambda: dialog(app) is not None, what="the destroy dialog")
            assert "irreversible" in dialog(app).proposal.consequence
            await pilot.press("enter")
            await wait_for(pilot, lambda: dialog(app) is None, what="cancel")
            assert destroys(sim.requests()) == []
            await pilot.press("d")
            await confirm_dialog(pilot, app)
            await wait_for(pilot, lambda: destroys(sim.requests()) == [first], what="the destroy call")
            await wait_for(pilot, lambda: first not in statuses(), what="the destroyed row gone")
            assert min(rented) not in statuses() and max(rented) in statuses()
