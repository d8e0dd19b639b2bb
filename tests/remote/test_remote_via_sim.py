"""The whole remote path through the simulated marketplace: rent with the client over HTTP, wait for `running`,
connect over real SSH to the instance's own server, run the real agent with the simulated workload, and check the
records against the machine's hidden truth — losing nothing when the SSH connection is cut mid-run."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from remote_support import ClientKey, measure_window, measured, workload

from vastui.approval import Action, Approval, ApprovalRequest, instance_target, offer_target
from vastui.clock import ScaledClock
from vastui.config import Secret
from vastui.remote.protocol import GpuSample, Progress, Record, Result
from vastui.remote.runner import SshRunner
from vastui.sim.factory import build_market
from vastui.sim.hosts import SshHostPool
from vastui.sim.market import Market
from vastui.sim.physics import HostSpec, Variant, plan_step
from vastui.sim.server import SimServer
from vastui.sim.truth import Fault
from vastui.vast.client import HttpVastClient, ssh_key_target
from vastui.vast.models import Instance

KEY = "sim-key-remote-0123456789"
SCALE = 50.0


def grant(action: Action, target: str) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="remote e2e test"), granted_by="test",
                    granted_at=0.0)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[tuple[Market, SshHostPool, SimServer]]:
    clock = ScaledClock(scale=SCALE)
    pool = SshHostPool(base_dir=tmp_path / "hosts", clock=clock)
    market = build_market(7, clock=clock, api_key=KEY, host_provider=pool)

    async def host_died(instance_id: int) -> None:
        await market.mark_offline(instance_id, reason="the host died")

    pool.on_host_died = host_died
    try:
        async with SimServer(market) as server:
            yield market, pool, server
    finally:
        await pool.close()


async def _wait_running(client: HttpVastClient, instance_id: int, *, wall_deadline_s: float) -> Instance:
    deadline = time.monotonic() + wall_deadline_s
    while True:
        instance = await client.show_instance(instance_id)
        if instance is not None and instance.is_running and instance.ssh_endpoint() is not None:
            return instance
        assert time.monotonic() < deadline, f"instance {instance_id} never reached running: {instance}"
        await asyncio.sleep(0.05)


async def test_rent_run_and_measure_through_the_simulated_marketplace(
        sim: tuple[Market, SshHostPool, SimServer], client_key: ClientKey, tmp_path: Path) -> None:
    market, pool, server = sim
    async with HttpVastClient(base_url=server.url, api_key=Secret(KEY), clock=market.clock) as client:
        await client.create_ssh_key(client_key.public,
                                    approval=grant(Action.CREATE_SSH_KEY, ssh_key_target(client_key.public)))
        offers = await client.search_offers("num_gpus=1 gpu_ram>=16", order="dph_total+", limit=50)
        # The test (not the console) may peek at the hidden truth to pick a healthy machine and to know the answer.
        offer = next(o for o in offers if market.world.by_offer(o.id).truth.fault is Fault.NONE)  # type: ignore
        machine = market.world.by_offer(offer.id)
        assert machine is not None
        created = await client.create_instance(offer_id=offer.id, image="ubuntu:22.04", disk_gib=10,
                                               label="remote-e2e", approval=grant(Action.CREATE_INSTANCE,
                                                                                  offer_target(offer.id)))
        instance = await _wait_running(client, created.instance_id, wall_deadline_s=60)
        endpoint = instance.ssh_endpoint()
        assert endpoint is not None
        host, port = endpoint

        runner = SshRunner(known_hosts=tmp_path / "known_hosts", client_keys=[client_key.path], use_agent=False,
                           retry_interval_s=0.05)
        await runner.wait_ready(host, port, deadline_s=30)
        loaders = 8
        records: list[Record] = []
        async with runner.run_agent(host, port, workload("--steps", "100", "--loaders", str(loaders))) as run:
            async for record in run:
                records.append(record)
                if isinstance(record, Progress) and record.units_total == 1600:
                    assert pool.drop_connections(instance_id=created.instance_id) >= 1
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
        samples = [s for s in records if isinstance(s, GpuSample) and s.index == 0
                   and measure_window(records)[0] < s.t < measure_window(records)[1]]
        assert len(samples) >= 3
        assert statistics.mean(s.util_pct or 0.0 for s in samples) == pytest.approx(100 * plan.gpu_busy, abs=8)
        assert all(s.mem_total_mib == machine.truth.vram_mib for s in samples)

        await client.destroy_instance(created.instance_id,
                                      approval=grant(Action.DESTROY_INSTANCE, instance_target(created.instance_id)))
        deadline = time.monotonic() + 30
        while pool.is_running(instance_id=created.instance_id):
            assert time.monotonic() < deadline, "the destroyed instance's SSH server is still up"
            await asyncio.sleep(0.05)
        assert runner.forget_host(host, port) == 1
