"""A team's store: two consoles on two data directories share one PostgreSQL server, and each sees the other's
campaign as owned — never unowned, never leaked — so the second's `vastui leaks --destroy --include-unowned` leaves
the first's machines alone. The same second console on a laptop store of its own calls them leaks of a campaign it
does not know, which `leaks --destroy` would destroy: that is what the shared store changes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from vastui.campaign.watch import find_leaks
from vastui.cli import main
from vastui.clock import MarketClock
from vastui.config import Secret
from vastui.events import Event, InstanceRented
from vastui.sim.demo import open_demo
from vastui.sim.factory import DEMO_API_KEY
from vastui.store import SqliteStore, open_store
from vastui.vast.client import HttpVastClient


@pytest.mark.slow
async def test_a_second_console_on_the_team_store_sees_the_first_s_campaign_as_owned(
        pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events: list[Event] = []
    rented = asyncio.Event()

    def on_event(event: Event) -> None:
        events.append(event)
        if isinstance(event, InstanceRented):
            rented.set()

    async with open_demo(seed=3, time_scale=60.0, data_dir=tmp_path / "alice", db_url=pg_url,
                         manifest_path=fast_manifest(tmp_path / "m", max_candidates=4)) as demo:
        demo.services.bus.listen(on_event)
        handle = demo.start(plan_approved=True)
        await asyncio.wait_for(rented.wait(), timeout=120)
        url = demo.client.base_url
        # Bob's console: his own data directory (the test's), the team's server; and a laptop store of his own
        bob = await open_store(pg_url, data_dir=tmp_path / "bob")
        laptop = await SqliteStore.open(tmp_path / "bob-laptop" / "vastui.sqlite3")
        try:
            async with HttpVastClient(base_url=url, api_key=Secret(DEMO_API_KEY), clock=MarketClock()) as client:
                listing = await client.list_instances()
                campaign_ids = {i.id for i in listing.instances}
                shared = await find_leaks(market=client, store=bob, clock=MarketClock())
                alone = await find_leaks(market=client, store=laptop, clock=MarketClock())
        finally:
            await bob.close()
            await laptop.close()
        assert campaign_ids, "the campaign has an instance listed"
        assert shared.is_complete and not [leak for leak in shared.leaks if leak.instance_id in campaign_ids]
        # the control: a store of his own knows no such campaign, and `leaks --destroy` would take its machines
        assert {leak.instance_id for leak in alone.leaks} >= campaign_ids
        code = await asyncio.to_thread(main, ["leaks", "--url", url, "--api-key", DEMO_API_KEY, "--db", pg_url,
                                              "--destroy", "--include-unowned", "--yes", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["leaks"] == [] and "destroy" not in out   # nothing to destroy, none asked
        result = await handle.result()
        left = await demo.instances_left()
    assert left == 0 and result.receipt.teardown_passed
    requests = [r for r in demo.market.request_log if r.method == "DELETE"]
    assert {int(r.path.rstrip("/").rsplit("/", 1)[-1]) for r in requests} >= campaign_ids  # the campaign's own
