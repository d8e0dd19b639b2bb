"""Workload physics of a simulated host: what one training step costs on a machine, from its hidden truth.

Pure functions, no I/O. The simulated workload (``simworkload.py``) and the simulated NVML (``fakenvml.py``) use
them, so the agent's records follow the truth: step time splits into compute and data-wait, GPU utilisation is
the computing share, memory grows with the batch (out of memory past VRAM), power and PCIe traffic follow load.

The model, per step with ``b`` items per GPU on ``n`` GPUs (``b × n`` units):
- compute rate = truth rate (batch 32, fp32, one GPU) × precision speed-up × batch efficiency, scaled to n GPUs
  as ``1 + (n − 1) × multi_gpu_efficiency``;
- data rate = the slowest of the loaders (``min(loaders, max_loaders) × per-loader rate``), PCIe and disk;
- loaders prefetch while the GPU computes, so step time = max(compute, data), data-wait = the excess of data.
"""

from __future__ import annotations

import enum
import random
from dataclasses import asdict, dataclass
from typing import Any

from vastui.sim.truth import Fault, MachineTruth

REF_BATCH = 32                 # the truth's compute rate is measured at this batch size
BATCH_KNEE = 8                 # batch efficiency b / (b + knee): small batches leave the GPU under-used
UNIT_GPU_BYTES = 4_000_000     # bytes one unit moves host -> GPU (decoded, augmented tensors)
UNIT_DISK_BYTES = 2_000_000    # bytes one unit reads from disk (compressed)
BASE_MEM_MIB = 2500            # CUDA context, weights, optimizer state
ACT_MIB_PER_ITEM = 80.0        # activations per item in fp32
HALF_MEM_FACTOR = 0.55         # bf16/fp16 activations (master weights stay fp32)
THROTTLE_COMPUTE_FACTOR = 0.6  # a throttling host loses 40 % of its compute (clock cut, docs/simulator.md)
THROTTLE_CLOCK_FACTOR = 0.6
THROTTLE_POWER_FACTOR = 0.6
THROTTLE_MASK = 0x8 | 0x20     # NVML hw_slowdown | sw_thermal
IDLE_MASK = 0x1                # NVML gpu_idle
IDLE_CLOCK_MHZ = 210.0
NOISE_CLIP = 4.0               # noise draws are clipped at ±4 CV

# SM boost clocks (MHz) of the catalog's GPUs; others use DEFAULT_BOOST_MHZ.
BOOST_MHZ = {
    "RTX 3060": 1777, "RTX 3080": 1710, "RTX 3090": 1695, "RTX 4070 Ti": 2610, "RTX 4080": 2505,
    "RTX 4080S": 2550, "RTX 4090": 2520, "RTX 5060 Ti": 2572, "RTX 5070 Ti": 2452, "RTX 5080": 2617,
    "RTX 5090": 2407, "RTX A4000": 1560, "RTX A5000": 1695, "RTX A6000": 1800, "L4": 2040, "L40S": 2520,
    "A100 PCIE": 1410, "A100 SXM4": 1410, "H100 PCIE": 1755, "H100 SXM": 1980, "H100 NVL": 1785, "H200": 1980,
    "H200 NVL": 1785,
}
DEFAULT_BOOST_MHZ = 1800


