"""How a simulated instance is reached over SSH when ``Realism`` asks for Vast.ai's ways (docs/api-notes.md §3.12).

On Vast.ai the row's ``ssh_host``/``ssh_port`` is a proxy (``sshN.vast.ai``) that forwards to the container's
sshd; a direct path (``public_ipaddr`` and ``ports["22/tcp"]``) exists only when the create asked for a direct
runtype (``ssh_direc``) and the machine has open ports. The account's keys reach a new instance late, and the
platform rewrites ``authorized_keys`` (the file is replaced, not appended). sshd may accept a little after the row
says ``running``. Every draw here is seeded, so a world behaves the same on every run.
"""

from __future__ import annotations

import dataclasses
import random

from vastui.sim.machine import Machine, World

NO_OPEN_PORTS_SHARE = 0.25        # machines whose host opened no ports: their instances are reached by proxy only
KEYS_LATE_S = (5.0, 60.0)         # simulated seconds after the host starts until the account's keys are in place
SSHD_LATE_S = (2.0, 20.0)         # simulated seconds after ``running`` until sshd accepts
DIRECT_RUNTYPE = "ssh_direc"


def without_open_ports(world: World) -> World:
    """The world with a seeded share of machines listing no open ports (``direct_port_count`` 0)."""
    machines = [dataclasses.replace(m, direct_port_count=0) if _closed(world.seed, m) else m for m in world.machines]
    return dataclasses.replace(world, machines=machines)


def direct_allowed(*, runtype: str, machine: Machine) -> bool:
    """Direct SSH is offered only when asked for (``ssh_direc`` in the runtype) on a machine with open ports."""
    return DIRECT_RUNTYPE in runtype.split() and machine.direct_port_count > 0


def keys_delay_s(*, seed: int, instance_id: int) -> float:
    """Seeded delay before the account's keys are accepted by the instance's sshd."""
    return random.Random(f"{seed}:{instance_id}:keys").uniform(*KEYS_LATE_S)


def sshd_delay_s(*, seed: int, instance_id: int) -> float:
    """Seeded delay between the host starting (``running``) and its sshd accepting connections."""
    return random.Random(f"{seed}:{instance_id}:sshd").uniform(*SSHD_LATE_S)


def _closed(seed: int, machine: Machine) -> bool:
    return random.Random(f"{seed}:{machine.machine_id}:ports").random() < NO_OPEN_PORTS_SHARE
