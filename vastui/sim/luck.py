"""Drawing the hidden truth of a machine: how far its real speed, data path and start-up depart from its listing.

Host luck is drawn independently of the DLPerf noise shown in the offer, so the provider's score predicts real
speed only roughly (5-35 % host-to-host loss, docs/simulator.md, Hidden truth).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vastui.sim.gpus import GpuModel
from vastui.sim.truth import Fault, MachineTruth


@dataclass(frozen=True, slots=True)
class PublicSpecs:
    """The public fields the truth is drawn against."""

    machine_id: int
    num_gpus: int
    vram_gb: int
    pci_gen: float
    pcie_bw: float
    cpu_cores_effective: float
    cpu_ghz: float
    disk_bw: float
    inet_down: float
    reliability: float
    is_datacenter: bool
    bw_nvlink: float


# Probability of each fault on a machine of perfect reliability; low reliability raises it (see _draw_fault).
FAULT_RATES: tuple[tuple[Fault, float], ...] = (
    (Fault.WRONG_OUTPUT, 0.015),
    (Fault.DIES_MID_RUN, 0.015),
    (Fault.STUCK_LOADING, 0.01),
    (Fault.THROTTLES, 0.02),
)


def draw_truth(rng: random.Random, *, model: GpuModel, specs: PublicSpecs) -> MachineTruth:
    """The hidden truth of one machine, from its GPU model and public specs."""
    luck = rng.uniform(0.65, 0.95)  # 5-35 % below the ideal GPU: cooling, clocks, drivers, neighbours
    if specs.pci_gen < 4 and model.pcie_gen >= 4:
        luck *= rng.uniform(0.88, 0.97)  # old board: slower host, slower launches
    if specs.num_gpus == 1:
        efficiency = 1.0
    elif specs.bw_nvlink > 0:
        efficiency = rng.uniform(0.85, 0.95)
    elif specs.is_datacenter:
        efficiency = rng.uniform(0.65, 0.85)
    else:
        efficiency = rng.uniform(0.55, 0.80)
    half = min(3.5, max(1.25, (model.fp16_tflops / model.fp32_tflops) ** 0.5 * rng.uniform(0.9, 1.1)))
    fault, fault_after_s = _draw_fault(rng, reliability=specs.reliability)
    return MachineTruth(
        machine_id=specs.machine_id,
        compute_units_per_s=round(model.workload_units_per_s * luck, 3),
        half_precision_speedup=round(half, 3),
        multi_gpu_efficiency=round(efficiency, 3),
        data_units_per_s_per_loader=round(rng.uniform(20.0, 60.0) * specs.cpu_ghz / 3.5, 3),
        max_loaders=max(1, int(specs.cpu_cores_effective)),
        pcie_gb_per_s=round(specs.pcie_bw * rng.uniform(0.85, 1.0), 3),
        disk_mb_per_s=round(specs.disk_bw * rng.uniform(0.6, 1.0), 1),
        image_pull_mb_per_s=round(specs.inet_down / 8.0 * rng.uniform(0.3, 0.6), 2),
        readiness_s=round(rng.uniform(30.0, 90.0), 1),
        image_cached=rng.random() < (0.5 if specs.is_datacenter else 0.3),
        noise_cv=round(rng.uniform(0.08, 0.15) if rng.random() < 0.1 else rng.uniform(0.01, 0.05), 4),
        fault=fault,
        fault_after_s=fault_after_s,
        vram_mib=specs.vram_gb * 1024,
    )


def _draw_fault(rng: random.Random, *, reliability: float) -> tuple[Fault, float | None]:
    # A machine with a poor track record is more likely to misbehave (x1 at 0.999, up to x3 at 0.90 and below).
    boost = min(3.0, 1.0 + max(0.0, 0.999 - reliability) * 20.0)
    roll = rng.random()
    for fault, rate in FAULT_RATES:
        if roll < rate * boost:
            after = round(rng.uniform(60.0, 1200.0), 1) if fault in (Fault.DIES_MID_RUN, Fault.THROTTLES) else None
            return fault, after
        roll -= rate * boost
    return Fault.NONE, None
