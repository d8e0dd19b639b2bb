"""``vastui leaks`` on a real terminal 80, 120 and 160 columns wide: every leaked instance's id, status, $/h and
accrued cost are readable, and the hints (why, how to resume) are whole lines, never cut by a table cell.

The CLI runs as a real process whose stdout is a pseudo-terminal of that width, against a loopback simulator with
instances rented by hand and a store at the CLI's own path."""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from collections.abc import AsyncIterator

import pytest

from tests.fakes import FakeClock
from vastui.config import load_settings
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer
from vastui.sim.turns import LifecycleOdds
from vastui.store import SqliteStore

KEY = "leaks-layout-key-7777"
# Every realism rule but the rate limits: this market's clock stands still (the tests move it by hand), and a
# minimum interval measured on a clock that never moves would refuse every second request for ever.
FROZEN_CLOCK_REALISM = dataclasses.replace(Realism.vast(), rate_limits=False)
HOUR = 3600.0
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def market() -> Market:
    market = build_market(7, clock=FakeClock(start=time.time() - 2 * HOUR), api_key=KEY, n_machines=120,
                          realism=FROZEN_CLOCK_REALISM)
    market.lifecycle_odds = LifecycleOdds.never()   # the rentals are set-up here; the leak report is under test
    return market


@pytest.fixture
async def server(market: Market) -> AsyncIterator[SimServer]:
    async with SimServer(market, poll=False) as running:
        yield running


def _free_offer(market: Market) -> int:
    return next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10).offer_id


async def _rent(market: Market, offer_id: int, label: str) -> int:
    """Rent straight on the market (setup, not under test)."""
    body = {"image": "pytorch/pytorch", "disk": 10, "label": label, "runtype": "ssh"}
    return (await market.create_instance(offer_id, CreateRequest.from_body(body))).id


async def _owned(market: Market, store: SqliteStore, campaign_id: str, *, phase: str, finished: bool = False,
                 deadline_at: float | None = None) -> int:
    """What a campaign does: its row, the intent, the create with its label, the id bound."""
    now = time.time()
    await store.save_manifest(digest="sha256:" + "0" * 64, name="w", toml_text="[workload]\n", stored_at=now)
    await store.create_campaign(campaign_id=campaign_id, manifest_digest="sha256:" + "0" * 64,
                                created_at=now - HOUR, phase=phase, deadline_at=deadline_at)
    if finished:
        await store.finish_campaign(campaign_id=campaign_id, phase="finished", at=now)
    offer_id = _free_offer(market)
    label = f"vastui-{campaign_id}-c0-{offer_id}"
    intent = await store.record_intent(campaign_id=campaign_id, offer_id=offer_id, label=label, at=now,
                                       deadline_at=deadline_at)
    instance_id = await _rent(market, offer_id, label)
    await store.bind_intent(intent_id=intent.intent_id, instance_id=instance_id, at=now)
    return instance_id


async def _leaky_world(market: Market) -> list[int]:
    """A finished campaign's instance, one past its deadline, a crashed campaign's (with its resume hint), and one
    the operator rented by hand with a long label."""
    async with await SqliteStore.open(load_settings().db_path) as store:
        ids = [await _owned(market, store, "cdone", phase="measuring", finished=True),
               # past its deadline on the marketplace's clock, which leaks judges by (two hours behind the wall)
               await _owned(market, store, "clate", phase="measuring", deadline_at=market.clock.now() - 600),
               await _owned(market, store, "ccrash", phase="crashed")]
    ids.append(await _rent(market, _free_offer(market), "operator-notebook-with-a-rather-long-label"))
    return ids


def _run_on_terminal(argv: list[str], *, columns: int) -> tuple[int, str]:
    """Run vastui with stdout and stderr on a pseudo-terminal ``columns`` wide; (exit status, what it showed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm", "NO_COLOR": "1"}
    process = subprocess.Popen([sys.executable, "-m", "vastui", *argv], stdin=subprocess.DEVNULL, stdout=slave,
                               stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    code = process.wait(timeout=120)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", errors="replace")).replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 120, 160])
async def test_leaks_shows_ids_costs_and_whole_hints_at_any_width(server: SimServer, market: Market,
                                                                  columns: int) -> None:
    ids = await _leaky_world(market)
    argv = ["leaks", "--url", server.url, "--api-key", KEY]
    code, shown = await asyncio.to_thread(_run_on_terminal, argv, columns=columns)
    assert code == 4, shown
    lines = shown.splitlines()
    as_json = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "vastui", *argv, "--json"],
                                      capture_output=True, text=True, timeout=120, check=False)
    listed = json.loads(as_json.stdout)
    price = {leak["instance_id"]: leak["dph_total"] for leak in listed["leaks"]}
    assert sorted(price) == sorted(ids)
    for instance_id in ids:
        row = next((line for line in lines if re.match(rf"^\s*{instance_id}\s", line)), None)
        assert row is not None, f"no row starts with instance {instance_id}:\n{shown}"
        assert "…" not in row and len(row) <= columns, shown
        status = "running|loading|created|provisioning|stopped|exited|offline"
        assert re.search(rf"\b({status})\b", row), row
        assert f" {price[instance_id]:.3f} " in row + " ", row           # $/h whole
        assert re.search(r" \d+\.\d{4}(\s|$)", row), row                  # accrued $ whole (4 decimals)
    assert "`vastui campaign resume ccrash` cleans it up" in shown, shown
    assert "leaked instance(s) burning" in shown, shown
