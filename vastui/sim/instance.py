"""A rented instance inside the simulator: the create request, its state, and its API row (docs/api-notes.md §6).

``InstanceState`` is deliberately mutable: it is the market's private bookkeeping (lifecycle, billing, keys),
never handed out; the API only ever sees rows rendered from it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vastui.bench.billing import storage_usd_per_hour
from vastui.sim.machine import Machine
from vastui.sim.market_error import MarketError
from vastui.sim.turns import Fate


class InstanceStatus(enum.StrEnum):
    """``actual_status`` values the simulator uses."""

    SCHEDULING = "scheduling"   # waiting for the machine's resources before loading (Realism.lifecycle_turns)
    LOADING = "loading"
    RUNNING = "running"
    STOPPED = "stopped"
    EXITED = "exited"
    OFFLINE = "offline"


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """The body of ``PUT /api/v0/asks/{id}/`` (docs/api-notes.md §3.4), validated. Registry logins are dropped."""

    image: str
    disk_gb: float
    label: str | None
    env: dict[str, str]
    onstart: str | None
    runtype: str
    args: list[str] | None
    price: float | None
    template_hash_id: str | None
    cancel_unavail: bool = True     # a scheduling failure: an error (True, the on-demand default) or a stopped instance

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> CreateRequest:
        image = body.get("image")
        template = body.get("template_hash_id")
        if not image and not template:
            raise MarketError(400, "invalid_args", "An image (or a template_hash_id) is required.")
        try:
            disk = float(body.get("disk", 10) if body.get("disk") is not None else 10)
            price = None if body.get("price") is None else float(body["price"])
        except (TypeError, ValueError) as exc:
            raise MarketError(400, "invalid_args", "disk and price must be numbers.") from exc
        if disk <= 0:
            raise MarketError(400, "invalid_args", "disk must be positive.")
        env = body.get("env") or {}
        if not isinstance(env, Mapping):
            raise MarketError(400, "invalid_args", "env must be an object.")
        args = body.get("args")
        label = body.get("label")
        return cls(
            image=str(image or f"template:{template}"), disk_gb=disk,
            label=None if label is None else str(label),
            env={str(k): str(v) for k, v in env.items()},
            onstart=None if body.get("onstart") is None else str(body["onstart"]),
            runtype=str(body.get("runtype") or "ssh"),
            args=[str(a) for a in args] if isinstance(args, list) else None,
            price=price, template_hash_id=None if template is None else str(template),
            cancel_unavail=body.get("cancel_unavail") is not False,
        )

    @property
    def extra_env(self) -> list[list[str]]:
        """Environment variables as ``[name, value]`` pairs; docker-style options (``-p …``) are not env."""
        return [[k, v] for k, v in self.env.items() if not k.startswith("-")]

    @property
    def extra_ports(self) -> list[int]:
        """Container ports asked for with ``-p HOST:CONTAINER``."""
        ports = []
        for key in self.env:
            if key.startswith("-p "):
                container = key[3:].split(":")[-1].split("/")[0].strip()
                if container.isdigit():
                    ports.append(int(container))
        return ports


@dataclass(slots=True)
class InstanceState:
    """The market's private state of one instance."""

    id: int
    machine: Machine
    request: CreateRequest
    api_key: str = field(repr=False)
    created_at: float
    status: InstanceStatus
    intended: str                    # "running" / "stopped"
    ready_at: float | None           # when loading ends; None = never (stuck) or not loading
    last_billed_at: float
    status_msg: str = ""
    label: str | None = None
    running_since: float | None = None
    pull_done_at: float | None = None       # when the image pull in progress ends (logged then)
    host: str | None = None
    port: int | None = None
    proxy_host: str | None = None    # Realism.ssh_proxy: the row's ssh_host/ssh_port (docs/api-notes.md §3.12)
    proxy_port: int | None = None
    direct_ssh: bool = True          # whether the row maps 22/tcp (with a proxy: only when direct was asked)
    authorized_keys: list[str] = field(default_factory=list)  # live list shared with the host provider
    attached_keys: dict[int, str] = field(default_factory=dict)
    gpu_charged_usd: float = 0.0
    storage_charged_usd: float = 0.0
    bandwidth_charged_usd: float = 0.0
    paid_usd: float = 0.0
    deposit_usd: float = 0.0
    discount_rate: float = 0.0
    bid_price: float | None = None
    log_lines: list[tuple[float, str]] = field(default_factory=list)      # the platform's own wording (kind logs)
    daemon_lines: list[tuple[float, str]] = field(default_factory=list)   # the container daemon's (Realism.container_logs)
    container_lines: list[str] = field(default_factory=list)              # the container's own output, unstamped
    fate: Fate = field(default_factory=Fate)      # the turns this rental takes (sim/turns.py)
    scheduled_at: float | None = None             # when a scheduling phase ends and loading begins
    shows: int = 0                                # show-instance reads answered so far

    def reads_unknown(self, now: float) -> bool:
        """Whether the row reads ``unknown`` now: a transient lapse of heartbeats while loading or running."""
        f = self.fate
        if f.unknown_from is None or f.unknown_until is None:
            return False
        lapsed = self.created_at + f.unknown_from <= now < self.created_at + f.unknown_until
        return lapsed and self.status in (InstanceStatus.LOADING, InstanceStatus.RUNNING)

    @property
    def gpu_dph(self) -> float:
        """$/hr for the GPUs while running: the bid when interruptible, else the offer's base price."""
        return self.bid_price if self.bid_price is not None else self.machine.dph_base

    @property
    def storage_dph(self) -> float:
        return storage_usd_per_hour(storage_cost_usd_per_gb_month=self.machine.storage_cost,
                                    disk_gb=self.request.disk_gb)

    @property
    def dph_total(self) -> float:
        return self.gpu_dph + self.storage_dph

    def log(self, at: float, text: str) -> None:
        self.log_lines.append((at, text))

    def daemon_log(self, at: float, text: str) -> None:
        self.daemon_lines.append((at, text))


