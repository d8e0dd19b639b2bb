"""Bottleneck attribution: from utilisation, data-wait, PCIe, memory, startup and scaling, name what limits a
candidate and the next move, with the numbers that say so.

The rules are checked in the order the method works (docs/method.md): a throttling host makes every other reading
suspect; startup waste comes before execution; the input path comes before buying a faster GPU; then multi-GPU
scaling, memory, compute. A missing metric (None) never counts as zero: a rule that needs it does not fire,
except that data-wait alone marks a workload input-bound when no GPU activity reading exists, or when it takes a
fifth of the step (NVML's utilisation reads a starved GPU as busy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

# docs/method.md (Tune): data-wait > 5 % of step time while the GPU is busy < 50 % -> fix the input path first.
DATA_WAIT_SHARE_MAX = 0.05
INPUT_BOUND_GPU_ACTIVITY_MAX_PCT = 50.0
# ... and a step that waits for input a fifth of its time or more is input-bound whatever NVML reads: utilisation
# counts a sample period busy if any kernel ran in it, so a starved GPU still reads 60-70 % (docs/method.md).
DATA_WAIT_SHARE_DOMINANT = 0.20
# Host-to-device copies near the link's capacity starve the GPU however fast the loaders are.
PCIE_SATURATED_SHARE = 0.80
# Throttle reasons (thermal, power cap, HW slowdown) in over 10 % of 1 Hz samples: the host, not the GPU model, is slow.
THROTTLED_SHARE_MAX = 0.10
# Startup (pull + readiness) over a quarter of the paid time at production N dominates what any tuning can win back.
STARTUP_SHARE_MAX = 0.25
# Below 80 % of linear speed-up, extra GPUs cost more than they add (interconnect/PCIe topology, small per-GPU batch).
SCALING_EFFICIENCY_MIN = 0.80
# Memory is the limit when >= 90 % of VRAM is in use (no room for a larger batch) or the memory controller is
# busy >= 70 % of the time while kernels run (bandwidth-bound: a faster clock will not help, fewer bytes will).
MEMORY_USED_SHARE_MAX = 0.90
MEMORY_BANDWIDTH_BUSY_PCT = 70.0
# Busy >= 85 % with little data-wait: the GPU itself is the limit.
COMPUTE_BOUND_GPU_ACTIVITY_PCT = 85.0


def input_gain_bound(wait_share: float, *, widening: float = math.inf) -> float:
    """The most any widening of the input path (more loaders) can gain when a step waits for input
    ``wait_share`` of its time: the wait gone entirely, a step takes ``1 - wait_share`` of its time, so throughput
    rises by at most ``wait_share / (1 - wait_share)``. Loaders feed the GPU; a GPU that never waits for them runs
    no faster with more (docs/method.md, "More loaders are bounded by the wait they remove"). And ``widening``
    times as many loaders (8 where there were 4: 2) prepare input at most that many times as fast, each loader
    its own batches, so the gain is at most ``widening - 1`` however long the steps waited."""
    share = min(max(wait_share, 0.0), 1.0)
    removed = math.inf if share >= 1.0 else share / (1.0 - share)
    return min(removed, max(widening - 1.0, 0.0))


class Bottleneck(StrEnum):
    THROTTLED = "throttled"
    STARTUP_DOMINATED = "startup_dominated"
    INPUT_BOUND = "input_bound"
    MULTI_GPU_SCALING_LOSS = "multi_gpu_scaling_loss"
    MEMORY_BOUND = "memory_bound"
    COMPUTE_BOUND = "compute_bound"
    UNDETERMINED = "undetermined"


NEXT_MOVE = {
    Bottleneck.THROTTLED: "the host is throttling: re-measure on another host of the same GPU model before tuning",
    Bottleneck.STARTUP_DOMINATED: "startup dominates: use a smaller or pre-pulled image, a host with faster "
                                  "inet_down, or more units per rental",
    Bottleneck.INPUT_BOUND: "input-bound: fix the data path (more loaders, prefetch, pinned memory, stage inputs on "
                            "local disk) before buying a faster GPU",
    Bottleneck.MULTI_GPU_SCALING_LOSS: "multi-GPU scaling loss: try fewer GPUs per instance, a larger per-GPU batch, "
                                       "or hosts with NVLink / a better PCIe topology",
    Bottleneck.MEMORY_BOUND: "memory-bound: move fewer bytes (bf16/fp16, smaller activations); a larger batch will "
                             "not fit or not help",
    Bottleneck.COMPUTE_BOUND: "compute-bound: tune batch size and precision, then consider a faster GPU",
    Bottleneck.UNDETERMINED: "no single limit stands out: collect SM activity and host CPU time, then profile",
}


@dataclass(frozen=True, slots=True)
class Readings:
    """Medians over the measured blocks (None where the metric is unavailable).

    ``gpu_activity_pct`` should be SM activity where available: NVML utilisation only says a kernel ran at some
    point in the sample window, so a starved GPU can still read high.
    """

    gpu_activity_pct: float | None = None
    data_wait_share: float | None = None
    pcie_rx_gbps: float | None = None
    pcie_link_gbps: float | None = None
    memory_used_share: float | None = None
    memory_bandwidth_busy_pct: float | None = None
    startup_share: float | None = None
    scaling_efficiency: float | None = None
    num_gpus: int = 1
    throttled_share: float | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One reading next to the threshold it was judged against."""

    metric: str
    value: float
    threshold: float
    unit: str

    def __str__(self) -> str:
        return f"{self.metric} {self.value:.3g}{self.unit} (threshold {self.threshold:.3g}{self.unit})"


