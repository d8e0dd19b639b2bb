"""How an instance moves through time: loading (image pull + readiness) to running, and what each second costs.

What a second and a GB cost is ``vastui.bench.billing`` — the same model the cost formula prices runs with:
storage from creation to destruction, the GPUs only while running, the image pull's download at the machine's
``inet_down_cost``. A prepaid deposit pays first, at its discount. Everything here is a pure step on one
``InstanceState``; the market decides when.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from vastui.bench import billing
from vastui.sim.account import Account
from vastui.sim.images import image_size_mb, is_popular
from vastui.sim.instance import InstanceState, InstanceStatus
from vastui.sim.truth import Fault
from vastui.sim.turns import OCI_FAILURE


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
    """Bring one instance up to ``now``: end a scheduling phase, finish loading if its time has come, bill every
    second on the way."""
    if st.status is InstanceStatus.SCHEDULING and st.scheduled_at is not None and st.scheduled_at <= now:
        bill(st, until=st.scheduled_at, account=account)
        begin_loading(st, st.scheduled_at, pull=True, pulled=pulled, account=account)
        st.scheduled_at = None
    if st.pull_done_at is not None and st.pull_done_at <= now:
        pulled_at, st.pull_done_at = st.pull_done_at, None
        st.log(pulled_at, f"Image pulled ({image_size_mb(st.request.image):.0f} MB); starting container.")
        st.daemon_log(pulled_at, f"Digest: sha256:{_digest(st.request.image)}")
        st.daemon_log(pulled_at, f"Status: Downloaded newer image for {st.request.image}")
        if st.fate.runtime_fails:
            fail_runtime(st, pulled_at)
    while st.status is InstanceStatus.LOADING and st.ready_at is not None and st.ready_at <= now:
        bill(st, until=st.ready_at, account=account)
        st.status, st.running_since, st.ready_at = InstanceStatus.RUNNING, st.ready_at, None
        st.status_msg = "success, running " + st.request.image
        pulled.add((st.machine.machine_id, st.request.image))
        st.log(st.running_since, "Container started; ssh ready.")
        st.container_lines.append(CONTAINER_FIRST_LINE)
    bill(st, until=now, account=account)


def rates_of(st: InstanceState) -> billing.Rates:
    """The prices this instance is billed at."""
    return billing.Rates(gpu_usd_per_hour=st.gpu_dph, storage_usd_per_hour=st.storage_dph,
                         inet_down_usd_per_gb=st.machine.inet_down_cost, inet_up_usd_per_gb=st.machine.inet_up_cost)


def bill(st: InstanceState, *, until: float, account: Account) -> None:
    elapsed_s = until - st.last_billed_at
    if elapsed_s <= 0:
        return
    rates = rates_of(st)
    storage = billing.storage_charge_usd(rates, exists_s=elapsed_s)
    gpu = billing.gpu_charge_usd(rates, active_s=elapsed_s) if st.status is InstanceStatus.RUNNING else 0.0
    st.storage_charged_usd += storage
    st.gpu_charged_usd += gpu
    pay(st, storage + gpu, account=account)
    st.last_billed_at = until


def charge_bandwidth(st: InstanceState, *, down_gb: float, up_gb: float, account: Account) -> float:
    """Charge traffic at the machine's $/GB prices; returns the list-price amount."""
    amount = billing.bandwidth_charge_usd(rates_of(st), down_gb=down_gb, up_gb=up_gb)
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
    st.status, st.ready_at, st.running_since, st.pull_done_at = status, None, None, None
    if status is InstanceStatus.STOPPED:
        st.intended = "stopped"
    st.status_msg = why
    st.log(now, why)


def begin_loading(st: InstanceState, now: float, *, pull: bool, pulled: set[tuple[int, str]],
                  account: Account) -> None:
    """Enter ``loading``: image pull (unless cached or not asked) plus readiness; a STUCK_LOADING host never ends.

    A pull downloads the whole image, so its bytes are charged as traffic when it starts.
    """
    truth = st.machine.truth
    image = st.request.image
    cached = (truth.image_cached and is_popular(image)) or (st.machine.machine_id, image) in pulled
    pull_s = 0.0 if cached or not pull else image_size_mb(image) / truth.image_pull_mb_per_s
    if pull_s > 0:
        charge_bandwidth(st, down_gb=image_size_mb(image) / 1000.0, up_gb=0.0, account=account)
    st.status, st.intended, st.running_since = InstanceStatus.LOADING, "running", None
    st.ready_at = None if truth.fault is Fault.STUCK_LOADING else now + pull_s + truth.readiness_s
    st.pull_done_at = now + pull_s if pull_s > 0 else None
    st.status_msg = "Pulling image " + image if pull_s else "Starting container"
    st.log(now, f"{st.status_msg} ({'cached' if cached else f'{image_size_mb(image):.0f} MB'})")
    if pull_s > 0:
        st.daemon_log(now, f"{_tag(image)}: Pulling from {_repository(image)}")
    elif pull:
        st.daemon_log(now, f"Status: Image is up to date for {image}")
    if st.fate.runtime_fails:
        st.ready_at = None                       # the container never starts
        if st.pull_done_at is None:
            fail_runtime(st, now)


def fail_runtime(st: InstanceState, now: float) -> None:
    """The container runtime cannot start it: it stays ``loading`` with the runtime's error in ``status_msg``."""
    st.status_msg = OCI_FAILURE
    st.log(now, OCI_FAILURE)
    st.daemon_log(now, OCI_FAILURE)


# What the container itself prints first on an SSH image (its init starting sshd); it carries no time stamp.
CONTAINER_FIRST_LINE = "Starting OpenBSD Secure Shell server: sshd."


def _repository(image: str) -> str:
    """``pytorch/pytorch:2.4`` -> ``pytorch/pytorch``; a bare name is in ``library/`` as the daemon says."""
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return name if "/" in name else f"library/{name}"


def _tag(image: str) -> str:
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else "latest"


def _digest(image: str) -> str:
    return hashlib.sha256(image.encode()).hexdigest()
