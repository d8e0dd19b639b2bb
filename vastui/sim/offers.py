"""Offer rows as ``POST /api/v0/bundles/`` returns them, and the search over them (docs/api-notes.md §3.1, §4, §5).

Prices depend on the query: ``type`` (on-demand / bid / reserved) and ``allocated_storage`` (GB priced into
``dph_total``); ``duration`` depends on the moment. Virtual columns (``datacenter``, ``verified``, country-code
``geolocation``, ``allocated_storage``) and the server-side aliases are resolved here.
"""

from __future__ import annotations

import enum
import json
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from vastui.sim.filters import (
    Condition,
    FilterError,
    Getter,
    Row,
    column_kind,
    conditions_for,
    fast_predicate,
    fast_sort,
    parse_order,
)
from vastui.sim.machine import Machine

HOURS_PER_MONTH = 720.0
DEFAULT_STORAGE_GB = 5.0

ALIASES = {
    "reliability2": "reliability", "dphtotal": "dph_total", "gpu_totalram": "gpu_total_ram",
    "ubuntu_version": "os_version", "driver_version": "driver_vers", "cuda_vers": "cuda_max_good",
    "dph": "dph_total", "dlperf_usd": "dlperf_per_dphtotal", "flops_usd": "flops_per_dphtotal",
    "display_active": "gpu_display_active", "target_reliability": "expected_reliability",
}
# Keys of the query dict that are directives, not filters.
DIRECTIVES = frozenset({"order", "type", "limit", "allocated_storage", "select_cols"})


class PricingType(enum.StrEnum):
    ON_DEMAND = "on-demand"
    BID = "bid"
    RESERVED = "reserved"


def pricing_type(value: Any) -> PricingType:
    """The query's ``type``; ``interruptible`` is the CLI's synonym for ``bid``."""
    if value is None:
        return PricingType.ON_DEMAND
    text = str(value).lower()
    if text == "interruptible":
        return PricingType.BID
    try:
        return PricingType(text)
    except ValueError as exc:
        raise FilterError(f"Invalid type '{value}': use on-demand, bid or reserved.", column="type") from exc


def storage_dph(machine: Machine, *, storage_gb: float) -> float:
    """$/hr for ``storage_gb`` of disk on this machine."""
    return machine.storage_cost * storage_gb / HOURS_PER_MONTH


def offer_row(machine: Machine, *, now: float, rented: bool, pricing: PricingType = PricingType.ON_DEMAND,
              storage_gb: float = DEFAULT_STORAGE_GB) -> dict[str, Any]:
    """The offer JSON of a machine (every field of docs/api-notes.md §5)."""
    storage = storage_dph(machine, storage_gb=storage_gb)
    on_demand = machine.dph_base + storage
    dph_total = machine.min_bid + storage if pricing is PricingType.BID else on_demand
    discounted = machine.dph_base * (1.0 - machine.credit_discount_max) + storage
    gpu_total_ram = machine.gpu_ram_mb * machine.num_gpus
    per_dollar = machine.dlperf / dph_total
    return {
        "id": machine.offer_id, "ask_contract_id": machine.offer_id, "bundle_id": machine.offer_id,
        "bundled_results": 0, "machine_id": machine.machine_id, "host_id": machine.host_id,
        "num_gpus": machine.num_gpus, "gpu_name": machine.gpu_name, "gpu_ram": machine.gpu_ram_mb,
        "gpu_total_ram": gpu_total_ram, "gpu_frac": 1.0, "gpu_arch": machine.gpu_arch,
        "gpu_lanes": machine.gpu_lanes, "gpu_mem_bw": machine.gpu_mem_bw, "gpu_max_power": machine.gpu_max_power,
        "gpu_max_temp": machine.gpu_max_temp, "gpu_display_active": machine.gpu_display_active,
        "compute_cap": machine.compute_cap, "cuda_max_good": machine.cuda_max_good,
        "driver_version": machine.driver_version, "driver_vers": machine.driver_vers, "bw_nvlink": machine.bw_nvlink,
        "cpu_name": machine.cpu_name, "cpu_arch": machine.cpu_arch, "cpu_cores": machine.cpu_cores,
        "cpu_cores_effective": machine.cpu_cores_effective, "cpu_ghz": machine.cpu_ghz,
        "cpu_ram": machine.cpu_ram_mb, "disk_space": machine.disk_space_gb, "disk_bw": machine.disk_bw,
        "disk_name": machine.disk_name, "inet_up": machine.inet_up, "inet_down": machine.inet_down,
        "inet_up_cost": machine.inet_up_cost, "inet_down_cost": machine.inet_down_cost,
        "direct_port_count": machine.direct_port_count, "pci_gen": machine.pci_gen, "pcie_bw": machine.pcie_bw,
        "mobo_name": machine.mobo_name, "os_version": machine.os_version, "has_avx": machine.has_avx,
        "dph_base": round(machine.dph_base, 6), "dph_total": round(dph_total, 6),
        "discounted_dph_total": round(discounted, 6), "min_bid": machine.min_bid,
        "storage_cost": machine.storage_cost, "storage_total_cost": round(storage, 6),
        "vram_costperhour": round(machine.dph_base / (gpu_total_ram / 1024), 6),
        "credit_discount_max": machine.credit_discount_max,
        "dlperf": machine.dlperf, "dlperf_per_dphtotal": round(per_dollar, 4),
        "total_flops": machine.total_flops, "flops_per_dphtotal": round(machine.total_flops / dph_total, 4),
        "score": round(per_dollar * machine.reliability**8 * (1.0 if machine.is_verified else 0.8), 4),
        "rentable": not rented, "rented": rented, "is_bid": pricing is PricingType.BID,
        "external": machine.external, "hosting_type": machine.hosting_type, "hostname": machine.hostname,
        "public_ipaddr": machine.public_ipaddr, "geolocation": machine.geolocation,
        "geolocode": machine.geolocode, "reliability": machine.reliability, "reliability2": machine.reliability,
        "reliability_mult": round(max(0.0, min(1.0, (machine.reliability - 0.9) * 10)), 4),
        "expected_reliability": machine.expected_reliability, "verification": machine.verification,
        "vericode": {"verified": 1, "unverified": 0}.get(machine.verification, -1),
        "static_ip": machine.static_ip, "vms_enabled": machine.vms_enabled, "is_vm_deverified": False,
        "start_date": machine.start_date, "end_date": machine.end_date,
        "duration": max(0.0, machine.end_date - now),
        "logo": "/static/logos/vastai_small2.png", "webpage": None, "resource_type": "gpu",
        "cluster_id": machine.cluster_id, "avail_vol_ask_id": None, "avail_vol_dph": None, "avail_vol_size": None,
        "nw_disk_min_bw": None, "nw_disk_max_bw": None, "nw_disk_avg_bw": None,
        "platform_fee": machine.platform_fee,
    }


