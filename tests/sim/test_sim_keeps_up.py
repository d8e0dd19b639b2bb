"""What keeps the simulator fast without changing its answers: prepared offer rows, a bounded request log, and
TCP_NODELAY on every accepted connection. Speed itself is measured in benchmarks/, never asserted here."""

from __future__ import annotations

import random
import socket
from typing import Any

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.sim.factory import build_market
from vastui.sim.filters import FilterError, matches, parse_order, sort_rows
from vastui.sim.offers import (
    DEFAULT_STORAGE_GB,
    OfferBook,
    _limit,
    _offer_conditions,
    offer_row,
    pricing_type,
    resolve_offer_column,
)
from vastui.sim.request_log import RequestLog, RequestRecord
from vastui.sim.server import SimServer
from vastui.sim.world import World, generate_world

NOW = 1_800_000_000.0
KEY = "sk-keeps-up"


@pytest.fixture(scope="module")
def world() -> World:
    return generate_world(5, now=NOW)


def _reference(world: World, query: dict[str, Any], *, rented: frozenset[int], now: float) -> list[dict[str, Any]]:
    """The search the simulator did before prepared rows: every row rebuilt, each condition coerced per row."""
    storage = float(query.get("allocated_storage", DEFAULT_STORAGE_GB))
    rows = [offer_row(m, now=now, rented=m.machine_id in rented, pricing=pricing_type(query.get("type")),
                      storage_gb=storage) for m in world.machines]
    conditions = _offer_conditions(query, sample=rows[0], now=now)
    getter = {name: resolve_offer_column(name, sample=rows[0], now=now)[1] for name in rows[0]}

    def resolve(name: str) -> Any:
        return getter.get(name) or resolve_offer_column(name, sample=rows[0], now=now)[1]

    keys = parse_order(query.get("order", [["score", "desc"]]), resolve=resolve) + parse_order([["id", "asc"]],
                                                                                               resolve=resolve)
    hits = sort_rows([r for r in rows if r["disk_space"] >= storage and matches(r, conditions)], keys)
    limit = _limit(query)
    return hits if limit is None else hits[:limit]


FIELDS: list[tuple[str, Any]] = [
    ("num_gpus", lambda r: str(r.choice([1, 2, 4, 8]))), ("reliability", lambda r: f"{r.uniform(0.9, 1):.3f}"),
    ("gpu_ram", lambda r: float(r.choice([8000, 16000, 24000, 48000]))), ("dph_total", lambda r: r.uniform(0.1, 3)),
    ("gpu_name", lambda r: r.choice(["RTX 4090", "RTX 3090", "H100 SXM"])), ("verified", lambda r: r.choice(
        [True, "true", False])), ("datacenter", lambda r: r.choice([True, False])), ("duration", lambda r: 86400.0 *
        r.choice([1, 30, 200])), ("geolocation", lambda r: r.choice(["US", "se", "DE"])), ("inet_down", lambda r: "200"),
    ("cuda_max_good", lambda r: "12.1"), ("static_ip", lambda r: r.choice([True, None])),
]
OPS = ["eq", "neq", "gt", "gte", "lt", "lte", "in", "notin"]
ORDER_COLUMNS = ["score", "dph_total", "num_gpus", "reliability", "gpu_name", "duration", "dlperf_per_dphtotal",
                 "geolocation", "static_ip", "cluster_id"]


def _random_query(rng: random.Random) -> dict[str, Any]:
    query: dict[str, Any] = {}
    for name, draw in rng.sample(FIELDS, rng.randint(0, 4)):
        op = rng.choice(OPS)
        value = draw(rng)
        query[name] = {op: [str(value), str(draw(rng))] if op in ("in", "notin") else value}
    query["order"] = [[rng.choice(ORDER_COLUMNS), rng.choice(["asc", "desc"])] for _ in range(rng.randint(1, 3))]
    query["type"] = rng.choice(["on-demand", "bid", "reserved"])
    query["allocated_storage"] = rng.choice([5.0, 5.0, 100.0])
    if rng.random() < 0.5:
        query["limit"] = rng.randint(1, 100)
    return query


def test_prepared_rows_answer_exactly_as_rebuilding_every_offer(world: World) -> None:
    rng = random.Random(11)
    book = OfferBook(world.machines)
    rented = frozenset(m.machine_id for m in world.machines if m.rented)
    compared = 0
    for _ in range(150):
        query = _random_query(rng)
        try:
            expected = _reference(world, query, rented=rented, now=NOW)
        except FilterError:
            continue
        got = book.search(query, rented=rented, now=NOW)
        assert got == expected, query
        compared += 1
    assert compared > 100