INSTANCE_COLUMNS = frozenset({
    "id", "machine_id", "host_id", "actual_status", "intended_status", "cur_state", "next_state", "status_msg",
    "image_uuid", "image_args", "image_runtype", "label", "template_id", "template_hash_id", "template_name",
    "num_gpus", "gpu_name", "gpu_arch", "gpu_ram", "gpu_totalram", "gpu_temp", "gpu_util", "compute_cap",
    "cuda_max_good", "driver_version", "cpu_name", "cpu_cores", "cpu_cores_effective", "cpu_util", "cpu_ram",
    "disk_space", "disk_usage", "disk_util", "disk_bw", "mem_usage", "mem_limit", "vmem_usage", "inet_up",
    "inet_down", "inet_up_cost", "inet_down_cost", "ssh_host", "ssh_port", "ssh_idx", "public_ipaddr",
    "local_ipaddrs", "direct_port_start", "direct_port_end", "direct_port_count", "ports", "jupyter_token",
    "onstart", "extra_env", "uptime_mins", "start_date", "end_date", "reliability2", "dph_total", "dph_base",
    "storage_cost", "storage_total_cost", "is_bid", "min_bid", "credit_balance", "volume_info", "verification",
    "geolocation", "hosting_type", "dlperf", "total_flops", "pci_gen", "pcie_bw", "bw_nvlink", "os_version",
})


def instance_row(state: InstanceState, *, now: float, padded: bool = False) -> dict[str, Any]:
    """The JSON row of ``GET /api/v1/instances/`` and ``show instance``; always with ``start_date`` and
    list-of-pairs ``extra_env``, which the official CLI needs. ``padded`` (``Realism.padded_strings``) leaves the
    stray whitespace real rows carry on their host strings and status (docs/api-notes.md §3.2)."""
    row = _row(state, now=now)
    if padded:
        for name, pad in _PADDING.items():
            if isinstance(row.get(name), str):
                row[name] += pad
        if row.get("local_ipaddrs") is not None:
            row["local_ipaddrs"] = f"{row['local_ipaddrs']} 172.17.0.1 \n"
    return row


