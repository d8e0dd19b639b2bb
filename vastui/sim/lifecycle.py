"""How an instance moves through time: loading (image pull + readiness) to running, and what each second costs.

Vast bills storage from creation to destruction and the GPUs only while the container runs; a prepaid deposit
pays first, at its discount. Everything here is a pure step on one ``InstanceState``; the market decides when.
"""

from __future__ import annotations

from dataclasses import dataclass

from vastui.sim.account import Account
from vastui.sim.images import image_size_mb, is_popular
from vastui.sim.instance import InstanceState, InstanceStatus
from vastui.sim.truth import Fault


@dataclass(frozen=True, slots=True)
class Charges:
    """What an instance has cost so far at list price, and what was actually paid (prepay discounts applied)."""

    gpu_usd: float
    storage_usd: float
    bandwidth_usd: float
    paid_usd: float

    @property
    def total_usd(self) -> float:
        return self.gpu_usd + self.storage_usd + self.bandwidth_usd


def discount_for(months: float) -> float:
    """Prepay discount: 20 % for a month, 30 % for three (the CLI's help), linear in between and below."""
    return round(0.2 * min(months, 1.0) + 0.05 * max(0.0, min(months, 3.0) - 1.0), 4)


def advance(st: InstanceState, now: float, *, account: Account, pulled: set[tuple[int, str]]) -> None:
    """Bring one instance up to ``now``: finish loading if its time has come, bill every second on the way."""
    while st.status is InstanceStatus.LOADING and st.ready_at is not None and st.ready_at <= now:
        bill(st, until=st.ready_at, account=account)
        st.status, st.running_since, st.ready_at = InstanceStatus.RUNNING, st.ready_at, None
        st.status_msg = "success, running " + st.request.image
        pulled.add((st.machine.machine_id, st.request.image))
        st.log(st.running_since, "Container started; ssh ready.")
    bill(st, until=now, account=account)


def bill(st: InstanceState, *, until: float, account: Account) -> None:
    hours = (until - st.last_billed_at) / 3600.0
    if hours <= 0:
        return
    storage = st.storage_dph * hours
    gpu = st.gpu_dph * hours if st.status is InstanceStatus.RUNNING else 0.0
    st.storage_charged_usd += storage
    st.gpu_charged_usd += gpu
    pay(st, storage + gpu, account=account)
    st.last_billed_at = until


def charge_bandwidth(st: InstanceState, *, down_gb: float, up_gb: float, account: Account) -> float:
    """Charge traffic at the machine's $/GB prices; returns the list-price amount."""
    amount = max(0.0, down_gb) * st.machine.inet_down_cost + max(0.0, up_gb) * st.machine.inet_up_cost
    st.bandwidth_charged_usd += amount
    pay(st, amount, account=account)
    return amount


def pay(st: InstanceState, amount: float, *, account: Account) -> None:
    """Take ``amount`` (list price): from the prepaid deposit first, at its discount, the rest from credit."""
    if st.deposit_usd > 0:
        from_deposit = min(st.deposit_usd, amount * (1.0 - st.discount_rate))
        st.deposit_usd -= from_deposit
        st.paid_usd += from_deposit
        amount = max(0.0, amount - from_deposit / (1.0 - st.discount_rate))  # list price the deposit covered
    st.paid_usd += amount
    account.credit_usd -= amount


def halt(st: InstanceState, now: float, *, status: InstanceStatus, why: str) -> None:
    """Leave loading/running for ``status`` (stopped, exited, offline)."""
    st.status, st.ready_at, st.running_since = status, None, None
    if status is InstanceStatus.STOPPED:
        st.intended = "stopped"
    st.status_msg = why
    st.log(now, why)


def begin_loading(st: InstanceState, now: float, *, pull: bool, pulled: set[tuple[int, str]]) -> None:
    """Enter ``loading``: image pull (unless cached or not asked) plus readiness; a STUCK_LOADING host never ends."""
    truth = st.machine.truth
    image = st.request.image
    cached = (truth.image_cached and is_popular(image)) or (st.machine.machine_id, image) in pulled
    pull_s = 0.0 if cached or not pull else image_size_mb(image) / truth.image_pull_mb_per_s
    st.status, st.intended, st.running_since = InstanceStatus.LOADING, "running", None
    st.ready_at = None if truth.fault is Fault.STUCK_LOADING else now + pull_s + truth.readiness_s
    st.status_msg = "Pulling image " + image if pull_s else "Starting container"
    st.log(now, f"{st.status_msg} ({'cached' if cached else f'{image_size_mb(image):.0f} MB'})")
