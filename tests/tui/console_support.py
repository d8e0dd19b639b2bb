"""Building a console against the simulated marketplace, and waiting for what it shows.

``SimConsole`` holds a seeded simulator reached over real HTTP (httpx's ASGI transport into the simulator's app),
a real SQLite store in ``tmp_path``, and a ``VastuiApp`` built with them. The simulator and the console share one
scaled clock so instances load in seconds; refresh intervals are on that clock.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets.data_table import RowDoesNotExist

from vastui.approval import Action, Approval, ApprovalRequest, offer_target
from vastui.clock import Clock, ScaledClock
from vastui.config import Secret
from vastui.events import EventBus
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.request_log import RequestRecord
from vastui.sim.server import SimServer
from vastui.store import SqliteStore
from vastui.tui.app import VastuiApp
from vastui.tui.dialogs.confirm import ConfirmDialog
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.tui.widgets.keyed_table import KeyedTable
from vastui.vast.client import HttpVastClient

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()


KEY = "console-sim-key-0123456789"
SCALE = 60.0            # simulated seconds per wall second
FAST = ConsoleSettings(offers_interval_s=60.0, instances_interval_s=12.0, account_interval_s=30.0,
                       leaks_interval_s=15.0, logs_interval_s=6.0, offers_limit=200, theme="dark")
# searches, listings, shows, user and log fetches change nothing on the account
READ_PATHS = ("/api/v0/bundles/", "/api/v0/instances/request_logs/")


@dataclass
class SimParts:
    """A simulator, a client on it and a store: what a console is given (the console's sources take them alone)."""

    market: Market
    client: HttpVastClient
    store: SqliteStore
    clock: Clock
    transport: FaultyTransport | None

    def requests(self) -> list[RequestRecord]:
        return list(self.market.request_log)

    def mutations(self) -> list[RequestRecord]:
        """Answered requests that could change the account (searches and log requests excluded)."""
        return [r for r in self.market.request_log if r.is_mutating and not r.path.startswith(READ_PATHS)]


@dataclass
class SimConsole(SimParts):
    app: VastuiApp


class FaultyTransport(httpx.AsyncBaseTransport):
    """Forwards to the simulator; ``fault(request)`` may answer a status of its own instead (e.g. a failed page)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.fault: Callable[[httpx.Request], int | None] = lambda request: None
        # ``rewrite(request, body)`` may change a JSON answer's body before the client reads it (None: as sent)
        self.rewrite: Callable[[httpx.Request, Any], Any] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        status = self.fault(request)
        if status is not None:
            return httpx.Response(status, json={"success": False, "msg": "injected by the test"})
        response = await self.inner.handle_async_request(request)
        if self.rewrite is None or not response.headers.get("content-type", "").startswith("application/json"):
            return response
        body = self.rewrite(request, json.loads(await response.aread()))
        return httpx.Response(response.status_code, json=body, request=request)


@asynccontextmanager
async def sim_parts(tmp_path: Path, *, seed: int = 7, n_machines: int = 120, timeout_s: float = 5.0,
                    max_attempts: int = 2, over_socket: bool = False) -> AsyncIterator[SimParts]:
    """A fresh simulator, a client on it (auditing into the store) and a store on ``tmp_path``.

    ``over_socket`` serves the simulator on a loopback TCP port (needed where client timeouts must bite: the ASGI
    transport has no network timeouts).
    """
    clock = ScaledClock(scale=SCALE)
    market = build_market(seed, clock=clock, api_key=KEY, n_machines=n_machines, initial_credit_usd=1000.0,
                          realism=KIND)
    store = await SqliteStore.open(tmp_path / "console.sqlite3")
    async with AsyncExitStack() as stack:
        if over_socket:
            server = await stack.enter_async_context(SimServer(market, port=0))
            base_url, transport = server.url, None
        else:
            base_url, transport = "http://sim.test", FaultyTransport(httpx.ASGITransport(app=create_app(market)))
        client = HttpVastClient(base_url=base_url, api_key=Secret(KEY), clock=clock, transport=transport,
                                timeout_s=timeout_s, max_attempts=max_attempts, audit=store)
        try:
            yield SimParts(market=market, client=client, store=store, clock=clock, transport=transport)
        finally:
            await client.aclose()
            await store.close()
            await market.aclose()


@asynccontextmanager
async def sim_console(tmp_path: Path, *, settings: ConsoleSettings = FAST, seed: int = 7, n_machines: int = 120,
                      timeout_s: float = 5.0, max_attempts: int = 2,
                      over_socket: bool = False) -> AsyncIterator[SimConsole]:
    """A console on a fresh simulator (not yet running: use ``app.run_test``); see ``sim_parts``."""
    async with sim_parts(tmp_path, seed=seed, n_machines=n_machines, timeout_s=timeout_s, max_attempts=max_attempts,
                         over_socket=over_socket) as parts:
        services = ConsoleServices(market=parts.client, clock=parts.clock, bus=EventBus(), store=parts.store,
                                   audit=parts.store)
        app = VastuiApp(services=services, settings=settings)
        yield SimConsole(market=parts.market, client=parts.client, store=parts.store, clock=parts.clock,
                         transport=parts.transport, app=app)


def with_settings(**changes: object) -> ConsoleSettings:
    return replace(FAST, **changes)  # type: ignore[arg-type]


async def wait_for(pilot: Pilot[None], predicate: Callable[[], bool], *, what: str, deadline_s: float = 30.0) -> None:
    """Let the app run until ``predicate()`` holds; fail with ``what`` after ``deadline_s`` of wall time."""
    end = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def shown_columns(table: KeyedTable) -> tuple[str, ...]:
    """The columns on screen now, in order, read off the table itself (the rest were dropped to fit the width)."""
    return tuple(str(key.value) for key in table.columns)


def cells_of(table: KeyedTable, key: str) -> tuple[str | Text | None, ...] | None:
    """Row ``key`` as the table shows it, read through DataTable's ``get_row``: one cell per column of
    ``table.column_keys``, in that order, each in the form it has on screen (a squeezed cell shortened, a ``Forms``
    cell the form that fits); None for a column dropped to fit the width. None when the table has no such row."""
    try:
        shown = table.get_row(key)
    except RowDoesNotExist:
        return None
    by_column = dict(zip(shown_columns(table), shown, strict=True))
    return tuple(by_column.get(column) for column in table.column_keys)


def dialog(app: VastuiApp) -> ConfirmDialog | None:
    """The confirmation dialog on top, if one is."""
    screen = app.screen
    return screen if isinstance(screen, ConfirmDialog) else None


def create_paths(requests: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in requests if r.method == "PUT" and r.path.startswith("/api/v0/asks/")]


def destroys(requests: list[RequestRecord]) -> list[int]:
    """Instance ids of the destroy calls the simulator answered with 200, in order."""
    return [r.target_id for r in requests if r.method == "DELETE" and r.status == 200 and r.target_id is not None]


async def confirm_dialog(pilot: Pilot[None], app: VastuiApp, *, typed: str | None = None) -> None:
    """Confirm the open dialog the way an operator does: type what it asks for, or move to Confirm and press Enter."""
    await wait_for(pilot, lambda: dialog(app) is not None, what="a confirmation dialog")
    box = dialog(app)
    assert box is not None
    if typed is not None:
        box.query_one("#confirm-typed").focus()
        await pilot.press(*typed, "enter")
    else:
        await pilot.press("tab")  # from Cancel to Confirm
        assert app.focused is not None and app.focused.id == "confirm"
        await pilot.press("enter")
    await wait_for(pilot, lambda: dialog(app) is None, what="the dialog to close")


def grant(action: Action, target: str) -> Approval:
    """An approval given by the test itself (for setting the scene outside the console)."""
    return Approval(ApprovalRequest(action=action, target=target, summary="test scene"), granted_by="test",
                    granted_at=0.0)


async def rent_outside(sim: SimParts, *, label: str, query: str = "num_gpus=1", skip: int = 0) -> int:
    """Rent one offer straight through the client, outside the console and any campaign; its instance id."""
    offer = (await sim.client.search_offers(query, order="dph+", limit=skip + 1))[skip]
    made = await sim.client.create_instance(offer_id=offer.id, image="pytorch/pytorch", disk_gib=10, label=label,
                                            approval=grant(Action.CREATE_INSTANCE, offer_target(offer.id)))
    return made.instance_id
