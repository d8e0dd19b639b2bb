"""The console's accrued cost of a running instance, against a x120 simulator whose clock started a minute of wall
time before the console's: the price over the marketplace's time since ``start_date``, moving at every refresh.

The console is built as ``vastui console`` builds it (one ``MarketClock`` for the client and the views) and talks
to the simulator over HTTP on loopback.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.tui.console_support import cells_of, wait_for
from vastui.clock import MarketClock, ScaledClock
from vastui.config import Secret
from vastui.events import EventBus
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest
from vastui.sim.server import SimServer
from vastui.tui.app import VastuiApp
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.tui.views.instances import COLUMNS, InstancesView
from vastui.vast.client import HttpVastClient

KEY = "accrued-sim-key-0451"
TIME_SCALE = 120.0
STARTED_EARLIER_WALL_S = 60.0
RUN_BEFORE_LOOKING_S = 600.0          # marketplace seconds the instance runs before the console opens
LISTING = "/api/v1/instances/"
ACCRUED = [key for key, _ in COLUMNS].index("accrued")
# a refresh every quarter second of wall time is 30 marketplace seconds: $0.0014 at $0.17/h, which two decimals
# would not show
SETTINGS = ConsoleSettings(initial_view="instances", instances_interval_s=0.25, offers_interval_s=600.0,
                           account_interval_s=600.0, leaks_interval_s=600.0)


@pytest.mark.slow
async def test_a_running_instances_accrued_cost_is_on_the_marketplaces_clock_and_moves(tmp_path: Path) -> None:
    sim_clock = ScaledClock(scale=TIME_SCALE, origin=time.time() + STARTED_EARLIER_WALL_S * (TIME_SCALE - 1.0))
    market = build_market(7, clock=sim_clock, api_key=KEY, n_machines=120)
    arrivals: list[float] = []          # the marketplace's time as each listing request arrived
    market.on_request = lambda method, path: arrivals.append(sim_clock.now()) if path == LISTING else None
    machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
    state = await market.create_instance(machine.offer_id, CreateRequest.from_body(
        {"image": "pytorch/pytorch", "disk": 10, "label": "operator-notebook", "runtype": "ssh"}))
    key = str(state.id)
    clock = MarketClock()               # the console's, started now: a minute after the simulator's
    async with SimServer(market) as server, HttpVastClient(base_url=server.url, api_key=Secret(KEY),
                                                           clock=clock) as client:
        async with asyncio.timeout(120):    # let the instance run a while: a guard against a hang, not a speed check
            while sim_clock.now() < state.created_at + RUN_BEFORE_LOOKING_S:
                await asyncio.sleep(0.05)
        app = VastuiApp(services=ConsoleServices(market=client, clock=clock, bus=EventBus()), settings=SETTINGS)
        async with app.run_test(size=(160, 40)) as pilot:
            view = app.query_one(InstancesView)

            def accrued() -> str:
                cells = cells_of(view.table, key)
                return "" if cells is None else str(cells[ACCRUED])

            seen: list[str] = []
            for _ in range(2):
                await wait_for(pilot, lambda: accrued() not in ("", "-", *seen), what="a new accrued cost",
                               deadline_s=120.0)
                shown, read_at, since = accrued(), sim_clock.now(), min(arrivals[-2:])
                dph = state.dph_total
                # the page shown was asked for at or after ``since``; the console's time is the marketplace's
                # (to within a round trip, 1 s here) and cannot be ahead of the moment it is read
                low, high = dph * (since - state.created_at) / 3600, dph * (read_at + 1.0 - state.created_at) / 3600
                value = float(shown.lstrip("$").replace(",", ""))
                assert low - 5e-5 <= value <= high + 5e-5, (shown, low, high)
                seen.append(shown)
    assert float(seen[1].lstrip("$")) > float(seen[0].lstrip("$"))

