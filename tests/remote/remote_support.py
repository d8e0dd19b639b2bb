"""Helpers for remote tests: simulated machines with chosen hidden truth, the workload command, record filters."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vastui.approval import Action, Approval, ApprovalRequest, offer_target
from vastui.campaign.ports import HostConnection
from vastui.remote.protocol import GpuSample, Phase, Progress, Record
from vastui.remote.runner import SshRunner
from vastui.sim.machine import Machine
from vastui.sim.market import Market
from vastui.sim.truth import Fault
from vastui.sim.world import generate_world
from vastui.vast.client import HttpVastClient, ssh_key_target
from vastui.vast.models import Instance

SIM_SCALE = 50.0  # simulated seconds per wall second on the hosts
SIM_API_KEY = "sim-key-remote-0123456789"


@dataclasses.dataclass(frozen=True)
class ClientKey:
    path: Path
    public: str


def make_machine(*, num_gpus: int = 1, **truth: Any) -> Machine:
    """A real simulated RTX 4090 machine with the hidden truth the test needs (quiet by default)."""
    world = generate_world(11, n_machines=80, now=1_800_000_000.0)
    base = next(m for m in world.machines if m.gpu_name == "RTX 4090")
    defaults: dict[str, Any] = {
        "compute_units_per_s": 80.0, "half_precision_speedup": 1.5, "multi_gpu_efficiency": 0.75,
        "data_units_per_s_per_loader": 40.0, "max_loaders": 16, "pcie_gb_per_s": 24.0, "disk_mb_per_s": 3000.0,
        "noise_cv": 0.02, "fault": Fault.NONE, "fault_after_s": None, "vram_mib": 24576,
    }
    defaults.update(truth)
    return dataclasses.replace(base, num_gpus=num_gpus, truth=dataclasses.replace(base.truth, **defaults))


def workload(*args: str) -> list[str]:
    """The simulated reference workload as the manifest names it, with fixed noise for repeatable tests."""
    return ["python3", "-m", "simworkload", "--noise-seed", "5", *args]


def measured(records: list[Record]) -> list[Progress]:
    return [r for r in records if isinstance(r, Progress) and r.phase == "measure"]


def gpu_samples_in_measure(records: list[Record], index: int = 0) -> list[GpuSample]:
    """GPU ``index``'s samples that arrived while the measure phase ran, by arrival (as the campaign joins them to
    blocks): a workload stamps its markers with its own clock, which may trail the agent's (its start is counted
    at wall speed on a scaled clock), so a sample's ``t`` says less about which step it saw than its order does."""
    start = next(i for i, r in enumerate(records) if isinstance(r, Phase) and r.name == "measure")
    end = max(i for i, r in enumerate(records) if isinstance(r, Progress) and r.phase == "measure")
    return [r for r in records[start:end] if isinstance(r, GpuSample) and r.index == index]


def grant(action: Action, target: str) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="remote e2e test"), granted_by="test",
                    granted_at=0.0)


async def wait_running(client: HttpVastClient, instance_id: int, *, wall_deadline_s: float) -> Instance:
    deadline = time.monotonic() + wall_deadline_s
    while True:
        instance = await client.show_instance(instance_id)
        if instance is not None and instance.is_running and instance.ssh_endpoint() is not None:
            return instance
        assert time.monotonic() < deadline, f"instance {instance_id} never reached running: {instance}"
        await asyncio.sleep(0.05)


async def rent_running(client: HttpVastClient, market: Market, public_key: str, *,
                       label: str) -> tuple[int, Machine, tuple[str, int]]:
    """Register the key, rent a cheap healthy 1-GPU offer, wait until it runs: (instance id, machine, endpoint)."""
    await client.create_ssh_key(public_key, approval=grant(Action.CREATE_SSH_KEY, ssh_key_target(public_key)))
    offers = await client.search_offers("num_gpus=1 gpu_ram>=16", order="dph_total+", limit=50)
    # The test (not the console) may peek at the hidden truth: to pick a healthy machine and to know the answer.
    machines = [market.world.by_offer(offer.id) for offer in offers]
    machine = next(m for m in machines if m is not None and m.truth.fault is Fault.NONE)
    created = await client.create_instance(offer_id=machine.offer_id, image="ubuntu:22.04", disk_gib=10,
                                           label=label,
                                           approval=grant(Action.CREATE_INSTANCE, offer_target(machine.offer_id)))
    instance = await wait_running(client, created.instance_id, wall_deadline_s=60)
    endpoint = instance.ssh_endpoint()
    assert endpoint is not None
    return created.instance_id, machine, endpoint


async def reach_ssh(runner: SshRunner, endpoints: Sequence[tuple[str, int]], *, deadline_s: float) -> tuple[str, int]:
    """Wait until one of ``endpoints`` accepts SSH, the way the product does (``connect_first``), and close the
    connection again; the endpoint that accepted."""
    async with runner.connect_first(endpoints, deadline_s=deadline_s) as conn:
        return conn.endpoint


async def put_bytes(conn: HostConnection, data: bytes, *, remote_path: str) -> None:
    """Write ``data`` to ``remote_path`` on the host through the product's streaming upload."""
    await conn.put_chunks(open_chunks=lambda: (data,), remote_path=remote_path)
