"""A console following the demo campaign on the embedded simulator (real HTTP, real SSH on loopback, real SQLite),
with the fast manifest and a high time scale so a whole campaign takes seconds of wall time."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot

from tests.campaign.campaign_support import fast_manifest
from vastui.campaign.handle import CampaignHandle
from vastui.cli.campaign_console import console_settings
from vastui.clock import Clock
from vastui.events import Event
from vastui.sim.demo import DemoSession, open_demo
from vastui.sim.realism import Realism
from vastui.tui.app import VastuiApp
from vastui.tui.services import ConsoleServices
from vastui.tui.views.campaign import CampaignView

TIME_SCALE = 100.0     # as the handle's tests: slow enough that a loaded machine still sees the race
WAIT_S = 150.0         # wall-clock bound on a condition; reached only when something is broken
_CREATE = re.compile(r"^/api/v0/asks/(\d+)/$")


@dataclass
class CampaignConsole:
    app: VastuiApp
    demo: DemoSession
    handle: CampaignHandle
    events: list[Event]

    def created_offers(self) -> list[int]:
        return [int(m.group(1)) for r in self.demo.market.request_log
                if r.method == "PUT" and (m := _CREATE.match(r.path))]

    async def instances_alive(self) -> list[int]:
        await self.demo.market.refresh()
        return list(self.demo.market.instance_ids())

    @property
    def view(self) -> CampaignView:
        return self.app.query_one(CampaignView)


@asynccontextmanager
async def campaign_console(tmp_path: Path, *, seed: int, expiry_s: float = 3600.0,
                           max_candidates: int = 3, wall: Clock | None = None,
                           time_scale: float = TIME_SCALE) -> AsyncIterator[CampaignConsole]:
    """The demo campaign started (waiting for approvals) and a console following it (not yet running). Requests
    expire after ``expiry_s`` seconds of ``wall`` (the real monotonic clock unless a test passes its own)."""
    # the console's handling of a campaign is under test, not the marketplace's turns: the kind simulator, by name
    # (the realistic one runs whole campaigns in tests/campaign, the chaos runs and scripts/tmux_demo.sh)
    async with open_demo(seed=seed, time_scale=time_scale, data_dir=tmp_path / "data", realism=Realism.kind(),
                         manifest_path=fast_manifest(tmp_path / "m", max_candidates=max_candidates)) as demo:
        events: list[Event] = []
        demo.services.bus.listen(events.append)
        handle = demo.start(plan_approved=False, expiry_s=expiry_s, wall=wall)
        services = ConsoleServices(market=demo.client, clock=demo.services.clock, bus=demo.services.bus,
                            store=demo.services.store, audit=demo.services.store)
        app = VastuiApp(services=services, settings=console_settings(time_scale=time_scale), campaign=handle)
        try:
            yield CampaignConsole(app, demo, handle, events)
        finally:
            if not handle.is_done:
                handle.abort("the test ended")
                await handle.result()


async def wait_until(pilot: Pilot[None], predicate: object, *, what: str, deadline_s: float = WAIT_S) -> None:
    from tests.tui.console_support import wait_for

    await wait_for(pilot, predicate, what=what, deadline_s=deadline_s)  # type: ignore[arg-type]


def pending_count(console: CampaignConsole) -> int:
    picture = console.app.state.campaign
    return 0 if picture is None else len(console.view.pending(picture))
