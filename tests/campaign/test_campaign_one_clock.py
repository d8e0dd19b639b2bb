"""One clock for money: ``vastui campaign run --time-scale 120`` against a simulator whose x120 clock started a
minute of wall time before the campaign's process: the receipt's campaign cost is what the simulator charged; and
``vastui leaks`` against it: a running instance's accrued cost is its price over the marketplace's time, and grows.

A simulator started 60 wall seconds earlier at x120 reads 60 x 119 simulated seconds ahead of a x120 clock started
now; the simulator here is given that origin instead of a minute of sleep. The campaign is a real process talking
HTTP to the simulator on loopback and SSH to its hosts, as an operator's would.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.waiting import until
from vastui.approval import Action, Approval, ApprovalRequest
from vastui.cli import main
from vastui.clock import ScaledClock
from vastui.config import Secret
from vastui.sim.demo import operator_key
from vastui.sim.factory import build_market, build_market_with_hosts
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.sim.server import SimServer
from vastui.vast.client import HttpVastClient, ssh_key_target

KEY = "one-clock-sim-key-7f3a"
TIME_SCALE = 120.0
STARTED_EARLIER_WALL_S = 60.0
AGREEMENT = 0.01
RUN_BEFORE_LOOKING_S = 600.0     # marketplace seconds the instance runs before it is looked at (5 s of wall time)


def started_a_minute_ago() -> ScaledClock:
    """The clock of a x120 simulator started STARTED_EARLIER_WALL_S of wall time ago (without the wait)."""
    return ScaledClock(scale=TIME_SCALE, origin=time.time() + STARTED_EARLIER_WALL_S * (TIME_SCALE - 1.0))


@pytest.mark.slow
async def test_the_receipt_costs_what_the_simulator_charged_when_it_started_a_minute_earlier(
        tmp_path: Path) -> None:
    sim_clock = started_a_minute_ago()
    market, pool = build_market_with_hosts(7, clock=sim_clock, hosts_dir=tmp_path / "hosts", api_key=KEY)
    ssh_key = operator_key(tmp_path)
    db = tmp_path / "data" / "campaign.sqlite3"
    env = {**os.environ, "HOME": str(tmp_path / "home"), "VASTUI_DATA_DIR": str(tmp_path / "data"),
           "VASTUI_CONFIG_DIR": str(tmp_path / "config"), "VAST_API_KEY": KEY}
    try:
        async with SimServer(market) as server:
            await _register(server.url, ssh_key, sim_clock)
            argv = [sys.executable, "-m", "vastui", "campaign", "run",
                    str(fast_manifest(tmp_path / "m", max_candidates=2)), "--approve-plan", "--json",
                    "--url", server.url, "--db", str(db), "--ssh-key", str(ssh_key),
                    "--time-scale", f"{TIME_SCALE:g}"]
            process = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                           stderr=subprocess.PIPE, env=env)
            try:
                async with asyncio.timeout(900):   # a guard against a hang, not a speed check
                    stdout, stderr = await process.communicate()
            except TimeoutError:
                process.kill()
                raise
            await market.refresh()
            charges = {st.id: market.charges_of(st.id) for st in market.every_instance()}
    finally:
        await market.aclose()
        await pool.close()

    assert process.returncode in (0, 5), stderr.decode()[-3000:]
    receipt = json.loads(stdout)
    assert receipt["teardown_passed"] is True
    charged = {instance_id: c.total_usd for instance_id, c in charges.items()}
    # what time cost (GPUs and disk, the part a wrong clock gets wrong; traffic is per GB) is a fair share of the bill
    assert sum(c.gpu_usd + c.storage_usd for c in charges.values()) > 0.1 * sum(charged.values()), charges
    destroyed = {row["instance_id"] for row in receipt["destroyed"]}
    assert destroyed and destroyed == set(charged), (destroyed, charged)
    assert receipt["campaign_cost_usd"] == pytest.approx(sum(charged.values()), rel=AGREEMENT), (
        receipt["campaign_cost_usd"], charged)


async def _register(url: str, ssh_key: Path, clock: ScaledClock) -> None:
    """The operator's public key on the account (setup, as the operator would have done it before)."""
    public = Path(str(ssh_key) + ".pub").read_text().strip()
    async with HttpVastClient(base_url=url, api_key=Secret(KEY), clock=clock) as client:
        approval = Approval(ApprovalRequest(action=Action.CREATE_SSH_KEY, target=ssh_key_target(public),
                                            summary="the operator's key (test setup)"),
                            granted_by="test", granted_at=clock.now())
        await client.create_ssh_key(public, approval=approval)


@pytest.mark.slow
async def test_vastui_leaks_accrues_a_running_instance_on_the_marketplaces_clock(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim_clock = started_a_minute_ago()
    market = build_market(7, clock=sim_clock, api_key=KEY, n_machines=120)
    async with SimServer(market) as server:
        instance_id, start = await _rent_outside(market)
        await until(lambda: sim_clock.now() >= start + RUN_BEFORE_LOOKING_S, "ten marketplace minutes")
        seen: list[float] = []
        for _ in range(2):   # two checks: the cost has grown between them
            before = sim_clock.now()
            code = await asyncio.to_thread(main, ["leaks", "--url", server.url, "--api-key", KEY,
                                                  "--db", str(tmp_path / "leaks.sqlite3"), "--json"])
            after = sim_clock.now()
            report = json.loads(capsys.readouterr().out)
            assert code == 0 and report["verdict"] == "clean"
            (leak,) = report["leaks"]
            assert leak["instance_id"] == instance_id and leak["reason"] == "unowned"
            state = market.instance_state(instance_id)
            assert state is not None and state.status.value == "running"
            dph = leak["dph_total"]
            # judged at the marketplace's time of the listing: after ``before``, before ``after`` (+1 s of RTT)
            assert dph * (before - start) / 3600 <= leak["accrued_usd"] <= dph * (after + 1.0 - start) / 3600, (
                leak, before - start, after - start)
            seen.append(leak["accrued_usd"])
    assert seen[1] > seen[0]


async def _rent_outside(market: Market) -> tuple[int, float]:
    """An instance the operator rented by hand (setup, straight on the market): its id and marketplace start."""
    machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
    body = {"image": "pytorch/pytorch", "disk": 10, "label": "operator-notebook", "runtype": "ssh"}
    state = await market.create_instance(machine.offer_id, CreateRequest.from_body(body))
    return state.id, state.created_at
