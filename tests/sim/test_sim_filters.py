"""Search semantics of docs/api-notes.md §3.1 and §4: coercion, multipliers, in/notin, null, virtual columns, aliases,
order, limit and pricing type — each checked against an independent predicate over the same rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from vastui.sim.filters import FilterError
from vastui.sim.offers import offer_row, search_offers
from vastui.sim.world import World, generate_world

NOW = 1_800_000_000.0
Row = dict[str, Any]


@pytest.fixture(scope="module")
def world() -> World:
    return generate_world(3, now=NOW)


def _pairs(world: World) -> list[tuple[Any, bool]]:
    return [(m, m.rented) for m in world.machines]


def _all_rows(world: World) -> list[Row]:
    return [offer_row(m, now=NOW, rented=m.rented) for m in world.machines]


CASES: list[tuple[str, dict[str, Any], Callable[[Row], bool]]] = [
    ("string number eq", {"num_gpus": {"eq": "1"}}, lambda r: r["num_gpus"] == 1),
    ("json number gte", {"num_gpus": {"gte": 2}}, lambda r: r["num_gpus"] >= 2),
    ("merged range", {"num_gpus": {"gte": "2", "lte": "4"}}, lambda r: 2 <= r["num_gpus"] <= 4),
    ("float gt", {"reliability": {"gt": "0.98"}}, lambda r: r["reliability"] > 0.98),
    ("alias reliability2", {"reliability2": {"gt": "0.98"}}, lambda r: r["reliability"] > 0.98),
    ("neq", {"gpu_name": {"neq": "RTX 4090"}}, lambda r: r["gpu_name"] != "RTX 4090"),
    ("noteq", {"gpu_name": {"noteq": "RTX 4090"}}, lambda r: r["gpu_name"] != "RTX 4090"),
    ("in list", {"gpu_name": {"in": ["RTX 4090", "RTX 3090"]}}, lambda r: r["gpu_name"] in ("RTX 4090", "RTX 3090")),
    ("notin list", {"gpu_name": {"notin": ["RTX 4090", "RTX 3090"]}},
     lambda r: r["gpu_name"] not in ("RTX 4090", "RTX 3090")),
    ("nin list", {"num_gpus": {"nin": ["1", "2"]}}, lambda r: r["num_gpus"] not in (1, 2)),
    ("in strings vs bool", {"verified": {"in": ["true"]}}, lambda r: r["verification"] == "verified"),
    ("MB multiplier applied by client", {"gpu_ram": {"gte": 24000.0}}, lambda r: r["gpu_ram"] >= 24000),
    ("GB suffix", {"cpu_ram_GB": {"gt": "64"}}, lambda r: r["cpu_ram"] > 64000),
    ("cpu_ram", {"cpu_ram": {"gt": 64000.0}}, lambda r: r["cpu_ram"] > 64000),
    ("gpu_total_ram lte", {"gpu_total_ram": {"lte": 80000.0}}, lambda r: r["gpu_total_ram"] <= 80000),
    ("alias gpu_totalram", {"gpu_totalram": {"lte": 80000.0}}, lambda r: r["gpu_total_ram"] <= 80000),
    ("disk not scaled", {"disk_space": {"gt": "1000"}}, lambda r: r["disk_space"] > 1000),
    ("duration seconds", {"duration": {"gt": 30 * 86400.0}}, lambda r: r["end_date"] - NOW > 30 * 86400),
    ("datacenter virtual", {"datacenter": {"eq": True}}, lambda r: r["hosting_type"] == 1),
    ("datacenter false", {"datacenter": {"eq": False}}, lambda r: r["hosting_type"] != 1),
    ("verified virtual", {"verified": {"eq": True}}, lambda r: r["verification"] == "verified"),
    ("verified string", {"verified": {"eq": "false"}}, lambda r: r["verification"] != "verified"),
    ("external", {"external": {"eq": False}}, lambda r: not r["external"]),
    ("rentable", {"rentable": {"eq": True}}, lambda r: r["rentable"]),
    ("rented", {"rented": {"eq": True}}, lambda r: r["rented"]),
    ("geolocation in cc", {"geolocation": {"in": ["US", "SE"]}}, lambda r: r["geolocation"][-2:] in ("US", "SE")),
    ("geolocation notin", {"geolocation": {"notin": ["CN", "VN"]}},
     lambda r: r["geolocation"][-2:] not in ("CN", "VN")),
    ("geolocation eq lower", {"geolocation": {"eq": "us"}}, lambda r: r["geolocation"].endswith("US")),
    ("driver_version alias", {"driver_version": {"gte": 550000000}}, lambda r: r["driver_vers"] >= 550_000_000),
    ("cuda alias", {"cuda_vers": {"gte": "12.4"}}, lambda r: r["cuda_max_good"] >= 12.4),
    ("dph alias", {"dph": {"lt": "1.5"}}, lambda r: r["dph_total"] < 1.5),
    ("dphtotal alias", {"dphtotal": {"lt": "1.5"}}, lambda r: r["dph_total"] < 1.5),
    ("dlperf_usd alias", {"dlperf_usd": {"gt": "300"}}, lambda r: r["dlperf_per_dphtotal"] > 300),
    ("compute_cap string", {"compute_cap": {"gte": "890"}}, lambda r: r["compute_cap"] >= 890),
    ("has_avx 1", {"has_avx": {"eq": "1"}}, lambda r: r["has_avx"] == 1),
    ("static_ip bool", {"static_ip": {"eq": True}}, lambda r: r["static_ip"] is True),
    ("bare value means eq", {"num_gpus": 8}, lambda r: r["num_gpus"] == 8),
    ("null eq", {"cluster_id": {"eq": None}}, lambda r: r["cluster_id"] is None),
    ("null neq", {"cluster_id": {"neq": None}}, lambda r: r["cluster_id"] is not None),
    ("in with null", {"cluster_id": {"in": [None]}}, lambda r: r["cluster_id"] is None),
    ("allocated_storage", {"allocated_storage": 2000.0}, lambda r: r["disk_space"] >= 2000),
    ("target_reliability", {"target_reliability": {"gte": "0.99"}}, lambda r: r["expected_reliability"] >= 0.99),
]


@pytest.mark.parametrize(("query", "predicate"), [(q, p) for _, q, p in CASES], ids=[c[0] for c in CASES])
def test_filter_matches_reference_predicate(world: World, query: dict[str, Any],
                                            predicate: Callable[[Row], bool]) -> None:
    got = {row["id"] for row in search_offers(_pairs(world), query, now=NOW)}
    storage = float(query.get("allocated_storage", 5.0))
    expected = {row["id"] for row in _all_rows(world) if predicate(row) and row["disk_space"] >= storage}
    assert got == expected
    assert 0 < len(expected) < len(world.machines), "the case must actually filter"


def test_cli_captured_query_is_honoured(world: World) -> None:
    """The exact body the official CLI sent in docs/api-notes.md §4."""
    query = {"verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True},
             "gpu_name": {"eq": "RTX 4090"}, "num_gpus": {"eq": "1"}, "reliability": {"gt": "0.9"},
             "gpu_ram": {"gte": 24000.0}, "geolocation": {"notin": ["CN"]}, "cuda_max_good": {"gte": "12.1"},
             "order": [["dlperf_per_dphtotal", "desc"]], "type": "on-demand", "allocated_storage": 5.0}
    offers = search_offers(_pairs(world), query, now=NOW)
    assert offers
    for o in offers:
        assert o["gpu_name"] == "RTX 4090" and o["num_gpus"] == 1 and o["reliability"] > 0.9
        assert o["verification"] == "verified" and o["rentable"] and not o["external"]
    values = [o["dlperf_per_dphtotal"] for o in offers]
    assert values == sorted(values, reverse=True)


def test_order_multiple_keys_and_limit(world: World) -> None:
    query = {"order": [["num_gpus", "desc"], ["dph_total", "asc"]], "limit": "7"}
    offers = search_offers(_pairs(world), query, now=NOW)
    assert len(offers) == 7
    keys = [(-o["num_gpus"], o["dph_total"]) for o in offers]
    assert keys == sorted(keys)
    everything = search_offers(_pairs(world), {"order": [["num_gpus", "desc"], ["dph_total", "asc"]]}, now=NOW)
    assert [o["id"] for o in everything[:7]] == [o["id"] for o in offers]
    assert len(everything) == len(world.machines)


def test_default_order_is_score_descending(world: World) -> None:
    scores = [o["score"] for o in search_offers(_pairs(world), {}, now=NOW)]
    assert scores == sorted(scores, reverse=True)


def test_pricing_type_bid_and_reserved(world: World) -> None:
    machine = world.machines[0]
    on_demand = offer_row(machine, now=NOW, rented=False)
    (bid,) = [o for o in search_offers(_pairs(world), {"type": "bid"}, now=NOW) if o["id"] == machine.offer_id]
    (reserved,) = [o for o in search_offers(_pairs(world), {"type": "reserved"}, now=NOW)
                   if o["id"] == machine.offer_id]
    assert bid["is_bid"] and not on_demand["is_bid"]
    assert bid["dph_total"] == pytest.approx(machine.min_bid + on_demand["storage_total_cost"], abs=1e-6)
    assert reserved["discounted_dph_total"] < on_demand["dph_total"]
    assert search_offers(_pairs(world), {"type": "interruptible", "limit": 1}, now=NOW)[0]["is_bid"]


def test_allocated_storage_is_priced_in(world: World) -> None:
    machine = next(m for m in world.machines if m.disk_space_gb > 200)
    small = offer_row(machine, now=NOW, rented=False, storage_gb=5)
    (big,) = [o for o in search_offers([(machine, False)], {"allocated_storage": 200.0}, now=NOW)]
    expected_extra = machine.storage_cost * 195 / 720
    assert big["dph_total"] - small["dph_total"] == pytest.approx(expected_extra, rel=1e-3)


@pytest.mark.parametrize("query", [
    {"no_such_column": {"eq": 1}},
    {"num_gpus": {"approx": 1}},
    {"num_gpus": {"gt": "many"}},
    {"verified": {"eq": "perhaps"}},
    {"order": [["no_such_column", "asc"]]},
    {"order": [["num_gpus", "sideways"]]},
    {"type": "spot"},
    {"limit": "lots"},
])
def test_bad_queries_are_refused_with_the_column(world: World, query: dict[str, Any]) -> None:
    with pytest.raises(FilterError) as info:
        search_offers(_pairs(world), query, now=NOW)
    assert info.value.column
