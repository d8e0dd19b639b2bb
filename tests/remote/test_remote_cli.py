"""`vastui ssh-run INSTANCE -- CMD` as an operator runs it: a real process against the simulated marketplace."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.remote.remote_support import SIM_API_KEY, ClientKey, rent_running
from vastui.config import Secret
from vastui.sim.hosts import SshHostPool
from vastui.sim.market import Market
from vastui.sim.server import SimServer
from vastui.vast.client import HttpVastClient


async def _vastui(*argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vastui", *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ))
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, stdout.decode(), stderr.decode()


@pytest.mark.slow
async def test_ssh_run_streams_output_and_returns_the_remote_exit_status(
        sim: tuple[Market, SshHostPool, SimServer], client_key: ClientKey, tmp_path: Path) -> None:
    market, pool, server = sim
    async with HttpVastClient(base_url=server.url, api_key=Secret(SIM_API_KEY), clock=market.clock) as client:
        instance_id, _, _ = await rent_running(client, market, client_key.public, label="ssh-run")
    connection = ["--url", server.url, "--api-key", SIM_API_KEY, "--ssh-key", str(client_key.path)]
    code = "import sys; print('hello from', sys.argv[1]); print('to stderr', file=sys.stderr); sys.exit(7)"
    status, out, err = await _vastui("ssh-run", *connection, str(instance_id), "--", "python3", "-c", code, "a b")
    assert status == 7, err
    assert out == "hello from a b\n" and err == "to stderr\n"
    assert SIM_API_KEY not in out + err
    known_hosts = Path(os.environ["VASTUI_DATA_DIR"]) / "known_hosts"
    assert known_hosts.read_text().count("ssh-ed25519") == 1  # the host key was recorded on first contact

    status, out, err = await _vastui("ssh-run", *connection, "999999", "--", "true")
    assert status == 1 and "there is no instance 999999" in err and out == ""
    status, out, err = await _vastui("ssh-run", *connection, str(instance_id))
    assert status == 1 and "nothing to run" in err
