"""The vocabulary of the offer search language: the fields the official CLI knows (``offers_fields``), their kinds,
its aliases and unit multipliers, the sortable columns, the default filters, the offer types and the operators.

``vastui.vast.query`` parses with it; docs/api-notes.md §4 describes the language, §5 the fields and their units.
"""

from __future__ import annotations

from collections.abc import Mapping

# The field names the official CLI knows (``offers_fields``), and the aliases it rewrites before storing.
NUMERIC_FIELDS = frozenset({
    "bw_nvlink", "cluster_id", "compute_cap", "cpu_cores", "cpu_cores_effective", "cpu_ghz", "cpu_ram",
    "cuda_max_good", "direct_port_count", "disk_bw", "disk_space", "dlperf", "dlperf_per_dphtotal", "dph_total",
    "duration", "flops_per_dphtotal", "gpu_frac", "gpu_max_power", "gpu_max_temp", "gpu_mem_bw", "gpu_ram",
    "gpu_total_ram", "host_id", "id", "inet_down", "inet_down_cost", "inet_up", "inet_up_cost", "machine_id",
    "min_bid", "num_gpus", "pci_gen", "pcie_bw", "reliability", "storage_cost", "total_flops",
})
BOOL_FIELDS = frozenset({
    "datacenter", "external", "gpu_display_active", "has_avx", "rentable", "rented", "static_ip", "verified",
    "vms_enabled",
})
STRING_FIELDS = frozenset({
    "cpu_arch", "geolocation", "gpu_arch", "gpu_name", "mobo_name", "ubuntu_version", "verification",
})
VERSION_FIELD = "driver_version"
KNOWN_FIELDS = NUMERIC_FIELDS | BOOL_FIELDS | STRING_FIELDS | {VERSION_FIELD}
FIELD_ALIASES: Mapping[str, str] = {
    "cuda_vers": "cuda_max_good",
    "display_active": "gpu_display_active",
    "dlperf_usd": "dlperf_per_dphtotal",
    "dph": "dph_total",
    "flops_usd": "flops_per_dphtotal",
}
# Values the user writes in GB (or days) that the API wants in MB (or seconds).
FIELD_MULTIPLIERS: Mapping[str, float] = {"cpu_ram": 1000, "gpu_ram": 1000, "gpu_total_ram": 1000,
                                          "duration": 24.0 * 60.0 * 60.0}
# Offer columns that can be sorted on besides the filterable ones.
ORDER_ONLY_FIELDS = frozenset({"score", "dph_base", "discounted_dph_total", "start_date", "end_date"})
ORDER_FIELDS = KNOWN_FIELDS | ORDER_ONLY_FIELDS

DEFAULT_FILTERS: Mapping[str, Mapping[str, object]] = {
    "verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True},
}
OFFER_TYPES: Mapping[str, str] = {"on-demand": "on-demand", "bid": "bid", "interruptible": "bid",
                                  "reserved": "reserved"}

OPERATORS: Mapping[str, str] = {
    "=": "eq", "==": "eq", "eq": "eq",
    "!=": "neq", "neq": "neq", "noteq": "neq", "not eq": "neq",
    ">": "gt", "gt": "gt", ">=": "gte", "gte": "gte",
    "<": "lt", "lt": "lt", "<=": "lte", "lte": "lte",
    "in": "in", "notin": "notin", "nin": "notin", "not in": "notin",
}
WILDCARDS = frozenset({"any", "*", "?"})
