"""What a simulated host's processes share: the environment variables the host pool sets, and two files.

- ``VASTUI_SIM_MACHINE``: a JSON file with the machine's ``HostSpec`` (public fields + hidden truth). It lives
  outside the instance's filesystem (SFTP root), so nothing the console uploads or lists can see it.
- ``VASTUI_SIM_NVML_STATE``: a JSON file the simulated workload rewrites each block with what every GPU is doing;
  the simulated NVML reads it (idle when absent or when the writer is gone).
- ``VASTUI_SIM_DIED_FILE``: a DIES_MID_RUN workload creates it when the host "dies"; the pool then takes the
  host down.
The clock variables (``VASTUI_TIME_*``) and ``VASTUI_NVML_MODULE`` are the agent's own (``remote/agent.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from vastui.sim.physics import GpuState, HostSpec

ENV_MACHINE = "VASTUI_SIM_MACHINE"
ENV_NVML_STATE = "VASTUI_SIM_NVML_STATE"
ENV_DIED_FILE = "VASTUI_SIM_DIED_FILE"
ENV_INSTANCE = "VASTUI_SIM_INSTANCE"
FAKE_NVML_MODULE = "vastui.sim.fakenvml"


def write_spec(path: Path, spec: HostSpec) -> None:
    path.write_text(json.dumps(spec.to_json()), encoding="utf-8")


def read_spec(env: Mapping[str, str]) -> HostSpec:
    """The machine this process runs on; KeyError/OSError when not on a simulated host."""
    with open(env[ENV_MACHINE], encoding="utf-8") as handle:
        return HostSpec.from_json(json.load(handle))


def write_gpu_states(path: str, states: list[GpuState]) -> None:
    """Atomically publish what each GPU does now (the writer's pid lets readers notice it is gone)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"pid": os.getpid(), "gpus": [asdict(state) for state in states]}, handle)
    os.replace(tmp, path)


def read_gpu_states(path: str) -> list[GpuState] | None:
    """The published GPU states, or None when nobody is using the GPUs."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        pid = int(data["pid"])
        os.kill(pid, 0)
        return [GpuState(**gpu) for gpu in data["gpus"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