class Precision(enum.StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


@dataclass(frozen=True, slots=True)
class Variant:
    """The knobs a campaign tunes: items per GPU per step, precision, input loaders, GPUs used."""

    batch_size: int = REF_BATCH
    precision: Precision = Precision.FP32
    loaders: int = 4
    gpus: int = 1


@dataclass(frozen=True, slots=True)
class HostSpec:
    """What the physics needs of a machine: a few public fields and its hidden truth (JSON-able for the host)."""

    gpu_name: str
    num_gpus: int
    tdp_w: float
    driver_version: str
    truth: MachineTruth

    @classmethod
    def from_machine(cls, machine: Any) -> HostSpec:
        """From a ``vastui.sim.machine.Machine`` (typed loosely so tests can pass a small stand-in)."""
        return cls(gpu_name=machine.gpu_name, num_gpus=machine.num_gpus, tdp_w=float(machine.gpu_max_power),
                   driver_version=str(machine.driver_version), truth=machine.truth)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["truth"]["fault"] = self.truth.fault.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostSpec:
        truth = dict(data["truth"])
        truth["fault"] = Fault(truth["fault"])
        return cls(gpu_name=data["gpu_name"], num_gpus=int(data["num_gpus"]), tdp_w=float(data["tdp_w"]),
                   driver_version=str(data["driver_version"]), truth=MachineTruth(**truth))

    @property
    def boost_mhz(self) -> float:
        return float(BOOST_MHZ.get(self.gpu_name, DEFAULT_BOOST_MHZ))


@dataclass(frozen=True, slots=True)
class StepPlan:
    """One step, noise-free: its units, its time split, and what limits it."""

    units: int
    gpus: int
    compute_s: float
    data_s: float
    limit: str                 # "compute", "loaders", "pcie" or "disk"
    mem_used_mib: float        # per GPU used
    fits: bool                 # False: out of memory

    @property
    def step_s(self) -> float:
        return max(self.compute_s, self.data_s)

    @property
    def data_wait_s(self) -> float:
        return max(0.0, self.data_s - self.compute_s)

    @property
    def gpu_busy(self) -> float:
        """Share of the step the GPU computes (what NVML utilisation reads)."""
        return self.compute_s / self.step_s if self.step_s > 0 else 0.0

    @property
    def units_per_s(self) -> float:
        return self.units / self.step_s if self.step_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class GpuState:
    """What the simulated NVML reports for one GPU."""

    util_pct: float
    mem_util_pct: float
    mem_used_mib: float
    mem_total_mib: float
    power_w: float
    pcie_rx_kib_s: float
    pcie_tx_kib_s: float
    sm_clock_mhz: float
    temp_c: float
    throttle_mask: int


def batch_efficiency(batch_size: int) -> float:
    """Relative throughput per item against the reference batch (1.0 at 32, ~1.2 at 256, ~0.6 at 8)."""
    eff = batch_size / (batch_size + BATCH_KNEE)
    return eff / (REF_BATCH / (REF_BATCH + BATCH_KNEE))


def memory_per_gpu_mib(variant: Variant) -> float:
    per_item = ACT_MIB_PER_ITEM * (1.0 if variant.precision == Precision.FP32 else HALF_MEM_FACTOR)
    return BASE_MEM_MIB + per_item * variant.batch_size


def plan_step(spec: HostSpec, variant: Variant, *, throttled: bool = False) -> StepPlan:
    """The noise-free step of ``variant`` on ``spec``; ``throttled`` applies the THROTTLES fault's clock cut."""
    truth = spec.truth
    gpus = max(1, min(variant.gpus, spec.num_gpus))
    units = variant.batch_size * gpus
    speed = truth.compute_units_per_s * batch_efficiency(variant.batch_size)
    if variant.precision != Precision.FP32:
        speed *= truth.half_precision_speedup
    if throttled:
        speed *= THROTTLE_COMPUTE_FACTOR
    compute_rate = speed * (1.0 + (gpus - 1) * truth.multi_gpu_efficiency)
    rates = {
        "loaders": max(1, min(variant.loaders, truth.max_loaders)) * truth.data_units_per_s_per_loader,
        "pcie": truth.pcie_gb_per_s * 1e9 * gpus / UNIT_GPU_BYTES,
        "disk": truth.disk_mb_per_s * 1e6 / UNIT_DISK_BYTES,
    }
    data_limit = min(rates, key=lambda name: rates[name])
    compute_s = units / compute_rate
    data_s = units / rates[data_limit]
    mem = memory_per_gpu_mib(variant)
    return StepPlan(units=units, gpus=gpus, compute_s=compute_s, data_s=data_s,
                    limit="compute" if compute_s >= data_s else data_limit, mem_used_mib=mem,
                    fits=mem <= truth.vram_mib)


def expected_units_per_s(spec: HostSpec, variant: Variant) -> float:
    """Steady-state throughput without noise or faults: the hidden truth a measurement should find."""
    return plan_step(spec, variant).units_per_s


def run_factor(rng: random.Random, truth: MachineTruth) -> float:
    """This run's slowdown factor (run-to-run noise, CV = truth.noise_cv)."""
    return _clipped_gauss(rng, truth.noise_cv)


def noisy_step(plan: StepPlan, rng: random.Random, *, cv: float, factor: float) -> tuple[float, float]:
    """(compute_s, data_s) of one real step: the run's factor times per-step jitter (CV = cv / 2)."""
    return (plan.compute_s * factor * _clipped_gauss(rng, cv / 2.0),
            plan.data_s * factor * _clipped_gauss(rng, cv / 2.0))


def _clipped_gauss(rng: random.Random, cv: float) -> float:
    draw = rng.gauss(0.0, 1.0)
    return max(0.05, 1.0 + cv * max(-NOISE_CLIP, min(NOISE_CLIP, draw)))


def idle_state(spec: HostSpec) -> GpuState:
    """An idle GPU of this machine."""
    vram = float(spec.truth.vram_mib)
    return GpuState(util_pct=0.0, mem_util_pct=0.0, mem_used_mib=min(vram, 300.0), mem_total_mib=vram,
                    power_w=round(_idle_power(spec), 1), pcie_rx_kib_s=0.0, pcie_tx_kib_s=0.0,
                    sm_clock_mhz=IDLE_CLOCK_MHZ, temp_c=32.0, throttle_mask=IDLE_MASK)


def busy_state(spec: HostSpec, *, busy: float, units_per_s_per_gpu: float, mem_used_mib: float,
               throttled: bool) -> GpuState:
    """A GPU computing ``busy`` (0-1) of the time and pulling ``units_per_s_per_gpu`` over PCIe."""
    busy = max(0.0, min(1.0, busy))
    idle_w = _idle_power(spec)
    cap = spec.tdp_w * (THROTTLE_POWER_FACTOR if throttled else 1.0)
    power = min(cap, idle_w + (0.92 * spec.tdp_w - idle_w) * busy)
    clock = spec.boost_mhz * (THROTTLE_CLOCK_FACTOR if throttled else 1.0)
    rx_kib = units_per_s_per_gpu * UNIT_GPU_BYTES / 1024.0
    vram = float(spec.truth.vram_mib)
    return GpuState(util_pct=round(100.0 * busy, 1), mem_util_pct=round(70.0 * busy, 1),
                    mem_used_mib=min(vram, mem_used_mib), mem_total_mib=vram, power_w=round(power, 1),
                    pcie_rx_kib_s=round(rx_kib, 1), pcie_tx_kib_s=round(rx_kib * 0.02, 1),
                    sm_clock_mhz=round(clock, 0), temp_c=round(35.0 + 45.0 * busy, 1),
                    throttle_mask=THROTTLE_MASK if throttled else 0)


def _idle_power(spec: HostSpec) -> float:
    return 10.0 + 0.08 * spec.tdp_w
