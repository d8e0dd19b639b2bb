"""The client's wire behaviour against a scripted stand-in for the live API: request shapes, retries and
backoff on the fake clock, the quota 429, error translation, and the key kept out of every text."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes import FakeClock, FakeVastApi
from vastui.approval import Action, Approval, ApprovalRequest, recipient_target
from vastui.config import Secret
from vastui.errors import ApiError, AuthError, NotFound, QuotaExceeded, RateLimited, TransportError
from vastui.vast.client import HttpVastClient
from vastui.vast.wire import GarbledReply

KEY = "sk-live-abcdef0123456789"
BASE = "http://vast.test"


@pytest.fixture
def api() -> FakeVastApi:
    return FakeVastApi()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def client(api: FakeVastApi, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    async with HttpVastClient(base_url=BASE, api_key=Secret(KEY), clock=clock, transport=api.transport()) as c:
        yield c


def offers_reply(*ids: int) -> httpx.Response:
    rows = [{"id": i, "machine_id": 100 + i, "num_gpus": 1, "gpu_name": "RTX 4090", "dph_total": 0.4} for i in ids]
    return httpx.Response(200, json={"offers": rows})


def page(rows: list[dict[str, object]], token: object = None) -> httpx.Response:
    return httpx.Response(200, json={"instances": rows, "next_token": token, "total_instances": len(rows)})


def row(instance_id: int, label: str | None = None) -> dict[str, object]:
    return {"id": instance_id, "actual_status": "running", "label": label, "start_date": 1.0, "extra_env": []}


# --- request shapes ---------------------------------------------------------------------------------------------


async def test_search_posts_the_cli_body_with_bearer_auth(client: HttpVastClient, api: FakeVastApi) -> None:
    api.script.append(offers_reply(5, 6))
    offers = await client.search_offers("num_gpus>=2", order="dph+", limit=3)
    assert [o.id for o in offers] == [5, 6]
    request = api.requests[0]
    assert (request.method, request.url.raw_path) == ("POST", b"/api/v0/bundles/")
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.content) == {
        "verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True}, "num_gpus": {"gte": "2"},
        "order": [["dph_total", "asc"]], "type": "on-demand", "limit": 3, "allocated_storage": 5.0,
    }


async def test_instance_listing_query_string_is_the_clis(client: HttpVastClient, api: FakeVastApi) -> None:
    api.script.append(page([row(1)]))
    await client.list_instances()
    assert api.requests[0].url.raw_path == (
        b"/api/v1/instances/?select_filters=%7B%7D&order_by=%5B%7B%22col%22%3A+%22id%22%2C+%22dir%22%3A+%22asc%22"
        b"%7D%5D&limit=25"
    )


async def test_paths_bodies_and_methods(client: HttpVastClient, api: FakeVastApi) -> None:
    api.script += [
        httpx.Response(200, json={"instances": None}),
        httpx.Response(200, json={"id": 1, "username": "u", "credit": 12.5, "api_key": KEY}),
    ]
    assert await client.show_instance(7) is None
    user = await client.get_user()
    assert user.credit == 12.5 and KEY not in repr(user)
    await client.destroy_instance(7, approval=approve(Action.DESTROY_INSTANCE, "instance:7"))
    seen = [(r.method, r.url.raw_path, r.content) for r in api.requests]
    assert seen == [
        ("GET", b"/api/v0/instances/7/?owner=me", b""),
        ("GET", b"/api/v0/users/current", b""),
        ("DELETE", b"/api/v0/instances/7/", b"{}"),
    ]


async def test_no_key_means_no_authorization_header(api: FakeVastApi, clock: FakeClock) -> None:
    api.script.append(offers_reply())
    async with HttpVastClient(base_url=BASE + "/", api_key=None, clock=clock, transport=api.transport()) as c:
        await c.search_offers()
    assert "Authorization" not in api.requests[0].headers
    assert api.requests[0].url.raw_path == b"/api/v0/bundles/"  # a trailing slash on the base gives no //


async def test_logs_poll_the_result_url_without_auth(client: HttpVastClient, api: FakeVastApi,
                                                      clock: FakeClock) -> None:
    api.script += [
        httpx.Response(200, json={"success": True, "result_url": "http://bucket.test/logs/abc?sig=1"}),
        httpx.Response(404, text="not yet"),
        httpx.Response(403, text="not yet"),
        httpx.Response(200, text="line one\nline two\n"),
    ]
    text = await client.request_logs(3, tail=100)
    assert text == "line one\nline two\n"
    put, *polls = api.requests
    assert json.loads(put.content) == {"tail": "100"}
    assert [p.url.host for p in polls] == ["bucket.test"] * 3
    assert all("Authorization" not in p.headers for p in polls)
    assert clock.sleeps == [0.3, 0.3, 0.3]


async def test_logs_give_up_after_bounded_polls(client: HttpVastClient, api: FakeVastApi) -> None:
    api.script.append(httpx.Response(200, json={"result_url": "http://bucket.test/x"}))
    api.default = httpx.Response(404)
    with pytest.raises(ApiError, match="not ready"):
        await client.request_logs(3)
    assert len(api.requests) == 31


# --- retries and backoff -----------------------------------------------------------------------------------------


async def test_503_backs_off_015_then_0225(client: HttpVastClient, api: FakeVastApi, clock: FakeClock) -> None:
    api.script += [httpx.Response(503), httpx.Response(503), offers_reply(1)]
    assert [o.id for o in await client.search_offers()] == [1]
    assert clock.sleeps == pytest.approx([0.15, 0.225])
    assert len(api.requests) == 3


async def test_retry_after_is_honoured(client: HttpVastClient, api: FakeVastApi, clock: FakeClock) -> None:
    api.script += [httpx.Response(429, headers={"Retry-After": "0.5"}, json={"msg": "slow down"}),
                   httpx.Response(502, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), offers_reply(1)]
    await client.search_offers()
    assert clock.sleeps == pytest.approx([0.5, 0.225])  # an HTTP-date Retry-After falls back to backoff


async def test_retry_after_over_60_gives_up_at_once(client: HttpVastClient, api: FakeVastApi,
                                                    clock: FakeClock) -> None:
    api.script.append(httpx.Response(429, headers={"Retry-After": "120"}, json={"msg": "later"}))
    with pytest.raises(RateLimited) as caught:
        await client.search_offers()
    assert caught.value.retry_after_s == 120
    assert len(api.requests) == 1 and clock.sleeps == []


async def test_attempts_are_bounded(client: HttpVastClient, api: FakeVastApi, clock: FakeClock) -> None:
    api.default = httpx.Response(504, json={"msg": "gateway timeout"})
    with pytest.raises(ApiError) as caught:
        await client.search_offers()
    assert caught.value.status == 504 and "gateway timeout" in caught.value.message
    assert len(api.requests) == 4
    assert clock.sleeps == pytest.approx([0.15, 0.225, 0.3375])


async def test_500_is_not_retried(client: HttpVastClient, api: FakeVastApi, clock: FakeClock) -> None:
    api.script.append(httpx.Response(500, json={"success": False, "msg": "boom"}))
    with pytest.raises(ApiError, match="boom"):
        await client.search_offers()
    assert len(api.requests) == 1 and clock.sleeps == []


async def test_transport_errors_are_retried_then_raised(client: HttpVastClient, api: FakeVastApi,
                                                        clock: FakeClock) -> None:
    api.script += [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), offers_reply(2)]
    assert [o.id for o in await client.search_offers()] == [2]
    assert clock.sleeps == pytest.approx([0.15, 0.225])
    api.script += [httpx.ConnectError("refused")] * 4
    with pytest.raises(TransportError, match="after 4 attempt"):
        await client.search_offers()


async def test_search_quota_429_is_never_retried(client: HttpVastClient, api: FakeVastApi,
                                                 clock: FakeClock) -> None:
    reset = clock.now() + 3600
    api.script.append(httpx.Response(
        429, headers={"X-RateLimit-Reset": str(int(reset)), "Retry-After": "1"},
        json={"success": False, "error": "search_quota_exceeded", "msg": "Search quota exceeded"}))
    with pytest.raises(QuotaExceeded) as caught:
        await client.search_offers()
    assert len(api.requests) == 1 and clock.sleeps == []
    assert "Resets at 2027-01-15 09:00 UTC" in caught.value.message
    assert caught.value.retry_after_s == pytest.approx(3600, abs=1)


async def test_money_is_retried_only_when_refused(client: HttpVastClient, api: FakeVastApi,
                                                  clock: FakeClock) -> None:
    api.script.append(httpx.Response(503))
    with pytest.raises(ApiError):
        await client.transfer_credit("a@b.c", 5,
                                     approval=approve(Action.TRANSFER_CREDIT, recipient_target("a@b.c"), cap=5.0))
    assert len(api.requests) == 1
    api.script += [httpx.Response(429, json={"msg": "slow"}), httpx.Response(200, json={"success": True})]
    await client.transfer_credit("a@b.c", 5,
                                 approval=approve(Action.TRANSFER_CREDIT, recipient_target("a@b.c"), cap=5.0))
    # paced (transfer credit: one request per 2.5 s, vast-ai/docs OpenAPI transfer_credit.yaml x-rate-limit), then a
    # 429 without Retry-After or threshold waits the endpoint's documented interval (rate-limits-and-errors.mdx)
    assert len(api.requests) == 3 and clock.sleeps == pytest.approx([2.55, 2.55])
    assert json.loads(api.requests[-1].content) == {"sender": "me", "recipient": "a@b.c", "amount": 5.0}


# --- error translation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "error", "words"),
    [
        (httpx.Response(401, json={"success": False, "error": "auth_error", "msg": "Invalid user key"}), AuthError,
         "Invalid user key"),
        (httpx.Response(404, json={"msg": "no such thing"}), NotFound, "no such thing"),
        (httpx.Response(200, text="<html>oops</html>"), GarbledReply, "not JSON"),
        (httpx.Response(200, json=[1, 2]), ApiError, "expected a JSON object"),
        (httpx.Response(200, json={"offers": {"id": 1}}), ApiError, "'offers'"),
        (httpx.Response(200, json={"success": False, "msg": "offer unavailable"}), ApiError, "offer unavailable"),
        (httpx.Response(400, text="bad request body"), ApiError, "bad request body"),
    ],
)
async def test_errors_say_what_and_where(client: HttpVastClient, api: FakeVastApi, response: httpx.Response,
                                         error: type[ApiError], words: str) -> None:
    api.script.append(response)
    with pytest.raises(error) as caught:
        await client.search_offers()
    assert type(caught.value) is error
    assert words in caught.value.message
    assert "/bundles/" in caught.value.message


async def test_a_garbage_offer_row_is_named_and_the_others_are_used(client: HttpVastClient, api: FakeVastApi,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    good = {"id": 1, "machine_id": 2, "num_gpus": 1, "gpu_name": "x", "dph_total": 1.0}
    api.script.append(httpx.Response(200, json={"offers": [good, {**good, "id": 9, "reliability": "high"},
                                                           {**good, "id": 3, "num_gpus": "two"}, "junk",
                                                           {**good, "id": 4}]}))
    offers = await client.search_offers()
    assert [o.id for o in offers] == [1, 4]
    assert [(row.id, row.where) for row in offers.unreadable] == [
        (9, "row 1 of POST /bundles/"), (3, "row 2 of POST /bundles/"), (None, "row 3 of POST /bundles/")]
    assert "'reliability'" in offers.unreadable[0].reason and "'num_gpus'" in offers.unreadable[1].reason
    assert any("offer 9" in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)


# --- the key never shows ---------------------------------------------------------------------------------------


async def test_key_is_redacted_in_repr_logs_and_errors(client: HttpVastClient, api: FakeVastApi,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    assert KEY not in repr(client) and KEY not in str(client)
    api.script += [
        httpx.Response(503, json={"msg": f"overloaded for key {KEY}"}),
        httpx.Response(401, json={"msg": f"Invalid user key {KEY}"}),
    ]
    with pytest.raises(AuthError) as caught:
        await client.get_user()
    assert api.requests[0].headers["Authorization"] == f"Bearer {KEY}"  # it did go on the wire
    texts = [str(caught.value), repr(caught.value), caught.value.message, *(r.getMessage() for r in caplog.records)]
    assert any("retrying" in text for text in texts)
    assert all(KEY not in text for text in texts)


def approve(action: Action, target: str, *, cap: float | None = None) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="test", cost_cap_usd=cap),
                    granted_by="test", granted_at=0.0)


# --- listings ----------------------------------------------------------------------------------------------------


async def test_a_rejected_key_on_the_listing_raises(client: HttpVastClient, api: FakeVastApi) -> None:
    api.script.append(httpx.Response(401, json={"msg": "Invalid user key"}))
    with pytest.raises(AuthError):
        await client.list_instances()


@pytest.mark.parametrize(
    "bad_page",
    [httpx.Response(200, text="<html>"), httpx.Response(200, json={"instances": "nope"}),
     httpx.Response(200, json={"instances": [{"id": "x"}], "next_token": None}),
     httpx.Response(404, json={"msg": "gone"})],
)
async def test_a_garbled_page_is_incomplete_not_short(client: HttpVastClient, api: FakeVastApi,
                                                      bad_page: httpx.Response) -> None:
    api.script += [page([row(i) for i in range(1, 26)], token="t1"), bad_page]
    listing = await client.list_instances()
    assert not listing.is_complete and len(listing.instances) == 25
    assert listing.error is not None and "page 2" in listing.error
    assert api.requests[1].url.params["after_token"] == "t1"


async def test_a_repeated_token_is_incomplete(client: HttpVastClient, api: FakeVastApi) -> None:
    api.script += [page([row(1)], token="same"), page([row(2)], token="same")]
    listing = await client.list_instances()
    assert not listing.is_complete and [i.id for i in listing.instances] == [1, 2]


async def test_a_server_that_trickles_its_answer_ends_in_a_timeout_not_a_hang() -> None:
    """One byte every 50 ms never trips a per-read timeout (0.5 s); the whole answer's deadline (twice that) does."""
    import asyncio

    stop = asyncio.Event()

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
            while not stop.is_set():
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.05)
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(trickle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with HttpVastClient(base_url=url, api_key=Secret("trickle-key"), clock=FakeClock(), timeout_s=0.5,
                                  max_attempts=1) as client:
            with pytest.raises(TransportError, match="no whole answer within 1 s") as caught:
                await client.get_user()
        assert "trickle-key" not in str(caught.value) and "\n" not in str(caught.value)
    finally:
        stop.set()
        server.close()
        await server.wait_closed()


async def test_daemon_logs_are_asked_for_as_the_cli_asks(client: HttpVastClient, api: FakeVastApi) -> None:
    # The options are strings on the wire (docs/api-notes.md §3.11): tail "20", daemon_logs "true".
    api.script += [httpx.Response(200, json={"success": True, "result_url": "http://bucket.test/logs/d"}),
                   httpx.Response(200, text="daemon line\n")]
    assert await client.request_logs(3, tail=20, daemon=True) == "daemon line\n"
    assert json.loads(api.requests[0].content) == {"tail": "20", "daemon_logs": "true"}


async def test_calls_that_change_something_wait_as_long_as_the_cli(client: HttpVastClient, api: FakeVastApi) -> None:
    # The official CLI gives every call 120 s (docs/api-notes.md §9); vastui's reads keep 30 s, and a call that
    # changes something gets the CLI's 120 s, so a slow create is waited for instead of made uncertain.
    from vastui.approval import instance_target
    api.script.append(httpx.Response(200, json={"id": 1, "username": "op", "credit": 1.0}))
    await client.get_user()
    api.script.append(offers_reply())
    await client.search_offers("gpu_name=RTX_4090")
    await client.label_instance(5, "x", approval=approve(Action.LABEL_INSTANCE, instance_target(5)))
    timeouts = {f"{r.method} {r.url.path}": r.extensions["timeout"]["read"] for r in api.requests}
    assert timeouts == {"GET /api/v0/users/current": 30.0, "POST /api/v0/bundles/": 30.0,
                        "PUT /api/v0/instances/5/": 120.0}
