"""Typed, frozen views of the marketplace's JSON rows: Offer, Instance, User, SshKey and small results.

Attribute names are the Vast API's own (they are the lingua franca of queries, orders and the docs); every
attribute's unit is in the comment next to it. ``from_api`` checks each field's type and raises ``ApiError``
naming the field and the row when the marketplace sends garbage, so raw dicts never leave ``vastui.vast``.
No model keeps a secret: instance API keys, jupyter tokens and environment values are dropped on parse.

Why one module past the usual size: every model is parsed by the one checked row reader (``_Row``), whose error
messages name the field and the row; splitting the models from it would make it public for no other user.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

from vastui.errors import ApiError
from vastui.vast.rows import UnreadableRow

_log = logging.getLogger(__name__)
MAX_ROW_INTEGER = 2**63          # larger integers in a row are garbage (and 10**400 would overflow a float)


class InstanceStatus(enum.StrEnum):
    """``actual_status`` (and ``intended_status``) values; a row whose status is null is still provisioning."""

    CREATED = "created"
    LOADING = "loading"
    RUNNING = "running"
    STOPPED = "stopped"
    FROZEN = "frozen"
    EXITED = "exited"
    REBOOTING = "rebooting"
    UNKNOWN = "unknown"
    OFFLINE = "offline"
    SCHEDULING = "scheduling"


class _Row:
    """Typed reads from one JSON row, with errors that say which field of which row is wrong."""

    def __init__(self, row: object, *, kind: str, where: str) -> None:
        if not isinstance(row, Mapping):
            raise ApiError(f"{kind} {where}: expected a JSON object, got {type(row).__name__}")
        self._row = row
        self._kind = kind
        ident = row.get("id")
        self._where = f"{where} (id {ident})" if isinstance(ident, int) and not isinstance(ident, bool) else where

    def _bad(self, name: str, expected: str) -> ApiError:
        value = self._row.get(name)
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return ApiError(f"{self._kind} {self._where}: field {name!r} should be {expected}, "
                        f"got {type(value).__name__} {shown}")

    def _get(self, name: str, required: bool, expected: str) -> object:
        value = self._row.get(name)
        if value is None and required:
            raise ApiError(f"{self._kind} {self._where}: required field {name!r} is missing "
                           f"(expected {expected})")
        return value

    def int_(self, name: str, *, required: bool = False) -> int | None:
        value = self._row.get(name)
        if type(value) is int:  # the usual case first: rows have hundreds of fields and searches many rows
            return value
        value = self._get(name, required, "an integer")
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_ROW_INTEGER:
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_ROW_INTEGER:
            raise self._bad(name, "an integer")
        return value

    def req_int(self, name: str) -> int:
        value = self.int_(name, required=True)
        assert value is not None
        return value

    def float_(self, name: str, *, required: bool = False) -> float | None:
        value = self._row.get(name)
        if type(value) is float and value == value:  # the usual case first (NaN is not equal to itself)
            return value
        value = self._get(name, required, "a number")
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_ROW_INTEGER:
            raise self._bad(name, "a number")  # past 2**63: no API number is that large (10**400 has no float)
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise self._bad(name, "a number")
        return float(value)

    def req_float(self, name: str) -> float:
        value = self.float_(name, required=True)
        assert value is not None
        return value

    def str_(self, name: str, *, required: bool = False) -> str | None:
        """A string field, stripped: real listing rows carry stray whitespace (an address ending in a newline), and
        the official CLI strips every string it reads (docs/api-notes.md §3.2)."""
        value = self._row.get(name)
        if type(value) is str:
            return value.strip()
        value = self._get(name, required, "a string")
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._bad(name, "a string")
        return value.strip()

    def req_str(self, name: str) -> str:
        value = self.str_(name, required=True)
        assert value is not None
        return value

    def timestamp(self, name: str) -> float | None:
        """Epoch seconds from an ISO 8601 date-time string (what the API documents; a zone-less one is UTC) or
        from a number (older shapes)."""
        value = self._row.get(name)
        if not isinstance(value, str):
            return self.float_(name)
        try:
            parsed = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise self._bad(name, "an ISO 8601 date-time") from None
        return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)).timestamp()

    def bool_(self, name: str) -> bool | None:
        value = self._row.get(name)
        if value is None:
            return None
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise self._bad(name, "true/false (or 0/1)")

    def status(self, name: str) -> InstanceStatus | None:
        text = self.str_(name)
        if text is None:
            return None
        try:
            return InstanceStatus(text)
        except ValueError:
            # A status Vast added after us must not make the whole listing unreadable; treat it as unknown.
            _log.warning("%s %s: unrecognised %s %r, treated as 'unknown'", self._kind, self._where, name, text)
            return InstanceStatus.UNKNOWN

    def direct_ssh_port(self) -> int | None:
        """``ports["22/tcp"][0]["HostPort"]`` (a string in Docker's format), or None without a direct mapping."""
        ports = self._row.get("ports")
        if ports is None or ports == {} or ports == "":
            return None
        if not isinstance(ports, Mapping):
            raise self._bad("ports", "a mapping like {'22/tcp': [{'HostPort': '40022'}]}")
        bindings = ports.get("22/tcp")
        if not bindings:
            return None
        first = bindings[0] if isinstance(bindings, list) else None
        host_port = first.get("HostPort") if isinstance(first, Mapping) else None
        if isinstance(host_port, int) and not isinstance(host_port, bool):
            return host_port
        if isinstance(host_port, str) and host_port.isdigit():
            return int(host_port)
        raise self._bad("ports", "a Docker port map with a numeric 22/tcp HostPort")


@dataclass(frozen=True, slots=True)
class Offer:
    """One rentable bundle from ``POST /api/v0/bundles/``."""

    id: int                                   # offer (ask) id, used to rent: PUT /asks/{id}/
    machine_id: int
    host_id: int | None
    num_gpus: int
    gpu_name: str                             # e.g. "RTX 4090"
    gpu_ram: float | None                     # MB per GPU
    gpu_total_ram: float | None               # MB, all GPUs
    gpu_arch: str | None                      # "nvidia" / "amd"
    gpu_mem_bw: float | None                  # GB/s
    compute_cap: int | None                   # CC x 100 (890 = 8.9)
    cuda_max_good: float | None               # highest CUDA version the driver supports
    driver_version: str | None                # "550.54.14"
    cpu_name: str | None
    cpu_cores_effective: float | None         # vCPUs you get
    cpu_ram: float | None                     # MB
    disk_space: float | None                  # GB available
    disk_bw: float | None                     # MB/s
    inet_up: float | None                     # Mb/s
    inet_down: float | None                   # Mb/s
    inet_up_cost: float | None                # $/GB
    inet_down_cost: float | None              # $/GB
    pci_gen: float | None
    pcie_bw: float | None                     # GB/s
    direct_port_count: int | None
    dph_base: float | None                    # $/hr, GPUs only
    dph_total: float                          # $/hr including storage at the searched allocated_storage
    discounted_dph_total: float | None        # $/hr, reserved pricing
    min_bid: float | None                     # $/hr, interruptible
    storage_cost: float | None                # $/GB/month
    dlperf: float | None                      # provider's DL performance score
    dlperf_per_dphtotal: float | None         # dlperf per $/hr
    total_flops: float | None                 # TFLOPS, all GPUs
    flops_per_dphtotal: float | None          # TFLOPS per $/hr
    score: float | None                       # Vast's ranking score
    reliability: float | None                 # 0..1
    verification: str | None                  # verified / unverified / deverified
    rentable: bool | None
    rented: bool | None
    external: bool | None
    hosting_type: int | None                  # 1 = datacenter
    static_ip: bool | None
    geolocation: str | None                   # "City, CC"
    public_ipaddr: str | None
    end_date: float | None                    # epoch seconds the offer is available until
    duration: float | None                    # seconds remaining

    @property
    def is_verified(self) -> bool:
        return self.verification == "verified"

    @property
    def is_datacenter(self) -> bool:
        return self.hosting_type == 1

    @classmethod
    def from_api(cls, row: Mapping[str, object], *, where: str = "row") -> Offer:
        """Parse one offer row; raise ApiError naming the field if it is garbage."""
        r = _Row(row, kind="offer", where=where)
        return cls(
            id=r.req_int("id"), machine_id=r.req_int("machine_id"), host_id=r.int_("host_id"),
            num_gpus=r.req_int("num_gpus"), gpu_name=r.req_str("gpu_name"),
            gpu_ram=r.float_("gpu_ram"), gpu_total_ram=r.float_("gpu_total_ram"), gpu_arch=r.str_("gpu_arch"),
            gpu_mem_bw=r.float_("gpu_mem_bw"), compute_cap=r.int_("compute_cap"),
            cuda_max_good=r.float_("cuda_max_good"), driver_version=r.str_("driver_version"),
            cpu_name=r.str_("cpu_name"), cpu_cores_effective=r.float_("cpu_cores_effective"),
            cpu_ram=r.float_("cpu_ram"), disk_space=r.float_("disk_space"), disk_bw=r.float_("disk_bw"),
            inet_up=r.float_("inet_up"), inet_down=r.float_("inet_down"),
            inet_up_cost=r.float_("inet_up_cost"), inet_down_cost=r.float_("inet_down_cost"),
            pci_gen=r.float_("pci_gen"), pcie_bw=r.float_("pcie_bw"), direct_port_count=r.int_("direct_port_count"),
            dph_base=r.float_("dph_base"), dph_total=r.req_float("dph_total"),
            discounted_dph_total=r.float_("discounted_dph_total"), min_bid=r.float_("min_bid"),
            storage_cost=r.float_("storage_cost"), dlperf=r.float_("dlperf"),
            dlperf_per_dphtotal=r.float_("dlperf_per_dphtotal"), total_flops=r.float_("total_flops"),
            flops_per_dphtotal=r.float_("flops_per_dphtotal"), score=r.float_("score"),
            reliability=r.float_("reliability"), verification=r.str_("verification"),
            rentable=r.bool_("rentable"), rented=r.bool_("rented"), external=r.bool_("external"),
            hosting_type=r.int_("hosting_type"), static_ip=r.bool_("static_ip"), geolocation=r.str_("geolocation"),
            public_ipaddr=r.str_("public_ipaddr"), end_date=r.float_("end_date"), duration=r.float_("duration"),
        )


@dataclass(frozen=True, slots=True)
class Instance:
    """One of the renter's instances (a "contract"), from the v1 listing or ``show instance``."""

    id: int                                   # instance (contract) id; create returns it as new_contract
    machine_id: int | None
    host_id: int | None
    actual_status: InstanceStatus | None      # None: still provisioning
    intended_status: InstanceStatus | None    # what the renter asked for (running / stopped)
    cur_state: str | None                     # scheduler state (running / stopped / unloaded)
    next_state: str | None
    status_msg: str | None
    label: str | None
    image_uuid: str | None                    # image name
    image_runtype: str | None                 # e.g. "ssh_direc ssh_proxy"
    num_gpus: int | None
    gpu_name: str | None
    gpu_util: float | None                    # percent, 0..100
    dph_total: float | None                   # $/hr
    start_date: float | None                  # epoch seconds (the marketplace's clock)
    end_date: float | None                    # epoch seconds
    disk_space: float | None                  # GB allocated
    ssh_host: str | None                      # proxy SSH endpoint
    ssh_port: int | None
    public_ipaddr: str | None                 # direct SSH endpoint host
    direct_ssh_port: int | None               # host port mapped to the container's 22/tcp
    direct_port_start: int | None
    direct_port_end: int | None
    geolocation: str | None
    cuda_max_good: float | None
    driver_version: str | None
    storage_total_cost: float | None = None   # $/hr of the disk alone (what a stopped instance still bills)
    uptime_mins: float | None = None          # minutes running since it last started (the marketplace's count)

    @property
    def is_running(self) -> bool:
        return self.actual_status is InstanceStatus.RUNNING

    @property
    def burn_usd_per_h(self) -> float:
        """What it bills per hour now: ``dph_total`` while up, its storage alone once stopped (0 where unsaid)."""
        if InstanceStatus.STOPPED in (self.actual_status, self.intended_status):
            return self.storage_total_cost or 0.0
        return self.dph_total or 0.0

    def ssh_endpoint(self) -> tuple[str, int] | None:
        """The first of ``ssh_endpoints()`` (what a table shows), or None while there is none."""
        endpoints = self.ssh_endpoints()
        return endpoints[0] if endpoints else None

    def ssh_endpoints(self) -> list[tuple[str, int]]:
        """Where to SSH, in the order to try: the direct mapping first when the runtype asked for it, then the proxy
        (``ssh_host``/``ssh_port``, one port up for a jupyter runtype); a direct mapping the runtype did not ask
        for comes last. ``vastai ssh-url`` picks direct alone and never falls back; a direct port can be closed
        while the proxy works, so both are offered (docs/api-notes.md §3.12)."""
        runtype = (self.image_runtype or "").split()
        direct = ((self.public_ipaddr, self.direct_ssh_port)
                  if self.public_ipaddr and self.direct_ssh_port else None)
        proxy = None
        if self.ssh_host and self.ssh_port:
            jupyter = any("jupyter" in word for word in runtype)
            proxy = (self.ssh_host, self.ssh_port + 1 if jupyter else self.ssh_port)
        # A proxy-only runtype ("ssh_proxy", "jupyter_proxy ssh_proxy") did not ask for direct access.
        direct_asked = "ssh_direc" in runtype or not any(word.endswith("_proxy") for word in runtype)
        ordered = [direct, proxy] if direct_asked else [proxy, direct]
        endpoints: list[tuple[str, int]] = []
        for endpoint in ordered:
            if endpoint is not None and endpoint not in endpoints:
                endpoints.append(endpoint)
        return endpoints

    @classmethod
    def from_api(cls, row: Mapping[str, object], *, where: str = "row") -> Instance:
        """Parse one instance row; raise ApiError naming the field if it is garbage."""
        r = _Row(row, kind="instance", where=where)
        return cls(
            id=r.req_int("id"), machine_id=r.int_("machine_id"), host_id=r.int_("host_id"),
            actual_status=r.status("actual_status"), intended_status=r.status("intended_status"),
            cur_state=r.str_("cur_state"), next_state=r.str_("next_state"), status_msg=r.str_("status_msg"),
            label=r.str_("label"), image_uuid=r.str_("image_uuid"), image_runtype=r.str_("image_runtype"),
            num_gpus=r.int_("num_gpus"), gpu_name=r.str_("gpu_name"), gpu_util=r.float_("gpu_util"),
            dph_total=r.float_("dph_total"), start_date=r.float_("start_date"), end_date=r.float_("end_date"),
            disk_space=r.float_("disk_space"), ssh_host=r.str_("ssh_host"), ssh_port=r.int_("ssh_port"),
            public_ipaddr=r.str_("public_ipaddr"), direct_ssh_port=r.direct_ssh_port(),
            direct_port_start=r.int_("direct_port_start"), direct_port_end=r.int_("direct_port_end"),
            geolocation=r.str_("geolocation"), cuda_max_good=r.float_("cuda_max_good"),
            driver_version=r.str_("driver_version"), storage_total_cost=r.float_("storage_total_cost"),
            uptime_mins=r.float_("uptime_mins"),
        )


class OfferRows(list[Offer]):
    """A search's offers, in the marketplace's order; ``unreadable`` are the rows that could not be parsed (each
    reported and skipped: one odd offer never hides the others)."""

    unreadable: tuple[UnreadableRow, ...] = ()


@dataclass(frozen=True, slots=True)
class InstanceListing:
    """Every instance the marketplace listed. ``is_complete`` is False when a page failed: then ``instances``
    is what was read before the failure and ``error`` says why. An incomplete listing is *unknown*, never zero.

    ``unreadable`` are rows that could not be parsed, each reported and skipped: the other rows are used. A row
    whose id is readable keeps that id *present* (``present_ids``): absence cannot be proven for it. A row with no
    readable id could be any instance, so it makes the listing incomplete."""

    instances: tuple[Instance, ...]
    is_complete: bool
    error: str | None = None
    unreadable: tuple[UnreadableRow, ...] = ()

    @property
    def present_ids(self) -> frozenset[int]:
        """Every id the listing shows, read or not: an id outside this set is absent (when complete)."""
        return frozenset(inst.id for inst in self.instances) | {r.id for r in self.unreadable if r.id is not None}

    @property
    def present_labels(self) -> frozenset[str]:
        return (frozenset(inst.label for inst in self.instances if inst.label)
                | {r.label for r in self.unreadable if r.label})

    def find(self, instance_id: int) -> Instance | None:
        return next((inst for inst in self.instances if inst.id == instance_id), None)

    @property
    def burn_usd_per_h(self) -> float:
        """What every instance read bills per hour (a lower bound when the listing is incomplete)."""
        return sum(inst.burn_usd_per_h for inst in self.instances)

    def with_label(self, label: str) -> tuple[Instance, ...]:
        return tuple(inst for inst in self.instances if inst.label == label)


@dataclass(frozen=True, slots=True)
class User:
    """The account (``GET /api/v0/users/current``). The account's API key is never kept."""

    id: int
    username: str | None
    email: str | None
    fullname: str | None
    credit: float | None                      # USD of spendable prepaid credit
    balance: float | None                     # USD billing balance
    can_pay: bool | None
    has_billing: bool | None

    @classmethod
    def from_api(cls, row: Mapping[str, object], *, where: str = "user") -> User:
        r = _Row(row, kind="user", where=where)
        return cls(id=r.req_int("id"), username=r.str_("username"), email=r.str_("email"),
                   fullname=r.str_("fullname"), credit=r.float_("credit"), balance=r.float_("balance"),
                   can_pay=r.bool_("can_pay"), has_billing=r.bool_("has_billing"))


@dataclass(frozen=True, slots=True)
class SshKey:
    """An SSH public key registered on the account (``GET /api/v0/ssh/``; docs/api-notes.md §3.13)."""

    id: int
    public_key: str                           # "ssh-ed25519 AAAA... comment", as registered
    created_at: float | None                  # epoch seconds (the API sends a date-time string)
    deleted_at: float | None = None           # epoch seconds; a deleted key no longer reaches new instances

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    def matches(self, public_key: str) -> bool:
        """Whether ``public_key`` is this key: the same type and key data (comments and options aside), as
        sshd compares an offered key with ``authorized_keys``."""
        mine = key_identity(self.public_key)
        return mine is not None and mine == key_identity(public_key)

    @classmethod
    def from_api(cls, row: Mapping[str, object], *, where: str = "ssh key") -> SshKey:
        """The documented row names the key ``key``; the official CLI's shape and older answers ``public_key`` or
        ``ssh_key``."""
        r = _Row(row, kind="ssh key", where=where)
        key = r.str_("key") or r.str_("public_key") or r.str_("ssh_key")
        if not key:
            raise ApiError(f"ssh key {where}: required field 'key' is missing (expected the public key text)")
        return cls(id=r.req_int("id"), public_key=key.strip(), created_at=r.timestamp("created_at"),
                   deleted_at=r.timestamp("deleted_at"))


def key_identity(public_key: str) -> tuple[str, str] | None:
    """``(type, base64 data)`` of an OpenSSH public key line, found after any ``authorized_keys`` options; None
    when the text holds no key."""
    words = public_key.split()
    for i, word in enumerate(words[:-1]):
        if word.startswith(("ssh-", "ecdsa-", "sk-")):
            return word, words[i + 1]
    return None


@dataclass(frozen=True, slots=True)
class CreatedInstance:
    """What ``create_instance`` rented. ``reconciled`` is True when the id was found by label after the create
    request itself failed in transit. The instance API key of the response is deliberately not kept."""

    instance_id: int
    offer_id: int
    label: str
    reconciled: bool = False


@dataclass(frozen=True, slots=True)
class Prepaid:
    """The result of prepaying an instance."""

    instance_id: int
    amount_usd: float
    timescale_months: float
    discount_rate: float                      # fraction, 0..1


@dataclass(frozen=True, slots=True)
class Answered:
    """When a mutating request went out and when its answer came back (the client's clock): the marketplace acted
    between the two — what a destroy's bill is measured to."""

    sent_at: float
    answered_at: float

    @property
    def midpoint(self) -> float:
        return (self.sent_at + self.answered_at) / 2.0