@dataclass(frozen=True, slots=True)
class Attribution:
    bottleneck: Bottleneck
    next_move: str
    evidence: tuple[Evidence, ...]
    also: tuple[Bottleneck, ...] = ()

    @property
    def summary(self) -> str:
        return f"{self.bottleneck.value}: {'; '.join(str(e) for e in self.evidence) or 'no readings'}"

    @property
    def in_execution(self) -> Bottleneck:
        """The bottleneck the tuning knobs are ordered by: startup waste is paid whatever the profile, so when it
        is named first, the next rule that fired (the input path, memory, compute...) orders them."""
        if self.bottleneck is not Bottleneck.STARTUP_DOMINATED:
            return self.bottleneck
        return next((b for b in self.also if b is not Bottleneck.STARTUP_DOMINATED), Bottleneck.UNDETERMINED)


def startup_share(*, startup_s: float, warmup_s: float, units: int, throughput_units_per_s: float) -> float:
    """Share of the paid time at production N that is startup (pull + readiness); 1 when startup never ended."""
    if math.isinf(startup_s):
        return 1.0
    run_s = units / throughput_units_per_s if throughput_units_per_s > 0 else math.inf
    total = startup_s + warmup_s + run_s
    return startup_s / total if 0 < total < math.inf else 0.0


def scaling_efficiency(*, throughput_units_per_s: float, single_gpu_units_per_s: float, num_gpus: int) -> float:
    """Measured speed-up over linear: theta_n / (n x theta_1)."""
    return throughput_units_per_s / (num_gpus * single_gpu_units_per_s)


def attribute(readings: Readings) -> Attribution:
    """Name the first bottleneck whose rule fires (in the method's order), its next move and its evidence.

    Other rules that also fire are listed in ``also`` (in the same order), so nothing is hidden.
    """
    found: list[tuple[Bottleneck, tuple[Evidence, ...]]] = []
    for rule in _RULES:
        hit = rule(readings)
        if hit is not None:
            found.append(hit)
    if not found:
        return Attribution(Bottleneck.UNDETERMINED, NEXT_MOVE[Bottleneck.UNDETERMINED], _basic(readings))
    (bottleneck, evidence), rest = found[0], found[1:]
    return Attribution(bottleneck, NEXT_MOVE[bottleneck], evidence, tuple(b for b, _ in rest))


def _throttled(r: Readings) -> tuple[Bottleneck, tuple[Evidence, ...]] | None:
    if r.throttled_share is not None and r.throttled_share > THROTTLED_SHARE_MAX:
        return Bottleneck.THROTTLED, (
            Evidence("throttled samples", 100 * r.throttled_share, 100 * THROTTLED_SHARE_MAX, "%"),)
    return None


def _startup(r: Readings) -> tuple[Bottleneck, tuple[Evidence, ...]] | None:
    if r.startup_share is not None and r.startup_share > STARTUP_SHARE_MAX:
        return Bottleneck.STARTUP_DOMINATED, (
            Evidence("startup share of paid time", 100 * r.startup_share, 100 * STARTUP_SHARE_MAX, "%"),)
    return None


