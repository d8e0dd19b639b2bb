"""Compatibility: the real official ``vastai`` 1.9.1 CLI against the simulator on a loopback port.

Every command of docs/api-notes.md §2 (``execute`` excepted: the CLI itself is broken) and the other verified
requests run as real subprocesses in a throw-away HOME, with VAST_URL pointing at the simulator. The CLI exits 0
even on API errors, so each result is judged by its JSON output. Subprocesses run through asyncio, so the server
in this event loop keeps serving while the CLI waits.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vastui.clock import ScaledClock
from vastui.sim.factory import build_market
from vastui.sim.instance import InstanceStatus
from vastui.sim.market import Market
from vastui.sim.offers import offer_row
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()


KEY = "sk-compat-0123456789"
VASTAI = Path(sys.executable).parent / "vastai"
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class CliResult:
    rc: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def error(self) -> dict[str, Any]:
        """The ``--raw`` error object the CLI writes to stderr on an HTTP error."""
        line = next(line for line in reversed(self.stderr.strip().splitlines()) if line.startswith("{"))
        error: dict[str, Any] = json.loads(line)
        return error


@dataclass
class Sim:
    url: str
    market: Market
    home: Path

    async def cli(self, *args: str, key: str = KEY) -> CliResult:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home), "VAST_URL": self.url,
               "VASTAI_NO_UPDATE_CHECK": "1", "LANG": "C.UTF-8"}
        proc = await asyncio.create_subprocess_exec(
            str(VASTAI), "--url", self.url, "--api-key", key, "--raw", *args, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        assert proc.returncode is not None
        return CliResult(rc=proc.returncode, stdout=out.decode(), stderr=err.decode())

    async def wait_status(self, instance_id: int, status: InstanceStatus) -> None:
        async with asyncio.timeout(20):
            while True:
                await self.market.refresh()
                state = self.market.instance_state(instance_id)
                if state is not None and state.status is status:
                    return
                await asyncio.sleep(0.05)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Sim]:
    assert VASTAI.exists(), "the official CLI (vastai==1.9.1) is a test dependency"
    # 1000x: image pulls take seconds of wall time, and the CLI's 0.3 s log polls find results ready.
    market = build_market(7, clock=ScaledClock(scale=1000.0), api_key=KEY, initial_credit_usd=5000.0,
                          realism=KIND)
    home = tmp_path / "cli-home"
    home.mkdir()
    async with SimServer(market, port=0) as server:
        yield Sim(url=server.url, market=market, home=home)


def _cheap_offer_ids(market: Market, n: int) -> list[int]:
    rows = [offer_row(m, now=market.clock.now(), rented=market.is_rented(m)) for m in market.world.machines
            if m.truth.fault.value == "none" and m.verification == "verified" and not m.external]
    rows = [r for r in rows if r["rentable"] and r["disk_space"] >= 20]
    return [r["id"] for r in sorted(rows, key=lambda r: r["dph_total"])[:n]]


async def test_search_offers_honours_filters_order_and_limit(sim: Sim) -> None:
    result = await sim.cli("search", "offers", "gpu_name=RTX_4090 reliability>0.95 geolocation notin [CN,VN] "
                           "gpu_ram>=20", "-o", "dlperf_usd-", "--limit", "5")
    assert result.rc == 0, result.stderr
    offers = result.json()
    # An oracle independent of the simulator's filter engine: the same predicates over every offer row.
    now = sim.market.clock.now()
    rows = [offer_row(m, now=now, rented=sim.market.is_rented(m)) for m in sim.market.world.machines]
    matching = [r for r in rows if r["gpu_name"] == "RTX 4090" and r["reliability"] > 0.95
                and r["geolocation"][-2:] not in ("CN", "VN") and r["gpu_ram"] >= 20_000
                and r["verification"] == "verified" and not r["external"] and r["rentable"]]
    expected = sorted(matching, key=lambda r: (-r["dlperf_per_dphtotal"], r["id"]))[:5]
    assert len(expected) == 5
    assert [o["id"] for o in offers] == [r["id"] for r in expected]

    result = await sim.cli("search", "offers", "num_gpus>=2 num_gpus<=4 datacenter=True verified=any",
                           "--type", "bid", "--storage", "50", "-o", "num_gpus-,dph+", "--limit", "8")
    offers = result.json()
    assert len(offers) == 8
    assert all(2 <= o["num_gpus"] <= 4 and o["hosting_type"] == 1 and o["is_bid"] for o in offers)
    assert [(-o["num_gpus"], o["dph_total"]) for o in offers] == sorted((-o["num_gpus"], o["dph_total"])
                                                                        for o in offers)
    assert all(o["dph_total"] == pytest.approx(o["min_bid"] + o["storage_cost"] * 50 / 720, abs=1e-5)
               for o in offers)

    new = await sim.cli("search", "offers", "gpu_name=RTX_4090 reliability>0.95 geolocation notin [CN,VN] "
                        "gpu_ram>=20", "-o", "dlperf_usd-", "--limit", "5", "--new")
    assert [o["id"] for o in new.json()] == [r["id"] for r in expected]
    assert ("PUT", "/api/v0/search/asks/") in {(r.method, r.path) for r in sim.market.request_log}


async def test_instance_lifecycle_through_the_cli(sim: Sim) -> None:
    (offer_id,) = _cheap_offer_ids(sim.market, 1)
    created = (await sim.cli("create", "instance", str(offer_id), "--image", "pytorch/pytorch", "--disk", "20",
                             "--ssh", "--direct", "--label", "x", "--env", "-e FOO=bar -p 8080:8080")).json()
    assert created["success"] is True and isinstance(created["instance_api_key"], str)
    iid = created["new_contract"]
    twice = await sim.cli("create", "instance", str(offer_id), "--image", "pytorch/pytorch")
    assert twice.rc == 0 and twice.error()["status_code"] == 400 and "already rented" in twice.error()["msg"]

    await sim.wait_status(iid, InstanceStatus.RUNNING)
    listed = (await sim.cli("show", "instances")).json()
    assert [row["id"] for row in listed] == [iid]
    # the CLI's post-processing ran (duration is the CLI's wall clock minus the sim's start_date: any number)
    assert listed[0]["extra_env"] == {"FOO": "bar"} and isinstance(listed[0]["duration"], float)
    row = (await sim.cli("show", "instance", str(iid))).json()
    assert row["id"] == iid and row["actual_status"] == "running" and row["label"] == "x"
    ssh = await sim.cli("ssh-url", str(iid))
    assert ssh.stdout.strip() == f"ssh://root@127.0.0.1:{row['ports']['22/tcp'][0]['HostPort']}"

    assert (await sim.cli("label", "instance", str(iid), "renamed")).stdout.strip() == \
        f"label for {iid} set to renamed."
    assert (await sim.cli("stop", "instance", str(iid))).stdout.strip() == f"stopping instance {iid}."
    assert sim.market.instance_state(iid).status is InstanceStatus.STOPPED  # type: ignore[union-attr]
    assert (await sim.cli("start", "instance", str(iid))).stdout.strip() == f"starting instance {iid}."
    await sim.wait_status(iid, InstanceStatus.RUNNING)
    prepaid = (await sim.cli("prepay", "instance", str(iid), "10")).stdout
    assert prepaid.startswith("prepaid for ") and f"of instance {iid} applying $10.0 credits" in prepaid
    logs = await sim.cli("logs", str(iid))
    assert logs.rc == 0 and f"Instance {iid} created" in logs.stdout and "Container started" in logs.stdout
    assert (await sim.cli("reboot", "instance", str(iid))).stdout.strip() == f"Rebooting instance {iid}."
    assert (await sim.cli("recycle", "instance", str(iid))).stdout.strip() == f"Recycling instance {iid}."
    deposit = (await sim.cli("show", "deposit", str(iid))).stdout
    assert "refundable_deposit" in deposit

    destroyed = await sim.cli("destroy", "instance", str(iid), "-y")
    assert destroyed.rc == 0 and destroyed.stdout.strip() == ""
    assert (await sim.cli("show", "instance", str(iid))).json() == {"instances": None}
    assert sim.market.instance_ids() == []
    # every mutating request names its target, and no record carries the key
    mutations = [r for r in sim.market.request_log if r.is_mutating and r.status == 200]
    assert {r.target_id for r in mutations} >= {offer_id, iid}
    assert KEY not in repr(sim.market.request_log)


async def test_bulk_commands_account_and_keys(sim: Sim) -> None:
    offers = _cheap_offer_ids(sim.market, 2)
    bulk = await sim.cli("create", "instances", *map(str, offers), "--image", "pytorch/pytorch", "--disk", "10")
    assert bulk.rc == 0 and bulk.stdout.strip() == ""
    ids = sim.market.instance_ids()
    assert len(ids) == 2 and {sim.market.instance_state(i).machine.offer_id for i in ids} == set(offers)  # type: ignore[union-attr]
    stop = await sim.cli("stop", "instances", *map(str, ids))
    assert stop.stdout.strip() == f"stopping instance {ids}."
    assert all(sim.market.instance_state(i).status is InstanceStatus.STOPPED for i in ids)  # type: ignore[union-attr]
    start = await sim.cli("start", "instances", *map(str, ids))
    assert start.stdout.strip() == f"starting instance {ids}."
    assert all(sim.market.instance_state(i).status is not InstanceStatus.STOPPED for i in ids)  # type: ignore[union-attr]

    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIcompat compat@test"
    created = await sim.cli("create", "ssh-key", key)
    assert "ssh-key created" in created.stdout
    (account_key,) = (await sim.cli("show", "ssh-keys")).json()
    assert account_key["key"] == key
    updated = await sim.cli("update", "ssh-key", str(account_key["id"]), key + "2")
    assert updated.rc == 0 and "success" in updated.stdout
    attached = await sim.cli("attach", "ssh", str(ids[0]), key)
    assert "'success': True" in attached.stdout
    (key_id,) = sim.market.instance_state(ids[0]).attached_keys  # type: ignore[union-attr]
    detached = await sim.cli("detach", "ssh", str(ids[0]), str(key_id))
    assert "'success': True" in detached.stdout and not sim.market.instance_state(ids[0]).attached_keys  # type: ignore[union-attr]
    deleted = await sim.cli("delete", "ssh-key", str(account_key["id"]))
    assert deleted.rc == 0
    none = await sim.cli("show", "ssh-keys")   # no keys left: the API answers 404, as documented
    assert none.stdout.strip() == "" and json.loads(none.stderr)["status_code"] == 404

    before = (await sim.cli("show", "user")).json()
    assert "api_key" not in before and before["username"] and isinstance(before["credit"], float)
    sent = await sim.cli("transfer", "credit", "friend@example.com", "5", "--skip")
    assert sent.stdout.strip() == "Sent 5.0 to friend@example.com"
    assert sim.market.account.transfers[-1].amount_usd == 5.0
    refused = await sim.cli("transfer", "credit", "friend@example.com", "999999", "--skip")
    assert "Insufficient credit" in refused.stdout

    gone = await sim.cli("destroy", "instances", *map(str, ids), "-y")
    assert gone.rc == 0 and sim.market.instance_ids() == []


async def test_errors_surface_the_way_the_cli_expects(sim: Sim) -> None:
    bad = await sim.cli("show", "user", key="wrong-key")
    assert bad.rc == 0 and bad.error() == {"error": True, "status_code": 401, "msg": "Invalid user key"}
    missing = await sim.cli("show", "instance", "123")
    assert missing.json() == {"instances": None}
    gone = await sim.cli("stop", "instance", "123")
    assert "not found" in gone.stderr
    sim.market.chaos.search_quota_exhausted = True
    quota = await sim.cli("search", "offers", "num_gpus=1")
    assert quota.error()["status_code"] == 429 and "Search quota exceeded" in quota.error()["msg"]
    searches = [r for r in sim.market.request_log if r.path == "/api/v0/bundles/"]
    assert len(searches) == 1  # the quota 429 is never retried
    sim.market.chaos.search_quota_exhausted = False
    sim.market.chaos.rate_limit_every_n = 2  # every other request 429, Retry-After 0.5: the CLI retries through
    mark = sim.market.request_log.total
    user = await sim.cli("show", "user")
    assert user.json()["username"]
    statuses = [r.status for r in sim.market.request_log.since(mark) if r.path == "/api/v0/users/current"]
    assert 429 in statuses and statuses[-1] == 200
