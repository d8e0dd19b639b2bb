"""The one billing model of a rented instance: what the marketplace charges, and so what a run costs.

Used by the simulator's meter (which charges an instance as time passes) and by the cost formula (which prices
a production run), so the two cannot drift apart. The rules follow Vast.ai's published pricing (the instance
pricing help pages and the API's instance fields):

- **GPU**: the GPU price (``dph_base``, or the bid when interruptible) per second while the instance is *active*
  (``running``). Loading (image pull, container start) and ``stopped`` are not charged for the GPUs.
- **Storage**: ``storage_cost`` ($ per GB per month of 30 days) times the allocated disk, per second from creation
  to destruction, in every state — why a stopped instance still bills and why loading is not free.
- **Bandwidth**: every GB moved, down at ``inet_down_cost`` and up at ``inet_up_cost`` ($/GB), the image pull
  included (a cached image moves nothing).

Prepay discounts change who pays (a deposit, at its discount), not what a second costs; the simulator applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

S_PER_H = 3600.0
HOURS_PER_STORAGE_MONTH = 30 * 24.0     # storage_cost is quoted per GB per 30-day month


def storage_usd_per_hour(*, storage_cost_usd_per_gb_month: float, disk_gb: float) -> float:
    """$/h for ``disk_gb`` of allocated disk at ``storage_cost`` ($/GB/month)."""
    return max(0.0, storage_cost_usd_per_gb_month) * max(0.0, disk_gb) / HOURS_PER_STORAGE_MONTH


@dataclass(frozen=True, slots=True)
class Rates:
    """The prices one instance is billed at (USD; GB = 1e9 bytes)."""

    gpu_usd_per_hour: float
    storage_usd_per_hour: float = 0.0
    inet_down_usd_per_gb: float = 0.0
    inet_up_usd_per_gb: float = 0.0


@dataclass(frozen=True, slots=True)
class Usage:
    """What an instance did: seconds it existed, seconds it was active (running), GB it moved."""

    exists_s: float
    active_s: float
    down_gb: float = 0.0
    up_gb: float = 0.0


@dataclass(frozen=True, slots=True)
class Bill:
    """Charges at list price, by kind."""

    gpu_usd: float
    storage_usd: float
    bandwidth_usd: float

    @property
    def total_usd(self) -> float:
        return self.gpu_usd + self.storage_usd + self.bandwidth_usd


NO_CHARGE = Bill(gpu_usd=0.0, storage_usd=0.0, bandwidth_usd=0.0)


def gpu_charge_usd(rates: Rates, *, active_s: float) -> float:
    """The GPUs' charge for ``active_s`` seconds in the running state."""
    return rates.gpu_usd_per_hour * max(0.0, active_s) / S_PER_H


def storage_charge_usd(rates: Rates, *, exists_s: float) -> float:
    """The disk's charge for ``exists_s`` seconds of existence (any state)."""
    return rates.storage_usd_per_hour * max(0.0, exists_s) / S_PER_H


def accrued_usd(*, dph_total: float, start_at: float, now: float) -> float:
    """What an instance listed at ``dph_total`` ($/h, all in) has accrued from ``start_at`` (the marketplace's start
    date) to ``now``, by the second. A start after ``now`` (clock skew) has cost nothing yet."""
    return dph_total * max(0.0, now - start_at) / S_PER_H


def bandwidth_charge_usd(rates: Rates, *, down_gb: float, up_gb: float = 0.0) -> float:
    """Traffic's charge: GB down and up at the machine's prices."""
    return max(0.0, down_gb) * rates.inet_down_usd_per_gb + max(0.0, up_gb) * rates.inet_up_usd_per_gb


def bill(rates: Rates, usage: Usage) -> Bill:
    """What the marketplace charges for ``usage`` at ``rates``."""
    return Bill(gpu_usd=gpu_charge_usd(rates, active_s=usage.active_s),
                storage_usd=storage_charge_usd(rates, exists_s=usage.exists_s),
                bandwidth_usd=bandwidth_charge_usd(rates, down_gb=usage.down_gb, up_gb=usage.up_gb))


def usage_from_transitions(*, created_at: float, running_at: float | None, ended_at: float,
                           down_gb: float = 0.0, up_gb: float = 0.0) -> Usage:
    """Usage of one instance from the moments the API showed: created, first running, destroyed (or now).

    An instance that never reached ``running`` was charged for its disk only.
    """
    exists_s = max(0.0, ended_at - created_at)
    active_s = 0.0 if running_at is None else max(0.0, ended_at - max(running_at, created_at))
    return Usage(exists_s=exists_s, active_s=min(active_s, exists_s), down_gb=down_gb, up_gb=up_gb)
