"""Helpers for remote tests: simulated machines with chosen hidden truth, the workload command, record filters."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from vastui.remote.protocol import GpuSample, Phase, Progress, Record
from vastui.sim.machine import Machine
from vastui.sim.truth import Fault
from vastui.sim.world import generate_world

SIM_SCALE = 50.0  # simulated seconds per wall second on the hosts


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


def measure_window(records: list[Record]) -> tuple[float, float]:
    start = next(r.t for r in records if isinstance(r, Phase) and r.name == "measure")
    return start, measured(records)[-1].t


def gpu_samples_in(records: list[Record], window: tuple[float, float], index: int = 0) -> list[GpuSample]:
    return [r for r in records if isinstance(r, GpuSample) and r.index == index and window[0] < r.t < window[1]]
