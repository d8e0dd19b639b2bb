"""Serving over real loopback sockets: SimServer in this event loop, and the ``vastui sim`` command as a process."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.sim.factory import DEMO_API_KEY, build_market
from vastui.sim.server import SimServer

KEY = "sk-server-test"


async def test_sim_server_serves_on_a_real_port_and_closes() -> None:
    market = build_market(7, clock=FakeClock(), api_key=KEY, n_machines=40)
    async with SimServer(market, port=0) as server:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
        async with httpx.AsyncClient(base_url=server.url) as client:
            r = await client.get("/api/v0/users/current", headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == 200 and r.headers["content-type"] == "application/json"
            r = await client.get(f"{server.url}//api/v0/gpu_names/unique/")
            assert r.status_code == 200
        port = server.port
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


async def test_every_answer_carries_the_markets_time_once() -> None:
    """Date (to the second) and the precise stamp are the market's clock, not the wall clock, and Date comes once."""
    from email.utils import parsedate_to_datetime

    from vastui.clock import SIM_CLOCK_HEADER

    clock = FakeClock(start=2_000_000_000.25)
    market = build_market(7, clock=clock, api_key=KEY, n_machines=40)
    async with SimServer(market, port=0, poll=False) as server, httpx.AsyncClient(base_url=server.url) as client:
        for path, status in (("/api/v0/users/current", 200), ("/api/v0/no/such/", 404)):
            r = await client.get(path, headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == status
            assert r.headers.get_list("date") == ["Wed, 18 May 2033 03:33:20 GMT"]
            assert parsedate_to_datetime(r.headers["date"]).timestamp() == 2_000_000_000.0
            assert float(r.headers[SIM_CLOCK_HEADER]) == 2_000_000_000.25


async def test_a_dropped_reply_still_applies_the_request() -> None:
    """The case a client must reconcile: the create happened, the answer never arrived."""
    market = build_market(7, clock=FakeClock(), api_key=KEY, n_machines=40)
    offer = next(m for m in market.world.machines if not m.rented)
    async with SimServer(market, port=0) as server:
        market.chaos.drop_connection_rate = 1.0
        async with httpx.AsyncClient(base_url=server.url) as client:
            with pytest.raises(httpx.TransportError):
                await client.put(f"/api/v0/asks/{offer.offer_id}/", json={"image": "x", "label": "once"},
                                 headers={"Authorization": f"Bearer {KEY}"})
        assert len(market.instance_ids()) == 1
        assert market.instance_state(market.instance_ids()[0]).label == "once"  # type: ignore[union-attr]


async def test_port_in_use_is_an_os_error_not_an_exit() -> None:
    market = build_market(7, clock=FakeClock(), api_key=KEY, n_machines=20)
    async with SimServer(market, port=0) as first:
        with pytest.raises(OSError):
            async with SimServer(market, port=first.port):
                pass


async def _start_cli(*args: str) -> tuple[asyncio.subprocess.Process, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vastui", "sim", "--port", "0", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(30):
        while not any("export VAST_URL=" in line for line in lines):
            line = (await proc.stdout.readline()).decode()
            assert line, f"vastui sim exited early: {lines}"
            lines.append(line.strip())
    return proc, lines


def _url(lines: list[str]) -> str:
    serving = next(line for line in lines if "serving http://" in line)
    return serving.split("serving ", 1)[1].strip()


async def _stop(proc: asyncio.subprocess.Process) -> str:
    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(20):
        _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return err.decode()


async def test_vastui_sim_command_serves_rents_with_ssh_hosts_and_stops_on_sigterm() -> None:
    proc, lines = await _start_cli("--seed", "7", "--time-scale", "1000")
    try:
        assert f"demo API key: {DEMO_API_KEY}" in lines
        url = _url(lines)
        assert any(f"export VAST_URL={url} VAST_API_KEY={DEMO_API_KEY}" in line for line in lines)
        auth = {"Authorization": f"Bearer {DEMO_API_KEY}"}
        async with httpx.AsyncClient(base_url=url) as client:
            r = await client.post("/api/v0/bundles/", json={"rentable": {"eq": True}, "limit": 3,
                                                            "order": [["inet_down", "desc"]]}, headers=auth)
            assert r.status_code == 200 and len(r.json()["offers"]) == 3
            offer_id = r.json()["offers"][0]["id"]
            r = await client.put(f"/api/v0/asks/{offer_id}/", json={"image": "pytorch/pytorch", "disk": 10},
                                 headers=auth)
            instance_id = r.json()["new_contract"]
            # the realistic default: a first show may be null, the rental may schedule and read `unknown` a while,
            # and a poll sooner than the endpoint's interval is answered 429 (docs/api-notes.md §1.4, lifecycle)
            async with asyncio.timeout(30):
                while True:
                    answer = await client.get(f"/api/v0/instances/{instance_id}/", headers=auth)
                    row = answer.json()["instances"] if answer.status_code == 200 else None
                    if row is not None and row["actual_status"] not in (None, "created", "scheduling", "loading",
                                                                        "unknown"):
                        break
                    await asyncio.sleep(0.1)
        assert row["actual_status"] == "running", row["status_msg"]
        # a real SSH server answers on the endpoint the row gives: the proxy's (`ssh_host`, `ssh_port`), as a
        # rental that did not ask for direct ports is reached (docs/api-notes.md §3.12); strings may be padded
        # sshd may come up a little after the row says running, closing connections before the banner until then
        # (Realism.sshd_late): a client tries again, as this one does
        async with asyncio.timeout(30):
            while True:
                reader, writer = await asyncio.open_connection(row["ssh_host"].strip(), int(row["ssh_port"]))
                banner = await reader.readline()
                writer.close()
                if banner:
                    break
                await asyncio.sleep(0.05)
        assert banner.startswith(b"SSH-2.0-")
    finally:
        err = await _stop(proc)
    assert "stopped" in err


async def test_vastui_sim_with_own_key_does_not_print_it() -> None:
    proc, lines = await _start_cli("--seed", "3", "--api-key", "my-secret-key")
    try:
        assert not any("my-secret-key" in line for line in lines)
        assert not any(DEMO_API_KEY in line for line in lines)
        async with httpx.AsyncClient(base_url=_url(lines)) as client:
            ok = await client.get("/api/v0/users/current", headers={"Authorization": "Bearer my-secret-key"})
            demo = await client.get("/api/v0/users/current", headers={"Authorization": f"Bearer {DEMO_API_KEY}"})
            # a key the simulator does not know: 404 auth_error, as the real service often answers (§1.2)
            assert ok.status_code == 200 and demo.status_code == 404 and demo.json()["error"] == "auth_error"
    finally:
        await _stop(proc)


async def test_vastui_sim_reports_a_taken_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vastui", "sim", "--port", str(taken.getsockname()[1]),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        async with asyncio.timeout(30):
            _, err = await proc.communicate()
    assert proc.returncode == 1 and "Cannot serve" in err.decode()
