"""Redirects: followed as the official CLI follows them, the API key kept only on the origin it was given for, and a
loop ended in a one-line error."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes import FakeClock, FakeVastApi
from vastui.config import Secret
from vastui.errors import ApiError, AuthError
from vastui.vast.client import HttpVastClient
from vastui.vast.wire import MAX_REDIRECTS

KEY = "sk-redirect-key-0007"
USER = {"id": 7, "username": "op", "credit": 12.5}


def _client(api: FakeVastApi) -> HttpVastClient:
    return HttpVastClient(base_url="http://vast.test", api_key=Secret(KEY), clock=FakeClock(), transport=api.transport())


async def test_a_redirect_on_the_same_origin_is_followed_with_the_key() -> None:
    api = FakeVastApi()
    api.script = [httpx.Response(301, headers={"Location": "http://vast.test/api/v0/users/current/"}),
                  httpx.Response(200, json=USER)]
    async with _client(api) as client:
        user = await client.get_user()
    assert user.id == 7 and user.credit == 12.5
    assert [str(r.url) for r in api.requests] == ["http://vast.test/api/v0/users/current",
                                                  "http://vast.test/api/v0/users/current/"]
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in api.requests)


@pytest.mark.parametrize("elsewhere", ["http://elsewhere.test/api/v0/users/current",
                                       "http://vast.test:8443/api/v0/users/current",
                                       "https://console.vast.test/api/v0/users/current"])
async def test_a_redirect_to_another_origin_does_not_carry_the_key(elsewhere: str) -> None:
    api = FakeVastApi()
    api.script = [httpx.Response(302, headers={"Location": elsewhere}),
                  httpx.Response(401, json={"error": "auth", "msg": "no key"})]
    async with _client(api) as client:
        with pytest.raises(AuthError) as caught:
            await client.get_user()
    assert len(api.requests) == 2 and str(api.requests[1].url) == elsewhere
    assert "authorization" not in api.requests[1].headers
    assert KEY not in str(caught.value)


async def test_a_redirect_loop_ends_in_a_one_line_error() -> None:
    api = FakeVastApi(default=httpx.Response(302, headers={"Location": "http://vast.test/api/v0/users/current"}))
    async with _client(api) as client:
        with pytest.raises(ApiError) as caught:
            await client.get_user()
    assert len(api.requests) == MAX_REDIRECTS + 1
    message = str(caught.value)
    assert "GET /users/current" in message and "redirect" in message.lower() and "\n" not in message


async def test_an_upgrade_to_https_on_the_same_host_keeps_the_key() -> None:
    api = FakeVastApi()
    api.script = [httpx.Response(301, headers={"Location": "https://vast.test/api/v0/users/current"}),
                  httpx.Response(200, json=USER)]
    async with _client(api) as client:
        assert (await client.get_user()).id == 7
    assert api.requests[1].url.scheme == "https" and api.requests[1].headers.get("authorization") == f"Bearer {KEY}"


VAST_BASE = "https://console.vast.ai"


def _vast_client(api: FakeVastApi) -> HttpVastClient:
    return HttpVastClient(base_url=VAST_BASE, api_key=Secret(KEY), clock=FakeClock(), transport=api.transport())


async def test_a_redirect_to_another_vast_ai_host_keeps_the_key() -> None:
    # The official CLI sends its key to any *.vast.ai host a redirect names (docs/api-notes.md §9); vastui does too,
    # over https only.
    api = FakeVastApi()
    api.script = [httpx.Response(307, headers={"Location": "https://cloud.vast.ai/api/v0/users/current"}),
                  httpx.Response(200, json=USER)]
    async with _vast_client(api) as client:
        assert (await client.get_user()).id == 7
    assert api.requests[1].url.host == "cloud.vast.ai"
    assert api.requests[1].headers.get("authorization") == f"Bearer {KEY}"


@pytest.mark.parametrize("elsewhere", ["http://cloud.vast.ai/api/v0/users/current",
                                       "https://vast.ai.example.com/api/v0/users/current",
                                       "https://notvast.ai/api/v0/users/current"])
async def test_a_redirect_from_vast_ai_elsewhere_drops_the_key(elsewhere: str) -> None:
    api = FakeVastApi()
    api.script = [httpx.Response(302, headers={"Location": elsewhere}),
                  httpx.Response(401, json={"error": "auth", "msg": "no key"})]
    async with _vast_client(api) as client:
        with pytest.raises(AuthError):
            await client.get_user()
    assert str(api.requests[1].url) == elsewhere and "authorization" not in api.requests[1].headers