def _offer_getter(column: str, *, now: float) -> Getter:
    if column == "datacenter":
        return lambda row: row["hosting_type"] == 1
    if column == "verified":
        return lambda row: row["verification"] == "verified"
    if column == "geolocation":
        return lambda row: str(row["geolocation"])[-2:].upper()
    if column == "duration":  # prepared rows are shared across moments: what is left is counted from now
        return lambda row: max(0.0, row["end_date"] - now)
    return operator.itemgetter(column)


def resolve_offer_column(name: str, *, sample: Row, now: float = 0.0) -> tuple[str, Getter, float]:
    """(canonical column, getter, value multiplier) for a query key; FilterError if the column is unknown."""
    column, scale = name, 1.0
    if column.lower().endswith("_gb") and column[:-3] in sample:
        column, scale = column[:-3], 1000.0
    column = ALIASES.get(column, column)
    if column not in sample and column not in ("datacenter", "verified"):
        raise FilterError(f"Unknown column '{name}'.", column=name)
    return column, _offer_getter(column, now=now), scale


def _offer_conditions(query: Mapping[str, Any], *, sample: Row, now: float) -> list[Condition]:
    result: list[Condition] = []
    for key, spec in query.items():
        if key in DIRECTIVES:
            continue
        column, getter, scale = resolve_offer_column(key, sample=sample, now=now)
        conditions = conditions_for(column, spec, getter, scale=scale)
        if column == "geolocation":
            conditions = [_upper_value(c) for c in conditions]
        result.extend(conditions)
    return result


def _upper_value(condition: Condition) -> Condition:
    value = condition.value
    if isinstance(value, list):
        value = [v.upper() if isinstance(v, str) and len(v) == 2 else v for v in value]
    elif isinstance(value, str) and len(value) == 2:
        value = value.upper()
    return Condition(column=condition.column, op=condition.op, value=value, getter=condition.getter)


def _storage_gb(query: Mapping[str, Any]) -> float:
    raw = query.get("allocated_storage", DEFAULT_STORAGE_GB)
    if isinstance(raw, Mapping):
        raw = next(iter(raw.values()), DEFAULT_STORAGE_GB)
    try:
        value = float(raw if raw is not None else DEFAULT_STORAGE_GB)
    except (TypeError, ValueError) as exc:
        raise FilterError(f"Invalid allocated_storage '{raw}'.", column="allocated_storage") from exc
    if value < 0:
        raise FilterError("allocated_storage must not be negative.", column="allocated_storage")
    return value


