"""Time in status comes from the marketplace's own figures, not from when the console started: a console opened on
an instance that has run for minutes says so at once; one met while loading counts from its rent; a change seen
while watching counts from the listing that showed it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.tui.console_support import FAST, KEY, cells_of, rent_outside, sim_console, wait_for
from vastui.clock import MarketClock, ScaledClock, market_scale
from vastui.config import Secret
from vastui.events import EventBus
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.tui.app import VastuiApp
from vastui.tui.services import ConsoleServices
from vastui.tui.views.instances import COLUMNS, InstancesView, StatusSince, since_text, status_since
from vastui.tui.widgets.statusbar import StatusBar
from vastui.vast.client import HttpVastClient
from vastui.vast.models import Instance, InstanceStatus

STATUS, SINCE = ([k for k, _ in COLUMNS].index(c) for c in ("status", "since"))
T0 = 1_800_000_000.0


def row(status: InstanceStatus | None, *, uptime_mins: float | None = None, start_date: float | None = T0) -> Instance:
    return Instance(id=1, machine_id=None, host_id=None, actual_status=status, intended_status=None, cur_state=None,
                    next_state=None, status_msg=None, label=None, image_uuid=None, image_runtype=None, num_gpus=1,
                    gpu_name="RTX_4090", gpu_util=None, dph_total=0.3, start_date=start_date, end_date=None,
                    disk_space=None, ssh_host=None, ssh_port=None, public_ipaddr=None, direct_ssh_port=None,
                    direct_port_start=None, direct_port_end=None, geolocation=None, cuda_max_good=None,
                    driver_version=None, uptime_mins=uptime_mins)


def test_status_time_is_dated_by_the_marketplace() -> None:
    running = status_since(row(InstanceStatus.RUNNING, uptime_mins=3.0), None, listed_at=T0 + 600)
    assert running.since == T0 + 420 and since_text(running, T0 + 605) == "3m"
    loading = status_since(row(InstanceStatus.LOADING), None, listed_at=T0 + 120)
    assert loading.since == T0 and since_text(loading, T0 + 125) == "2m"
    exited = status_since(row(InstanceStatus.EXITED), loading, listed_at=T0 + 130)   # a change seen while watching
    assert exited.since == T0 + 130
    stopped = status_since(row(InstanceStatus.STOPPED), None, listed_at=T0 + 60)     # nothing dates it: a bound
    assert stopped == StatusSince("stopped", None, T0 + 60) and since_text(stopped, T0 + 90) == "≥30s"


@pytest.mark.slow
async def test_a_console_opened_late_shows_how_long_an_instance_has_really_run(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as sim:
        instance_id = await rent_outside(sim, label="operator-notebook")
        async with asyncio.timeout(60):   # a guard against a hang: the simulator runs at x60
            while True:   # the instance runs three marketplace minutes before any console looks at it
                shown = await sim.client.show_instance(instance_id)
                if shown is not None and shown.uptime_mins is not None and shown.uptime_mins >= 3.0:
                    break
                await asyncio.sleep(0.1)
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("2")
            view = app.query_one(InstancesView)
            app.action_refresh()
            await wait_for(pilot, lambda: (c := cells_of(view.table, str(instance_id))) is not None
                           and c[STATUS] == "running", what="the instance listed running")
            cells = cells_of(view.table, str(instance_id))
            assert cells is not None
            since = str(cells[SINCE])
            assert since.endswith("m") and int(since[:-1]) >= 3, since   # not the seconds since the console opened


@pytest.mark.slow
async def test_a_console_on_a_scaled_simulator_labels_its_durations_as_simulated(tmp_path: Path) -> None:
    """``vastui console`` builds a plain ``MarketClock`` (scale 1): the simulator's answers say how fast its clock
    runs, and the status bar says ``sim ×120`` in every view."""
    market = build_market(7, clock=ScaledClock(scale=120.0), api_key=KEY, n_machines=30)
    clock = MarketClock()
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=httpx.ASGITransport(app=create_app(market))) as client:
        app = VastuiApp(services=ConsoleServices(market=client, clock=clock, bus=EventBus()), settings=FAST)
        async with app.run_test(size=(160, 48)) as pilot:
            bar = app.query_one(StatusBar)
            await wait_for(pilot, lambda: app.state.user is not None, what="the first answers")
            app.refresh_status()
            assert bar.plain_text.startswith("sim ×120 ")
            assert clock.scale == 1.0, "told, not steered: the console's waits are unchanged"
    await market.aclose()
    plain = MarketClock()   # a marketplace that announces nothing: no label
    assert market_scale(plain) == 1.0
