"""What vastui has measured on an offer's host, turned into what the offer would cost per 1,000 useful units.

Host knowledge is every run on a host key (machine, GPU, count) for one workload. The offer's price today divided
by each run's throughput gives one cost per run; the console shows their median, their range, how many runs, and
how old the newest is.
"""

from __future__ import annotations

from dataclasses import dataclass

from vastui.bench.stats import median
from vastui.store.records import HostKnowledge

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class MeasuredCost:
    """$ per 1,000 units at an offer's $/h, from ``runs`` OK runs; ``age_s`` since the newest run ended."""

    median_usd_per_1k: float
    low_usd_per_1k: float
    high_usd_per_1k: float
    runs: int
    age_s: float | None


def measured_cost(knowledge: HostKnowledge, *, dph_total: float, now: float) -> MeasuredCost | None:
    """None when no run on this host succeeded."""
    costs = [dph_total * 1000.0 / (tp * SECONDS_PER_HOUR) for tp in knowledge.throughputs_units_per_s if tp > 0]
    if not costs:
        return None
    ends = [run.finished_at or run.started_at for run in knowledge.runs]
    newest = max(ends) if ends else None
    return MeasuredCost(median_usd_per_1k=median(costs), low_usd_per_1k=min(costs), high_usd_per_1k=max(costs),
                        runs=len(costs), age_s=None if newest is None else max(0.0, now - newest))


def host_key(machine_id: int, gpu_name: str, num_gpus: int) -> tuple[int, str, int]:
    return machine_id, gpu_name, num_gpus

