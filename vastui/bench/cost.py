"""Total cost per accepted unit of work at the production batch size N, its interval, and break-even N.

    C(N) = bill(active = t_init + t_warmup + N/theta, exists = t_loading + active + extra, GB moved) / (N x acceptance)

``bill`` is ``vastui.bench.billing`` — the marketplace's own rules, the ones the simulator charges by: the GPUs
while running, the disk while the instance exists (the image pull and container start included), traffic per GB.
Startup and warm-up are paid for, so they are costs: that is what makes a fast GPU with a slow image pull lose at
small N. Total cost is affine in N (a + b N), so two candidates cross at most once: the break-even N.
A candidate that failed correctness or readiness has infinite cost, as MLPerf counts a failed run as infinite time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from vastui.bench import billing
from vastui.bench.stats import Interval


@dataclass(frozen=True, slots=True)
class CostInputs:
    """Everything but throughput that a candidate's cost depends on (prices in USD, times in seconds, GB = 1e9 B).

    - ``price_per_hour_usd``: the GPUs' price, billed while the instance runs (storage is apart).
    - ``loading_s``: image pull + readiness (the ``loading`` state): the disk bills, the GPUs do not.
    - ``startup_s``: running but not yet working: the workload's own initialisation (inf when readiness failed).
    - ``storage_usd_per_hour`` over the time the disk exists: the run plus ``extra_exists_s`` (e.g. teardown lag).
    - ``transfer_gb_fixed`` is moved once per rental (image pull, input staging), ``transfer_gb_per_unit`` per unit.
    - ``acceptance_rate``: accepted units / units done; ``passed_gate`` False for a failed canary or readiness.
    """

    price_per_hour_usd: float
    startup_s: float
    warmup_s: float = 0.0
    loading_s: float = 0.0
    storage_usd_per_hour: float = 0.0
    extra_exists_s: float = 0.0
    inet_usd_per_gb: float = 0.0
    transfer_gb_fixed: float = 0.0
    transfer_gb_per_unit: float = 0.0
    acceptance_rate: float = 1.0
    passed_gate: bool = True

    @property
    def is_failed(self) -> bool:
        """Failed gate, no accepted output, or a startup that never finished: no finite cost can be claimed."""
        return (not self.passed_gate or self.acceptance_rate <= 0.0 or not math.isfinite(self.loading_s)
                or not math.isfinite(self.startup_s) or not math.isfinite(self.warmup_s))

    @property
    def rates(self) -> billing.Rates:
        return billing.Rates(gpu_usd_per_hour=self.price_per_hour_usd, storage_usd_per_hour=self.storage_usd_per_hour,
                             inet_down_usd_per_gb=self.inet_usd_per_gb)


def fixed_cost_usd(inputs: CostInputs) -> float:
    """The part paid once per rental, whatever N: loading (disk only), start-up and warm-up (GPUs and disk), fixed
    transfers — the billing model's charge for that usage."""
    if inputs.is_failed:
        return math.inf
    active_s = inputs.startup_s + inputs.warmup_s
    usage = billing.Usage(exists_s=inputs.loading_s + active_s + inputs.extra_exists_s, active_s=active_s,
                          down_gb=inputs.transfer_gb_fixed)
    return billing.bill(inputs.rates, usage).total_usd


def marginal_cost_usd(inputs: CostInputs, *, throughput_units_per_s: float) -> float:
    """The cost of one more unit done (before acceptance): its share of running time, storage and transfer."""
    if inputs.is_failed or throughput_units_per_s <= 0.0:
        return math.inf
    seconds = 1.0 / throughput_units_per_s
    usage = billing.Usage(exists_s=seconds, active_s=seconds, down_gb=inputs.transfer_gb_per_unit)
    return billing.bill(inputs.rates, usage).total_usd


def total_cost_usd(inputs: CostInputs, *, units: float, throughput_units_per_s: float) -> float:
    """What running ``units`` of work on this candidate costs, start to finish."""
    if units <= 0:
        raise ValueError("units must be positive")
    fixed = fixed_cost_usd(inputs)
    marginal = marginal_cost_usd(inputs, throughput_units_per_s=throughput_units_per_s)
    return fixed + marginal * units


def cost_per_accepted_unit(inputs: CostInputs, *, units: float, throughput_units_per_s: float) -> float:
    """C(N): total cost over the units that passed correctness; inf for a failed candidate."""
    total = total_cost_usd(inputs, units=units, throughput_units_per_s=throughput_units_per_s)
    if not math.isfinite(total):
        return math.inf
    return total / (units * inputs.acceptance_rate)


def cost_curve(inputs: CostInputs, *, units: float) -> Callable[[float], float]:
    """C(N) as a function of throughput, with everything else worked out once: the same figure as
    ``cost_per_accepted_unit`` (a + b / theta), for the thousands of bootstrap replicates a race prices."""
    if units <= 0:
        raise ValueError("units must be positive")
    fixed = fixed_cost_usd(inputs)
    if not math.isfinite(fixed):
        return lambda _theta: math.inf
    rates = inputs.rates
    per_second = (rates.gpu_usd_per_hour + rates.storage_usd_per_hour) / billing.S_PER_H
    per_unit = billing.bandwidth_charge_usd(rates, down_gb=inputs.transfer_gb_per_unit)
    accepted = units * inputs.acceptance_rate

    def at(theta: float) -> float:
        if theta <= 0.0:
            return math.inf
        return (fixed + units * (per_second / theta + per_unit)) / accepted

    return at


def cost_interval(inputs: CostInputs, *, units: float, throughput: Interval) -> Interval:
    """C(N) with its interval carried through from throughput's: C is decreasing in theta, so the bounds swap.

    A monotone map of percentile-bootstrap bounds is the bootstrap interval of the mapped statistic.
    """
    def at(theta: float) -> float:
        return cost_per_accepted_unit(inputs, units=units, throughput_units_per_s=theta)

    return Interval(point=at(throughput.point), low=at(throughput.high), high=at(throughput.low),
                    confidence=throughput.confidence, n=throughput.n)


def break_even_units(*, first: CostInputs, first_throughput_units_per_s: float, second: CostInputs,
                     second_throughput_units_per_s: float) -> float | None:
    """N at which the two candidates cost the same per accepted unit, or None when one dominates at every N > 0.

    Above it, the candidate with the lower marginal cost per accepted unit wins; below it, the one with the lower
    fixed cost. Per accepted unit, C(N) = a/(N r) + b/r, so N = (a1/r1 - a2/r2) / (b2/r2 - b1/r1).
    """
    if first.is_failed or second.is_failed:
        return None
    a1 = fixed_cost_usd(first) / first.acceptance_rate
    a2 = fixed_cost_usd(second) / second.acceptance_rate
    b1 = marginal_cost_usd(first, throughput_units_per_s=first_throughput_units_per_s) / first.acceptance_rate
    b2 = marginal_cost_usd(second, throughput_units_per_s=second_throughput_units_per_s) / second.acceptance_rate
    slope = b2 - b1
    if not math.isfinite(slope) or slope == 0.0:
        return None
    units = (a1 - a2) / slope
    return units if math.isfinite(units) and units > 0.0 else None