def test_the_book_follows_rentals_and_the_clock(world: World) -> None:
    book = OfferBook(world.machines)
    free = next(m for m in world.machines if not m.rented)
    query = {"rentable": {"eq": True}, "order": [["id", "asc"]]}
    before = book.search(query, rented=frozenset(), now=NOW)
    assert free.offer_id in {row["id"] for row in before}
    after = book.search(query, rented=frozenset({free.machine_id}), now=NOW + 3600)
    assert free.offer_id not in {row["id"] for row in after}
    row_then = next(r for r in before if r["id"] != free.offer_id and r["duration"] > 3600)
    row_now = next(r for r in after if r["id"] == row_then["id"])
    assert row_now["duration"] == pytest.approx(row_then["duration"] - 3600)
    row_now["dph_total"] = -1.0  # callers get their own dicts: the prepared rows stay intact
    assert book.search(query, rented=frozenset({free.machine_id}), now=NOW)[0]["dph_total"] > 0


def test_a_bad_value_is_refused_even_when_no_row_reaches_it(world: World) -> None:
    book = OfferBook(world.machines)
    with pytest.raises(FilterError) as info:
        book.search({"num_gpus": {"eq": "1000"}, "reliability": {"gt": "high"}}, rented=frozenset(), now=NOW)
    assert info.value.column == "reliability"


def _record(i: int) -> RequestRecord:
    return RequestRecord(method="GET", path=f"/api/v0/instances/{i}/", query="", status=200, at=float(i))


def test_the_request_log_keeps_the_newest_and_counts_the_dropped() -> None:
    log = RequestLog(capacity=3)
    for i in range(5):
        log.append(_record(i))
    assert [r.at for r in log] == [2.0, 3.0, 4.0]
    assert (len(log), log.total, log.dropped) == (3, 5, 2)
    assert log[-1].at == 4.0 and [r.at for r in log[:2]] == [2.0, 3.0]
    mark = log.total
    assert log.since(mark) == []
    log.append(_record(5))
    assert [r.at for r in log.since(mark)] == [5.0]
    assert [r.at for r in log.since(0)] == [3.0, 4.0, 5.0]  # what was dropped cannot come back
    with pytest.raises(ValueError):
        RequestLog(capacity=0)


async def test_the_market_log_is_bounded_over_real_requests() -> None:
    market = build_market(7, clock=FakeClock(), api_key=KEY, n_machines=20)
    market.request_log = RequestLog(capacity=10)
    transport = httpx.ASGITransport(app=__import__("vastui.sim.app", fromlist=["create_app"]).create_app(market))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim.test") as api:
        for _ in range(25):
            await api.get("/api/v0/gpu_names/unique/")
    assert len(market.request_log) == 10 and market.request_log.dropped == 15


async def test_accepted_connections_have_tcp_nodelay() -> None:
    """Without it a kept-alive reply waits for Nagle's algorithm and the client's delayed ACK (~40 ms a request)."""
    market = build_market(7, clock=FakeClock(), api_key=KEY, n_machines=20)
    async with SimServer(market, port=0, poll=False) as server:
        async with httpx.AsyncClient(base_url=server.url) as client:
            r = await client.get("/api/v0/gpu_names/unique/")
            assert r.status_code == 200
            state = server._server.server_state  # type: ignore[union-attr]
            sockets = [conn.transport.get_extra_info("socket") for conn in state.connections]
            assert sockets
            assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets)


def test_the_json_answer_is_the_search_serialised(world: World) -> None:
    """The search route answers from rows serialised once; what it sends must be exactly the search's rows."""
    import json

    book = OfferBook(world.machines)
    rented = frozenset(m.machine_id for m in world.machines if m.rented)
    for query in ({}, {"num_gpus": {"eq": "1"}, "order": [["dph_total", "asc"]], "limit": 7},
                  {"type": "bid", "allocated_storage": 50.0, "duration": {"gte": 86400.0}}):
        for now in (NOW, NOW + 86_400.5):
            text = book.search_json(query, rented=rented, now=now)
            assert json.loads(text) == {"offers": book.search(query, rented=rented, now=now)}