def _input(r: Readings) -> tuple[Bottleneck, tuple[Evidence, ...]] | None:
    if r.data_wait_share is None or r.data_wait_share <= DATA_WAIT_SHARE_MAX:
        return None
    evidence = [Evidence("data-wait share of step time", 100 * r.data_wait_share, 100 * DATA_WAIT_SHARE_MAX, "%")]
    starved = r.gpu_activity_pct is None or r.gpu_activity_pct < INPUT_BOUND_GPU_ACTIVITY_MAX_PCT
    if r.gpu_activity_pct is not None:
        evidence.append(Evidence("GPU activity", r.gpu_activity_pct, INPUT_BOUND_GPU_ACTIVITY_MAX_PCT, "%"))
    saturated = (r.pcie_rx_gbps is not None and r.pcie_link_gbps is not None and r.pcie_link_gbps > 0
                 and r.pcie_rx_gbps >= PCIE_SATURATED_SHARE * r.pcie_link_gbps)
    if saturated and r.pcie_rx_gbps is not None and r.pcie_link_gbps is not None:
        evidence.append(Evidence("PCIe rx", r.pcie_rx_gbps, PCIE_SATURATED_SHARE * r.pcie_link_gbps, " GB/s"))
    dominant = not starved and not saturated and r.data_wait_share > DATA_WAIT_SHARE_DOMINANT
    if dominant:   # NVML reads it busy, yet a fifth of each step or more waits for input
        evidence.append(Evidence("data-wait share, however busy NVML reads", 100 * r.data_wait_share,
                                 100 * DATA_WAIT_SHARE_DOMINANT, "%"))
    return (Bottleneck.INPUT_BOUND, tuple(evidence)) if starved or saturated or dominant else None


def _scaling(r: Readings) -> tuple[Bottleneck, tuple[Evidence, ...]] | None:
    if r.num_gpus > 1 and r.scaling_efficiency is not None and r.scaling_efficiency < SCALING_EFFICIENCY_MIN:
        return Bottleneck.MULTI_GPU_SCALING_LOSS, (
            Evidence(f"scaling efficiency on {r.num_gpus} GPUs", 100 * r.scaling_efficiency,
                     100 * SCALING_EFFICIENCY_MIN, "%"),)
    return None


def _memory(r: Readings) -> tuple[Bottleneck, tuple[Evidence, ...]] | None:
    evidence = []
    if r.memory_used_share is not None and r.memory_used_share >= MEMORY_USED_SHARE_MAX:
        evidence.append(Evidence("VRAM used", 100 * r.memory_used_share, 100 * MEMORY_USED_SHARE_MAX, "%"))
    if r.memory_bandwidth_busy_pct is not None and r.memory_bandwidth_busy_pct >= MEMORY_BANDWIDTH_BUSY_PCT:
        evidence.append(Evidence("memory controller busy", r.memory_bandwidth_busy_pct, MEMORY_BANDWIDTH_BUSY_PCT,
                                 "%"))
    return (Bottleneck.MEMORY_BOUND, tuple(evidence)) if evidence else None


def _compute(r: Readings) -> tuple[Bottleneck, tuple[Evidence, ...]] | None:
    if r.gpu_activity_pct is None or r.gpu_activity_pct < COMPUTE_BOUND_GPU_ACTIVITY_PCT:
        return None
    if r.data_wait_share is not None and r.data_wait_share > DATA_WAIT_SHARE_MAX:
        return None
    evidence = [Evidence("GPU activity", r.gpu_activity_pct, COMPUTE_BOUND_GPU_ACTIVITY_PCT, "%")]
    if r.data_wait_share is not None:
        evidence.append(Evidence("data-wait share of step time", 100 * r.data_wait_share,
                                 100 * DATA_WAIT_SHARE_MAX, "%"))
    return Bottleneck.COMPUTE_BOUND, tuple(evidence)


def _basic(r: Readings) -> tuple[Evidence, ...]:
    evidence = []
    if r.gpu_activity_pct is not None:
        evidence.append(Evidence("GPU activity", r.gpu_activity_pct, COMPUTE_BOUND_GPU_ACTIVITY_PCT, "%"))
    if r.data_wait_share is not None:
        evidence.append(Evidence("data-wait share of step time", 100 * r.data_wait_share,
                                 100 * DATA_WAIT_SHARE_MAX, "%"))
    return tuple(evidence)


_RULES = (_throttled, _startup, _input, _scaling, _memory, _compute)
