"""The whole remote path through the simulated marketplace: rent with the client over HTTP, wait for `running`,
connect over real SSH to the instance's own server, run the real agent with the simulated workload, and check the
records against the machine's hidden truth — losing nothing when the SSH connection is cut mid-run."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import pytest

from tests.remote.remote_support import (
    SIM_API_KEY,
    ClientKey,
    gpu_samples_in_measure,
    grant,
    measured,
    reach_ssh,
    rent_running,
    wait_running,
    workload,
)
from vastui.approval import Action, instance_target, offer_target
from vastui.clock import ScaledClock
from vastui.config import Secret
from vastui.errors import RemoteError
from vastui.remote.protocol import Progress, Record, Result
from vastui.remote.runner import SshRunner
from vastui.sim.factory import build_market
from vastui.sim.hosts import SshHostPool
from vastui.sim.market import Market
from vastui.sim.physics import HostSpec, Variant, plan_step
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer
from vastui.sim.truth import Fault
from vastui.vast.client import HttpVastClient, ssh_key_target
from vastui.vast.models import InstanceStatus

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()


pytestmark = pytest.mark.slow  # seconds of real processes or pictures: the full suite runs them


async def test_rent_run_and_measure_through_the_simulated_marketplace(
        sim: tuple[Market, SshHostPool, SimServer], client_key: ClientKey, tmp_path: Path) -> None:
    market, pool, server = sim
    async with HttpVastClient(base_url=server.url, api_key=Secret(SIM_API_KEY), clock=market.clock) as client:
        instance_id, machine, (host, port) = await rent_running(client, market, client_key.public,
                                                                label="remote-e2e")

        runner = SshRunner(known_hosts=tmp_path / "known_hosts", client_keys=[client_key.path], use_agent=False,
                           retry_interval_s=0.05)
        await reach_ssh(runner, [(host, port)], deadline_s=30)
        loaders = 8
        records: list[Record] = []
        async with runner.connect(host, port, deadline_s=30) as conn, \
                conn.run_agent(workload("--steps", "100", "--loaders", str(loaders))) as run:
            async for record in run:
                records.append(record)
                if isinstance(record, Progress) and record.units_total == 1600:
                    assert pool.drop_connections(instance_id=instance_id) >= 1
        assert run.reconnects >= 1
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        result = records[-1]
        assert isinstance(result, Result) and result.exit_status == 0 and result.units_total == 100 * 32

        plan = plan_step(HostSpec.from_machine(machine), Variant(loaders=loaders))
        progress = measured(records)
        steps_s = sum(sum(p.latency_ms) for p in progress) / 1000.0
        tolerance = 4 * machine.truth.noise_cv + 0.01
        assert sum(p.units for p in progress) / steps_s == pytest.approx(plan.units_per_s, rel=tolerance)
        wait = sum(p.data_wait_s for p in progress) / steps_s
        assert wait == pytest.approx(plan.data_wait_s / plan.step_s, abs=tolerance + 0.02)
        samples = gpu_samples_in_measure(records)
        assert len(samples) >= 3
        assert statistics.mean(s.util_pct or 0.0 for s in samples) == pytest.approx(100 * plan.gpu_busy, abs=8)
        assert all(s.mem_total_mib == machine.truth.vram_mib for s in samples)

        await client.destroy_instance(instance_id,
                                      approval=grant(Action.DESTROY_INSTANCE, instance_target(instance_id)))
        deadline = time.monotonic() + 30
        while pool.is_running(instance_id=instance_id):
            assert time.monotonic() < deadline, "the destroyed instance's SSH server is still up"
            await asyncio.sleep(0.05)
        assert runner.forget_host(host, port) == 1


async def test_a_host_that_dies_mid_run_takes_its_instance_offline(client_key: ClientKey, tmp_path: Path) -> None:
    clock = ScaledClock(scale=200.0)  # the fault comes minutes into the run: run the clock fast
    pool = SshHostPool(base_dir=tmp_path / "hosts", clock=clock, realism=KIND)
    market = build_market(7, clock=clock, api_key=SIM_API_KEY, host_provider=pool, realism=KIND)
    pool.on_host_died = market.mark_offline
    doomed = min((m for m in market.world.machines if m.truth.fault is Fault.DIES_MID_RUN and m.rentable
                  and not m.rented and m.num_gpus == 1), key=lambda m: m.truth.fault_after_s or 0.0)
    try:
        async with SimServer(market) as server, \
                HttpVastClient(base_url=server.url, api_key=Secret(SIM_API_KEY), clock=clock) as client:
            await client.create_ssh_key(client_key.public, approval=grant(Action.CREATE_SSH_KEY,
                                                                          ssh_key_target(client_key.public)))
            created = await client.create_instance(
                offer_id=doomed.offer_id, image="ubuntu:22.04", disk_gib=10, label="doomed",
                approval=grant(Action.CREATE_INSTANCE, offer_target(doomed.offer_id)))
            instance = await wait_running(client, created.instance_id, wall_deadline_s=60)
            endpoint = instance.ssh_endpoint()
            assert endpoint is not None
            runner = SshRunner(known_hosts=tmp_path / "known_hosts", client_keys=[client_key.path],
                               use_agent=False, retry_interval_s=0.05, reconnect_deadline_s=2.0)
            records: list[Record] = []
            with pytest.raises(RemoteError):
                async with runner.connect(*endpoint, deadline_s=30) as conn, \
                        conn.run_agent(workload("--steps", "0")) as run:
                    async for record in run:
                        records.append(record)
            assert run.result is None and any(isinstance(r, Progress) for r in records)
            # the marketplace learns of the death as the host goes down, which can end after the client gave up
            # on the connection (a busy machine): wait for it, within a bound
            deadline = time.monotonic() + 30.0
            while (after := await client.show_instance(created.instance_id)) is not None and \
                    after.actual_status is not InstanceStatus.OFFLINE and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert after is not None and after.actual_status is InstanceStatus.OFFLINE
            assert after.ssh_endpoint() is None and not pool.is_running(instance_id=created.instance_id)
    finally:
        await market.aclose()
        await pool.close()
