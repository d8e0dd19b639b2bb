"""The simulated API over ASGI: wire conventions (§1, §8), error shapes, pagination, every renter endpoint, chaos,
and the request log (which must never hold the key)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.sim.realism import Realism

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()


KEY = "sk-sim-test-key-123"
AUTH = {"Authorization": f"Bearer {KEY}"}
ORDER_ID = json.dumps([{"col": "id", "dir": "asc"}])


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    return build_market(7, clock=clock, api_key=KEY, initial_credit_usd=1000.0, realism=KIND)


@pytest.fixture
async def api(market: Market) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(market)),
                                 base_url="http://sim.test") as client:
        yield client


async def _rentable(api: httpx.AsyncClient, n: int, **extra: Any) -> list[dict[str, Any]]:
    query = {"rentable": {"eq": True}, "order": [["dph_total", "asc"]], "limit": n, **extra}
    r = await api.post("/api/v0/bundles/", json=query, headers=AUTH)
    offers: list[dict[str, Any]] = r.json()["offers"]
    assert len(offers) == n
    return offers


async def _rent(api: httpx.AsyncClient, offer_id: int, *, label: str = "t") -> int:
    r = await api.put(f"/api/v0/asks/{offer_id}/", json={"client_id": "me", "image": "pytorch/pytorch",
                                                          "disk": 10, "label": label}, headers=AUTH)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True and isinstance(body["instance_api_key"], str)
    return int(body["new_contract"])


async def test_auth_and_public_paths(api: httpx.AsyncClient) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        r = await api.get("/api/v0/users/current", headers=headers)
        assert r.status_code == 401
        assert r.json() == {"success": False, "error": "auth_error", "msg": "Invalid user key"}
    r = await api.get("/api/v0/gpu_names/unique/")
    assert r.status_code == 200 and "RTX 4090" in r.json()["gpu_names"]
    r = await api.get("/api/v0/users/current", headers=AUTH)
    assert r.status_code == 200 and "api_key" not in r.json() and r.json()["credit"] == 1000.0


async def test_wire_conventions(api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v0/bundles/", json={"limit": 1}, headers=AUTH)
    assert r.headers["content-type"] == "application/json"  # exactly: the CLI compares verbatim
    r = await api.get("http://sim.test//api/v0/users/current", headers=AUTH)
    assert r.status_code == 200
    r = await api.get("/api/v0/users/current/", headers=AUTH)  # trailing slashes are part of the contract
    assert r.status_code == 404 and r.json()["success"] is False and r.headers["content-type"] == "application/json"
    r = await api.post("/api/v0/bundles", json={}, headers=AUTH)
    assert r.status_code == 404
    r = await api.get("/api/v0/bundles/", headers=AUTH)
    assert r.status_code == 405 and r.json()["error"] == "method_not_allowed"
    r = await api.post("/api/v0/bundles/", content=b"{not json", headers=AUTH)
    assert r.status_code == 400 and r.json()["error"] == "invalid_json"
    r = await api.post("/api/v0/bundles/", json={"num_gpus": {"gt": "lots"}}, headers=AUTH)
    assert r.status_code == 400 and r.json()["error"] == "invalid_query" and "num_gpus" in r.json()["msg"]


async def test_search_new_endpoint_wraps_the_query(api: httpx.AsyncClient) -> None:
    q = {"gpu_name": {"eq": "RTX 4090"}, "order": [["dph_total", "asc"]], "limit": 4}
    old = (await api.post("/api/v0/bundles/", json=q, headers=AUTH)).json()["offers"]
    new = await api.put("/api/v0/search/asks/", json={"select_cols": ["*"], "q": q}, headers=AUTH)
    assert new.headers["content-type"] == "application/json"
    assert [o["id"] for o in new.json()["offers"]] == [o["id"] for o in old] and len(old) == 4
    cols = await api.put("/api/v0/search/asks/", json={"select_cols": ["id", "dph_total"], "q": q}, headers=AUTH)
    assert set(cols.json()["offers"][0]) == {"id", "dph_total"}


async def test_create_show_destroy_and_double_rent(api: httpx.AsyncClient, market: Market) -> None:
    (offer,) = await _rentable(api, 1)
    instance_id = await _rent(api, offer["id"])
    r = await api.put(f"/api/v0/asks/{offer['id']}/", json={"image": "x"}, headers=AUTH)
    assert r.status_code == 400 and r.json()["error"] == "no_such_ask" and r.json()["success"] is False
    r = await api.get(f"/api/v0/instances/{instance_id}/", params={"owner": "me"}, headers=AUTH)
    row = r.json()["instances"]
    assert row["id"] == instance_id and row["actual_status"] == "loading" and row["extra_env"] == []
    r = await api.request("DELETE", f"/api/v0/instances/{instance_id}/", content=b"{}",
                          headers={**AUTH, "Content-Type": "application/json"})
    assert r.json() == {"success": True}
    r = await api.get(f"/api/v0/instances/{instance_id}/", params={"owner": "me"}, headers=AUTH)
    assert r.json() == {"instances": None}
    r = await api.request("DELETE", f"/api/v0/instances/{instance_id}/", json={}, headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "no_such_instance"


async def test_listing_pages_over_more_than_25_instances(api: httpx.AsyncClient, market: Market) -> None:
    offers = await _rentable(api, 31)
    ids = [await _rent(api, o["id"], label="odd" if i % 2 else "even") for i, o in enumerate(offers)]
    seen: list[int] = []
    token: str | None = None
    pages = 0
    while True:
        params = {"select_filters": "{}", "order_by": ORDER_ID, "limit": "25"}
        if token:
            params["after_token"] = token
        body = (await api.get("/api/v1/instances/", params=params, headers=AUTH)).json()
        pages += 1
        seen += [row["id"] for row in body["instances"]]
        if pages == 1:
            assert body["total_instances"] == 31 and body["label_counts"] == {"even": 16, "odd": 15}
            assert len(body["instances"]) == 25
            # a destroy between pages must not shift anything: keyset tokens, not offsets
            await api.request("DELETE", f"/api/v0/instances/{ids[3]}/", json={}, headers=AUTH)
        token = body["next_token"]
        if not token:
            break
    assert body["total_instances"] == 30
    assert pages == 2 and seen == ids  # every instance once, in id order, none skipped
    params = {"select_filters": json.dumps({"label": {"in": ["odd", None]}}),
              "order_by": json.dumps([{"col": "id", "dir": "desc"}]), "limit": "100",
              "select_cols": json.dumps(["id", "label"])}
    body = (await api.get("/api/v1/instances/", params=params, headers=AUTH)).json()
    assert len(body["instances"]) == 14 and body["next_token"] is None  # limit 100 clamps to 25 > 14 odd left
    assert [r["id"] for r in body["instances"]] == sorted((r["id"] for r in body["instances"]), reverse=True)
    assert all(set(r) == {"id", "label"} and r["label"] == "odd" for r in body["instances"])
    body = (await api.get("/api/v1/instances/", params={"limit": "100"}, headers=AUTH)).json()
    assert len(body["instances"]) == 25 and body["next_token"]
    bad = await api.get("/api/v1/instances/", params={"after_token": "garbage!"}, headers=AUTH)
    assert bad.status_code == 400
    filters = (await api.get("/api/v0/instances/filters/", headers=AUTH)).json()["filters"]
    assert filters and set(filters[0]) == {"actual_status", "verification", "gpu_name"}


async def test_state_label_bulk_reboot_recycle(api: httpx.AsyncClient, market: Market, clock: FakeClock) -> None:
    a, b = [await _rent(api, o["id"]) for o in await _rentable(api, 2)]
    clock.advance(86400)
    r = await api.put(f"/api/v0/instances/{a}/", json={"label": "x", "state": "stopped"}, headers=AUTH)
    assert r.json() == {"success": True}
    row = (await api.get(f"/api/v0/instances/{a}/", headers=AUTH)).json()["instances"]
    assert row["label"] == "x" and row["actual_status"] == "stopped"
    r = await api.put("/api/v0/instances/", json={"state": "running", "ids": [a, b]}, headers=AUTH)
    assert r.json() == {"success": True}
    assert market.instance_state(a).status.value == "loading"  # type: ignore[union-attr]
    r = await api.put(f"/api/v0/instances/{b}/", json={}, headers=AUTH)
    assert r.status_code == 400
    assert (await api.put(f"/api/v0/instances/reboot/{b}/", json={}, headers=AUTH)).json() == {"success": True}
    assert (await api.put(f"/api/v0/instances/recycle/{b}/", json={}, headers=AUTH)).json() == {"success": True}
    r = await api.request("DELETE", "/api/v0/instances/", json={"instance_ids": [a, b]}, headers=AUTH)
    assert r.json() == {"success": True} and market.instance_ids() == []


async def test_prepay_deposit_bid_transfer(api: httpx.AsyncClient, market: Market) -> None:
    (offer,) = await _rentable(api, 1)
    instance_id = await _rent(api, offer["id"])
    r = (await api.put(f"/api/v0/instances/prepay/{instance_id}/", json={"amount": 10.0}, headers=AUTH)).json()
    assert r["success"] is True and r["timescale"] > 0 and 0 <= r["discount_rate"] <= 0.3
    r = (await api.get(f"/api/v0/instances/balance/{instance_id}/", params={"owner": "me"}, headers=AUTH)).json()
    assert r["refundable_deposit"] == pytest.approx(10.0)
    r = await api.put(f"/api/v0/instances/bid_price/{instance_id}/", json={"client_id": "me", "price": 1},
                      headers=AUTH)
    assert r.status_code == 400 and r.json()["error"] == "not_interruptible"
    r = (await api.put("/api/v0/commands/transfer_credit/", json={"sender": "me", "recipient": "a@b",
                                                                  "amount": 5.0}, headers=AUTH)).json()
    assert r["success"] is True
    r = (await api.put("/api/v0/commands/transfer_credit/", json={"sender": "me", "recipient": "a@b",
                                                                  "amount": 1e9}, headers=AUTH)).json()
    assert r["success"] is False and "Insufficient" in r["msg"]
    pulled_usd = market.charges_of(instance_id).bandwidth_usd   # the image pull's download, paid at creation
    assert (await api.get("/api/v0/users/current", headers=AUTH)).json()["credit"] == pytest.approx(985.0 - pulled_usd)


async def test_logs_result_url_is_unauthenticated_and_ready_after_a_second(api: httpx.AsyncClient,
                                                                          clock: FakeClock) -> None:
    (offer,) = await _rentable(api, 1)
    instance_id = await _rent(api, offer["id"])
    body = (await api.put(f"/api/v0/instances/request_logs/{instance_id}/", json={"tail": "1"},
                          headers=AUTH)).json()
    url = body["result_url"]
    assert url.startswith("http://sim.test/_results/")
    assert (await api.get(url)).status_code == 404
    clock.advance(1.5)
    r = await api.get(url)
    assert r.status_code == 200 and len(r.text.strip().splitlines()) == 1 and "Pulling image" in r.text
    full = (await api.put(f"/api/v0/instances/request_logs/{instance_id}/",
                          json={"filter": "created", "daemon_logs": "true"}, headers=AUTH)).json()
    clock.advance(1.5)
    text = (await api.get(full["result_url"])).text
    assert "created" in text and all("created" in line for line in text.strip().splitlines())


async def test_ssh_key_endpoints(api: httpx.AsyncClient) -> None:
    created = (await api.post("/api/v0/ssh/", json={"ssh_key": "ssh-ed25519 AAAAone a@b"}, headers=AUTH)).json()
    key_id = created["id"]
    assert created["success"] and created["key"] == created["public_key"] == "ssh-ed25519 AAAAone a@b"
    r = await api.put(f"/api/v0/ssh/{key_id}/", json={"id": key_id, "ssh_key": "ssh-ed25519 AAAAtwo"},
                      headers=AUTH)
    assert r.json()["key"] == "ssh-ed25519 AAAAtwo"
    (row,) = (await api.get("/api/v0/ssh/", headers=AUTH)).json()
    # the documented row: {id, user_id, key, created_at (a date-time string), deleted_at}
    assert row["id"] == key_id and row["key"] == "ssh-ed25519 AAAAtwo" and row["deleted_at"] is None
    assert isinstance(row["user_id"], int) and dt.datetime.fromisoformat(row["created_at"]).tzinfo is not None
    assert (await api.request("DELETE", f"/api/v0/ssh/{key_id}/", json={}, headers=AUTH)).json()["success"]
    empty = await api.get("/api/v0/ssh/", headers=AUTH)   # no keys: a 404, not an empty list
    assert empty.status_code == 404 and empty.json()["success"] is False
    (offer,) = await _rentable(api, 1)
    instance_id = await _rent(api, offer["id"])
    r = (await api.post(f"/api/v0/instances/{instance_id}/ssh/", json={"ssh_key": "ssh-rsa AAAAk"},
                        headers=AUTH)).json()
    assert r["success"] is True
    r = await api.request("DELETE", f"/api/v0/instances/{instance_id}/ssh/{r['key_id']}/", json={}, headers=AUTH)
    assert r.json()["success"] is True
    r = await api.post(f"/api/v0/instances/{instance_id}/ssh/", json={"ssh_key": "-----BEGIN PRIVATE KEY"},
                       headers=AUTH)
    assert r.status_code == 400


async def test_request_log_records_targets_never_the_key(api: httpx.AsyncClient, market: Market) -> None:
    offers = await _rentable(api, 2)
    a = await _rent(api, offers[0]["id"])
    b = await _rent(api, offers[1]["id"])
    await api.put(f"/api/v0/instances/{a}/", json={"label": "x"}, headers=AUTH)
    await api.request("DELETE", "/api/v0/instances/", json={"instance_ids": [a, b]}, headers=AUTH)
    await api.get("/api/v0/users/current", headers={"Authorization": "Bearer nope"})
    log = market.request_log
    creates = [r for r in log if r.method == "PUT" and r.path.startswith("/api/v0/asks/")]
    assert [r.target_id for r in creates] == [offers[0]["id"], offers[1]["id"]]
    assert [r.status for r in creates] == [200, 200]
    label = next(r for r in log if r.method == "PUT" and r.path == f"/api/v0/instances/{a}/")
    assert label.target_ids == (a,) and label.is_mutating
    bulk = next(r for r in log if r.method == "DELETE")
    assert bulk.target_ids == (a, b) and bulk.target_id is None
    assert log[-1].status == 401
    assert KEY not in repr(log) and "nope" not in repr(log)


async def test_chaos_rate_limit_5xx_quota(api: httpx.AsyncClient, market: Market, clock: FakeClock) -> None:
    market.chaos.rate_limit_every_n = 2
    statuses = [(await api.get("/api/v0/users/current", headers=AUTH)) for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 429, 200, 429]
    assert statuses[1].headers["retry-after"] == "0.5" and statuses[1].json()["success"] is False
    market.chaos.rate_limit_every_n = 0
    market.chaos.search_quota_exhausted = True
    r = await api.post("/api/v0/bundles/", json={}, headers=AUTH)
    assert r.status_code == 429 and r.json()["error"] == "search_quota_exceeded"
    assert int(r.headers["x-ratelimit-reset"]) == int(clock.now() + 3600)
    market.chaos.search_quota_exhausted = False
    market.chaos.error_5xx_rate = 1.0
    (offer,) = [o for o in (await api.post("/api/v0/bundles/", json={"rentable": {"eq": True}, "limit": 5},
                                           headers={"Authorization": "Bearer x"})).json().get("offers", [{}])][:1]
    assert offer == {}  # unauthorised: no chaos, just 401
    r = await api.put("/api/v0/asks/20000001/", json={"image": "x"}, headers=AUTH)
    assert r.status_code in (502, 503, 504) and market.instance_ids() == []  # nothing applied