def _limit(query: Mapping[str, Any]) -> int | None:
    raw = query.get("limit")
    if raw is None:
        return None
    try:
        limit = int(float(raw))
    except (TypeError, ValueError) as exc:
        raise FilterError(f"Invalid limit '{raw}'.", column="limit") from exc
    return max(0, limit)


class OfferBook:
    """The offer rows of a world, built once per world change (what is rented, the pricing type, the storage asked)
    and searched over: a search filters and orders prepared rows instead of rebuilding an offer per machine."""

    MAX_PRICINGS = 8  # (type, storage) combinations kept; the CLI asks for a handful

    def __init__(self, machines: Iterable[Machine]) -> None:
        self._machines = tuple(machines)
        self._rented: frozenset[int] | None = None
        self._rows: dict[tuple[PricingType, float], list[dict[str, Any]]] = {}
        self._kinds: dict[tuple[PricingType, float, str], type | None] = {}
        self._texts: dict[int, str] = {}  # id of a prepared row -> its JSON without the closing brace

    def search(self, query: Mapping[str, Any], *, rented: frozenset[int], now: float) -> list[dict[str, Any]]:
        """Offers that match ``query`` (fresh dicts, ``duration`` as of ``now``), ordered and limited as it asks."""
        return [{**row, "duration": max(0.0, row["end_date"] - now)}
                for row in self._select(query, rented=rented, now=now)]

    def search_json(self, query: Mapping[str, Any], *, rented: frozenset[int], now: float) -> str:
        """``{"offers": [...]}`` as JSON text for the same search; each row is serialised once per world change
        (``duration`` is appended as of ``now``)."""
        rows = self._select(query, rented=rented, now=now)
        texts = self._texts
        parts = []
        for row in rows:
            text = texts.get(id(row))
            if text is None:
                text = texts[id(row)] = json.dumps({k: v for k, v in row.items() if k != "duration"})[:-1]
            parts.append(f'{text}, "duration": {max(0.0, row["end_date"] - now)!r}}}')
        return '{"offers": [' + ", ".join(parts) + "]}"

    def _prepared(self, pricing: PricingType, storage_gb: float, rented: frozenset[int]) -> list[dict[str, Any]]:
        if rented != self._rented or ((pricing, storage_gb) not in self._rows and len(self._rows) >= self.MAX_PRICINGS):
            self._rented = rented
            self._rows.clear()
            self._kinds.clear()
            self._texts.clear()
        rows = self._rows.get((pricing, storage_gb))
        if rows is None:
            rows = [offer_row(m, now=0.0, rented=m.machine_id in rented, pricing=pricing, storage_gb=storage_gb)
                    for m in self._machines]
            self._rows[(pricing, storage_gb)] = rows
        return rows

    def _kind(self, rows: list[dict[str, Any]], condition: Condition, key: tuple[PricingType, float]) -> type | None:
        cache_key = (*key, condition.column)
        if cache_key not in self._kinds:
            self._kinds[cache_key] = column_kind([condition.getter(row) for row in rows])
        return self._kinds[cache_key]

    def _select(self, query: Mapping[str, Any], *, rented: frozenset[int], now: float) -> list[dict[str, Any]]:
        if not isinstance(query, Mapping):
            raise FilterError("The search query must be a JSON object.")
        pricing, storage_gb = pricing_type(query.get("type")), _storage_gb(query)
        rows = self._prepared(pricing, storage_gb, rented)
        if not rows:
            return []
        sample = rows[0]
        tests = [fast_predicate(c, self._kind(rows, c, (pricing, storage_gb)))
                 for c in _offer_conditions(query, sample=sample, now=now)]

        def resolve(name: str) -> Getter:
            return resolve_offer_column(name, sample=sample, now=now)[1]

        # id last: equal keys still come back in one stable order
        order = parse_order(query.get("order", [["score", "desc"]]), resolve=resolve) + parse_order(
            [["id", "asc"]], resolve=resolve)
        hits = [row for row in rows if row["disk_space"] >= storage_gb]
        for test in tests:  # one pass per condition: the list shrinks as it goes
            hits = [row for row in hits if test(row)]
        ordered = fast_sort(hits, order)
        limit = _limit(query)
        return ordered if limit is None else ordered[:limit]


def search_offers(machines: Iterable[tuple[Machine, bool]], query: Mapping[str, Any], *,
                  now: float) -> list[dict[str, Any]]:
    """Offers (``(machine, is_rented)`` pairs) that match ``query``, ordered and limited as it asks."""
    pairs = list(machines)
    rented = frozenset(machine.machine_id for machine, is_rented in pairs if is_rented)
    return OfferBook(machine for machine, _ in pairs).search(query, rented=rented, now=now)
