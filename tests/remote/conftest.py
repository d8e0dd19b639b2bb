"""Fixtures for remote tests: an operator key, a pool of simulated hosts (real asyncssh servers) and a runner."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from tests.remote.remote_support import SIM_API_KEY, SIM_SCALE, ClientKey
from vastui.clock import ScaledClock
from vastui.remote.runner import SshRunner
from vastui.sim.factory import build_market
from vastui.sim.hosts import SshHostPool
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()



@pytest.fixture
def client_key(tmp_path: Path) -> ClientKey:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "id_ed25519"
    path.write_bytes(key.export_private_key())
    path.chmod(0o600)
    return ClientKey(path=path, public=key.export_public_key().decode().strip())


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[SshHostPool]:
    hosts = SshHostPool(base_dir=tmp_path / "hosts", clock=ScaledClock(scale=SIM_SCALE),
                         realism=KIND)
    try:
        yield hosts
    finally:
        await hosts.close()


@pytest.fixture
def runner(tmp_path: Path, client_key: ClientKey) -> SshRunner:
    return SshRunner(known_hosts=tmp_path / "known_hosts", client_keys=[client_key.path], use_agent=False,
                     retry_interval_s=0.05, reconnect_deadline_s=10.0, connect_timeout_s=5.0)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[tuple[Market, SshHostPool, SimServer]]:
    clock = ScaledClock(scale=SIM_SCALE)
    pool = SshHostPool(base_dir=tmp_path / "hosts", clock=clock, realism=KIND)
    market = build_market(7, clock=clock, api_key=SIM_API_KEY, host_provider=pool, realism=KIND)

    pool.on_host_died = market.mark_offline
    try:
        async with SimServer(market) as server:
            yield market, pool, server
    finally:
        await pool.close()