_PADDING = {"public_ipaddr": "\n", "ssh_host": " ", "status_msg": " \n", "image_uuid": " "}


def _row(state: InstanceState, *, now: float) -> dict[str, Any]:
    m = state.machine
    running = state.status is InstanceStatus.RUNNING
    ports: dict[str, list[dict[str, str]]] = {}
    if running and state.host is not None and state.port is not None and state.direct_ssh:
        ports["22/tcp"] = [{"HostIp": "0.0.0.0", "HostPort": str(state.port)}]
        for offset, container in enumerate(state.request.extra_ports, start=1):
            ports[f"{container}/tcp"] = [{"HostIp": "0.0.0.0", "HostPort": str(state.port + offset)}]
    uptime_s = now - state.running_since if running and state.running_since is not None else 0.0
    return {
        "id": state.id, "machine_id": m.machine_id, "host_id": m.host_id,
        "actual_status": "unknown" if state.reads_unknown(now) else state.status.value,
        "intended_status": state.intended,
        "cur_state": state.intended, "next_state": state.intended, "status_msg": state.status_msg,
        "image_uuid": state.request.image, "image_args": list(state.request.args or []),
        "image_runtype": state.request.runtype, "label": state.label, "template_id": None,
        "template_hash_id": state.request.template_hash_id, "template_name": None,
        "num_gpus": m.num_gpus, "gpu_name": m.gpu_name, "gpu_arch": m.gpu_arch,
        "gpu_ram": m.gpu_ram_mb, "gpu_totalram": m.gpu_ram_mb * m.num_gpus,
        "gpu_temp": 38.0 if running else None, "gpu_util": 0.0 if running else None,
        "compute_cap": m.compute_cap, "cuda_max_good": m.cuda_max_good, "driver_version": m.driver_version,
        "cpu_name": m.cpu_name, "cpu_cores": m.cpu_cores, "cpu_cores_effective": m.cpu_cores_effective,
        "cpu_util": 0.0 if running else None, "cpu_ram": m.cpu_ram_mb,
        "disk_space": state.request.disk_gb, "disk_usage": 0.0, "disk_util": 0.0, "disk_bw": m.disk_bw,
        "mem_usage": 0.0 if running else None, "mem_limit": float(m.cpu_ram_mb), "vmem_usage": None,
        "inet_up": m.inet_up, "inet_down": m.inet_down,
        "inet_up_cost": m.inet_up_cost, "inet_down_cost": m.inet_down_cost,
        "ssh_host": (state.proxy_host or state.host) if running else None,
        "ssh_port": (state.proxy_port or state.port) if running else None,
        "ssh_idx": str(state.id % 10), "public_ipaddr": state.host if running else None,
        "local_ipaddrs": "127.0.0.1" if running else None,
        "direct_port_start": state.port if running else None,
        "direct_port_end": state.port + len(ports) - 1 if running and state.port is not None else None,
        "direct_port_count": m.direct_port_count, "ports": ports, "jupyter_token": None,
        "onstart": state.request.onstart, "extra_env": [list(pair) for pair in state.request.extra_env],
        "uptime_mins": round(uptime_s / 60.0, 2),
        "start_date": state.created_at, "end_date": m.end_date,
        "reliability2": m.reliability, "dph_total": round(state.dph_total, 6), "dph_base": round(state.gpu_dph, 6),
        "storage_cost": m.storage_cost, "storage_total_cost": round(state.storage_dph, 6),
        "is_bid": state.bid_price is not None, "min_bid": m.min_bid, "credit_balance": round(state.deposit_usd, 6),
        "volume_info": [], "verification": m.verification, "geolocation": m.geolocation,
        "hosting_type": m.hosting_type, "dlperf": m.dlperf, "total_flops": m.total_flops,
        "pci_gen": m.pci_gen, "pcie_bw": m.pcie_bw, "bw_nvlink": m.bw_nvlink, "os_version": m.os_version,
    }
