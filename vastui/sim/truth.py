"""Hidden ground truth of a simulated machine: what really happens when a workload runs there.

The API never shows these values. Only the simulator's hosts (workload physics, pull times, faults) read them,
so the quality of vastui's decisions can be judged against them. Nothing outside ``vastui.sim`` may import this.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Fault(enum.StrEnum):
    NONE = "none"
    DIES_MID_RUN = "dies_mid_run"        # the host goes offline part-way through a run
    WRONG_OUTPUT = "wrong_output"        # runs fine but the workload's output digest differs
    STUCK_LOADING = "stuck_loading"      # the instance never leaves `loading`
    THROTTLES = "throttles"              # thermal/power throttling cuts compute under sustained load


@dataclass(frozen=True, slots=True)
class MachineTruth:
    """What a machine really delivers. Rates are for the simulator's reference workload."""

    machine_id: int
    # compute: reference units per second for ONE GPU of this machine at batch 32, fp32 (host luck included)
    compute_units_per_s: float
    # speed-up factor of bf16/fp16 over fp32 on this GPU (tensor cores)
    half_precision_speedup: float
    # fraction of linear scaling achieved per extra GPU (0.9 with NVLink, 0.6-0.8 PCIe consumer)
    multi_gpu_efficiency: float
    # data path: units per second the input pipeline can feed per loader worker, and its hard ceilings
    data_units_per_s_per_loader: float
    max_loaders: int                     # effective CPU cores usable for loaders
    pcie_gb_per_s: float                 # real host->device bandwidth
    disk_mb_per_s: float                 # real read bandwidth
    # startup
    image_pull_mb_per_s: float           # effective pull speed (≈0.3-0.6 of inet_down)
    readiness_s: float                   # extraction + boot after the pull
    image_cached: bool                   # popular images may already be on the host
    # noise and faults
    noise_cv: float                      # run-to-run coefficient of variation of step times
    fault: Fault
    fault_after_s: float | None          # when a DIES_MID_RUN / THROTTLES fault starts (sim seconds into a run)
    vram_mib: int                        # per GPU; past it a batch is out of memory
