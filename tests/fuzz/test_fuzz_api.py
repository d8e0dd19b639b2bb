"""Fuzzing API replies as the client sees them: a marketplace (or a proxy in front of it) that answers with wrong
types, missing fields, non-JSON, huge bodies, odd statuses and odd headers. Every call returns its typed result
or raises one ``VastuiError`` that says what and where in one bounded line, without the API key — never another
exception type. The replies travel over a real ASGI transport (``httpx.ASGITransport`` to an ASGI app).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from tests.fakes import FakeClock
from tests.fuzz.fuzz_support import assert_one_line, json_values, odd_numbers, odd_text
from vastui.approval import Action, Approval, ApprovalRequest, instance_target, offer_target
from vastui.config import Secret
from vastui.errors import ApiError, VastuiError
from vastui.vast.client import HttpVastClient
from vastui.vast.models import InstanceListing

KEY = "fuzz-api-key-7f3a9c1e5b"
STATUSES = [200, 201, 202, 204, 206, 299, 300, 301, 302, 303, 304, 307, 308, 400, 401, 403, 404, 405, 409, 410,
            413, 418, 422, 429, 451, 500, 501, 502, 503, 504, 520, 599]
OFFER = {"id": 1, "machine_id": 2, "num_gpus": 1, "gpu_name": "RTX 4090", "dph_total": 0.4, "reliability": 0.99}
INSTANCE = {"id": 5, "machine_id": 2, "actual_status": "running", "label": "vastui-c1-c1-1", "dph_total": 0.4,
            "ssh_host": "ssh5.vast.ai", "ssh_port": 10022, "ports": {"22/tcp": [{"HostPort": "40022"}]}}


class Reply:
    """One HTTP answer: status, headers and body bytes."""

    def __init__(self, status: int, headers: tuple[tuple[str, str], ...], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def __repr__(self) -> str:  # a short repr: hypothesis prints failing examples
        shown = self.body if len(self.body) <= 120 else self.body[:100] + b"...(%d bytes)" % len(self.body)
        return f"Reply({self.status}, {self.headers!r}, {shown!r})"


def spoiled(row: dict[str, object]) -> st.SearchStrategy[object]:
    """A row with some fields given odd values, or dropped, or not a row at all."""
    def spoil(changes: dict[str, object], drops: list[str]) -> dict[str, object]:
        out = {**row, **changes}
        for name in drops:
            out.pop(name, None)
        return out
    return st.one_of(
        st.builds(spoil, st.dictionaries(st.sampled_from(sorted(row) + ["start_date", "gpu_ram", "rentable"]),
                                         st.one_of(json_values, odd_numbers, odd_text), max_size=3),
                  st.lists(st.sampled_from(sorted(row)), max_size=2)),
        st.just(row), json_values)


bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    st.lists(spoiled(OFFER), max_size=4).map(lambda rows: json.dumps({"offers": rows}).encode()),
    st.builds(lambda rows, token: json.dumps({"instances": rows, "next_token": token}).encode(),
              st.lists(spoiled(INSTANCE), max_size=4), st.one_of(st.none(), st.just(""), json_values)),
    st.builds(lambda row: json.dumps({"instances": row}).encode(), spoiled(INSTANCE)),
    st.builds(lambda contract: json.dumps({"success": True, "new_contract": contract}).encode(),
              st.one_of(odd_numbers, odd_text, st.none())),
    st.builds(lambda msg, err: json.dumps({"success": False, "error": err, "msg": msg}).encode(),
              st.one_of(odd_text, json_values), st.one_of(odd_text, st.none())),
    st.binary(max_size=200),
    st.sampled_from([b"", b"<html><body>502 Bad Gateway</body></html>", b"\xff\xfe\x00", b"[" * 50_000,
                     b'{"offers": [' + b'{"id": 1},' * 2_000 + b'{"id": 2}]}', b"9" * 5000,
                     json.dumps({"msg": "m" * 200_000}).encode(), b"x" * 300_000, b"NaN", b'{"a": Infinity}']),
)
headers = st.lists(st.one_of(
    st.tuples(st.just("Retry-After"), st.sampled_from(["1", "0", "-1", "abc", "1e9", "nan", "inf", "9" * 400,
                                                       "Wed, 21 Oct 2015 07:28:00 GMT", "", "0.5"])),
    st.tuples(st.just("Location"), st.sampled_from(["http://fuzz.test/api/v0/users/current/", "/elsewhere", "",
                                                    "http://[::1", "http://127.0.0.1:99999/", "::", "ftp://x/",
                                                    "http://other.test/"])),
    st.tuples(st.just("Content-Type"), st.sampled_from(["application/json", "text/html", "application/json; "
                                                        "charset=latin-1", "image/png"])),
    st.tuples(st.just("X-RateLimit-Reset"), st.sampled_from(["1800000000", "abc", "-5", "9" * 30])),
), max_size=3).map(tuple)
replies = st.builds(Reply, st.sampled_from(STATUSES), headers, bodies)


class Replier:
    """An ASGI app that answers request n with ``replies[n]`` (the last one again after that)."""

    def __init__(self, script: list[Reply]) -> None:
        self.script = script
        self.count = 0

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
                      send: Callable[[MutableMapping[str, Any]], Awaitable[None]]) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        reply = self.script[min(self.count, len(self.script) - 1)]
        self.count += 1
        await send({"type": "http.response.start", "status": reply.status,
                    "headers": [(k.lower().encode(), v.encode()) for k, v in reply.headers]})
        await send({"type": "http.response.body", "body": reply.body})


def _approval(action: Action, target: str) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="fuzz", cost_cap_usd=10.0),
                    granted_by="fuzz", granted_at=0.0)


CALLS: dict[str, Callable[[HttpVastClient], Awaitable[object]]] = {
    "get_user": lambda c: c.get_user(),
    "search_offers": lambda c: c.search_offers("num_gpus>=1"),
    "list_instances": lambda c: c.list_instances(),
    "show_instance": lambda c: c.show_instance(5),
    "list_ssh_keys": lambda c: c.list_ssh_keys(),
    "destroy_instance": lambda c: c.destroy_instance(5, approval=_approval(Action.DESTROY_INSTANCE,
                                                                              instance_target(5))),
    "create_instance": lambda c: c.create_instance(offer_id=1, image="img", disk_gib=10, label="vastui-c1-c1-1",
                                                   approval=_approval(Action.CREATE_INSTANCE, offer_target(1))),
    "prepay_instance": lambda c: c.prepay_instance(5, 1.0, approval=_approval(Action.PREPAY_INSTANCE,
                                                                              instance_target(5))),
    "request_logs": lambda c: c.request_logs(5),
}


async def _call(name: str, script: list[Reply]) -> None:
    app = Replier(script)
    async with HttpVastClient(base_url="http://fuzz.test", api_key=Secret(KEY), clock=FakeClock(),
                              transport=httpx.ASGITransport(app=app), max_attempts=1) as client:
        try:
            result = await CALLS[name](client)
        except VastuiError as exc:
            message = assert_one_line(exc)
            assert KEY not in message
            return
        except BaseException as exc:  # noqa: BLE001 - the point: nothing else may come out
            raise AssertionError(f"{name}: {type(exc).__name__} escaped: {str(exc)[:300]}") from exc
    if name == "list_instances":
        assert isinstance(result, InstanceListing)
        assert result.error is None or "\n" not in result.error
        assert all("\n" not in row.reason for row in result.unreadable)


@given(name=st.sampled_from(sorted(CALLS)), script=st.lists(replies, min_size=1, max_size=3))
async def test_any_reply_is_a_result_or_one_vastui_error(name: str, script: list[Reply]) -> None:
    await _call(name, script)


@given(name=st.sampled_from(["get_user", "list_instances", "destroy_instance", "create_instance"]),
       status=st.sampled_from(STATUSES), body=st.sampled_from([b"", b"{}", b"[]", b"null", b"not json"]))
async def test_any_status_with_a_plain_body_is_a_result_or_one_vastui_error(name: str, status: int,
                                                                           body: bytes) -> None:
    await _call(name, [Reply(status, (), body)])


async def test_a_mutating_call_that_fails_is_an_api_error() -> None:
    app = Replier([Reply(418, (), b"teapot")])
    async with HttpVastClient(base_url="http://fuzz.test", api_key=Secret(KEY), clock=FakeClock(),
                              transport=httpx.ASGITransport(app=app)) as client:
        try:
            await CALLS["destroy_instance"](client)
        except ApiError as exc:
            assert "418" in exc.message and "DELETE /instances/5/" in exc.message
        else:
            raise AssertionError("a 418 on destroy was taken for success")


# Replies the fuzzing found to escape as another exception or as a many-line (or 200 kB) message; kept as cases.
FOUND = [
    ("create_instance", Reply(200, (), b"[" * 50_000)),                                  # RecursionError
    ("get_user", Reply(200, (), b"[" * 50_000)),
    ("list_instances", Reply(200, (), json.dumps({"instances": [{**INSTANCE, "start_date": 10**400}]}).encode())),
    ("search_offers", Reply(200, (), json.dumps({"offers": [{**OFFER, "dph_total": 10**400}]}).encode())),
    ("search_offers", Reply(429, (("X-RateLimit-Reset", "9" * 30),),                        # OverflowError
                            json.dumps({"error": "search_quota_exceeded", "msg": "quota"}).encode())),
    ("get_user", Reply(500, (), json.dumps({"msg": "m" * 200_000}).encode())),              # 200 kB message
    ("get_user", Reply(400, (), json.dumps({"msg": "first line\nsecond line\r\nthird"}).encode())),
    ("destroy_instance", Reply(404, (), json.dumps({"msg": "gone\n" * 50}).encode())),
]


@given(case=st.sampled_from(FOUND))
async def test_replies_the_fuzzing_found(case: tuple[str, Reply]) -> None:
    name, reply = case
    await _call(name, [reply])
