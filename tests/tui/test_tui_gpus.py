"""The GPUs view tells the truth about what runs: an instance rented by hand shows the marketplace's utilisation
(source ``api``), and once it is destroyed it leaves the live rows at the first listing without it, kept greyed
below with "destroyed at"; the title counts live GPUs only. Campaign GPUs whose instance was destroyed go the same
way (canned campaign picture). The simulator over ASGI, a real store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.tui.campaign_canned import racing_picture
from tests.tui.console_support import cells_of, grant, rent_outside, sim_console, wait_for
from vastui.approval import Action, instance_target
from vastui.tui.health import Source
from vastui.tui.state import ConsoleState
from vastui.tui.views.gpus import COLUMNS, GpusView, gpu_rows

UTIL, SRC, LIMIT = ([key for key, _ in COLUMNS].index(k) for k in ("util", "src", "limit"))


@pytest.mark.slow
async def test_a_destroyed_instance_leaves_the_live_gpu_rows_within_one_refresh(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            instance_id = await rent_outside(sim, label="operator-notebook")
            await pilot.press("6")
            view = app.query_one(GpusView)
            key = f"api/{instance_id}"
            app.wake(Source.INSTANCES)
            await wait_for(pilot, lambda: cells_of(view.table, key) is not None, what="the hand-rented row")
            cells = cells_of(view.table, key)
            assert cells is not None and cells[SRC] == "api" and not str(cells[LIMIT]).startswith("destroyed")
            title = view.query_one("#gpus-title", Static)
            assert "GPUs: 1 on 1 live instance(s)" in str(title.render())
            await wait_for(pilot, lambda: str((cells_of(view.table, key) or ("",) * len(COLUMNS))[UTIL]).endswith("%"),
                           what="the marketplace's utilisation once it runs")

            await sim.client.destroy_instance(instance_id, approval=grant(Action.DESTROY_INSTANCE,
                                                                          instance_target(instance_id)))
            app.wake(Source.INSTANCES)
            page = app.state.instances
            await wait_for(pilot, lambda: app.state.instances is not page and app.state.instances is not None
                           and app.state.instances.listing.find(instance_id) is None, what="a listing without it")
            cells = cells_of(view.table, key)   # the very refresh that missed it moved it
            assert cells is not None and str(cells[LIMIT]).startswith("destroyed at ")
            assert "GPUs: 0 on 0 live instance(s)" in str(title.render())
            assert "1 destroyed" in str(title.render())


def test_a_campaign_gpu_whose_instance_was_destroyed_is_history_not_live() -> None:
    picture = racing_picture()          # c2 was eliminated and its instance 502 destroyed; c1's 501 runs
    rows = gpu_rows(ConsoleState(campaign=picture))
    assert set(rows.live) == {"c1/0", "c1/1"} and set(rows.history) == {"c2/0"}
    assert (rows.live_gpus, rows.live_instances) == (2, 1)
    assert str(rows.history["c2/0"][LIMIT]).startswith("destroyed at ")
    undestroyed = dataclasses.replace(picture.snapshot, instances=tuple(
        dataclasses.replace(i, destroy_sent_at=None) for i in picture.snapshot.instances))
    rows = gpu_rows(ConsoleState(campaign=dataclasses.replace(picture, snapshot=undestroyed)))
    assert (rows.live_gpus, rows.live_instances, rows.history) == (3, 2, {})
