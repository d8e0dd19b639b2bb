"""The account's SSH key listing in its documented shapes (docs/api-notes.md §3.13): rows ``{id, user_id, key,
created_at (a date-time string), deleted_at}``, deleted rows left out, and an account with no keys answered with a
404 that means "none" — unless the 404 says the API key itself is bad."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest

from tests.fakes import FakeClock, FakeVastApi
from vastui.config import Secret
from vastui.errors import ApiError, AuthError
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.vast.client import HttpVastClient
from vastui.vast.models import SshKey

KEY = "ssh-keys-test-key-0042"
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEIQczXkVx9q"


def _client(transport: httpx.AsyncBaseTransport) -> HttpVastClient:
    return HttpVastClient(base_url="http://vast.test", api_key=Secret(KEY), clock=FakeClock(), transport=transport,
                          max_attempts=1)


async def test_documented_rows_are_read_and_deleted_keys_left_out() -> None:
    api = FakeVastApi(httpx.Response(200, json=[
        {"id": 11, "user_id": 7, "key": f"{ED25519} me@laptop", "created_at": "2025-06-01T12:30:00Z",
         "deleted_at": None},
        {"id": 12, "user_id": 7, "key": "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 old@box",
         "created_at": "2024-01-02T03:04:05", "deleted_at": "2025-02-03T00:00:00+00:00"},
    ]))
    async with _client(api.transport()) as client:
        keys = await client.list_ssh_keys()
    assert keys == [SshKey(id=11, public_key=f"{ED25519} me@laptop",
                           created_at=dt.datetime(2025, 6, 1, 12, 30, tzinfo=dt.UTC).timestamp())]
    assert [r.url.path for r in api.requests] == ["/api/v0/ssh/"]


async def test_an_account_without_keys_is_a_404_from_the_simulator_and_an_empty_list_to_the_client() -> None:
    market = build_market(3, clock=FakeClock(), api_key=KEY, n_machines=5)
    transport = httpx.ASGITransport(app=create_app(market))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim.test") as raw:
        reply = await raw.get("/api/v0/ssh/", headers={"Authorization": f"Bearer {KEY}"})
    assert reply.status_code == 404
    async with _client(transport) as client:
        assert await client.list_ssh_keys() == []
        market.account.add_key(f"{ED25519} me@laptop", at=1_750_000_000.0)
        (key,) = await client.list_ssh_keys()
    assert key.public_key == f"{ED25519} me@laptop" and key.created_at == 1_750_000_000.0


async def test_a_404_that_says_the_api_key_is_bad_is_not_an_empty_list() -> None:
    api = FakeVastApi(httpx.Response(404, json={"error": "auth_error", "msg": "Invalid user key"}))
    async with _client(api.transport()) as client:
        with pytest.raises(AuthError):
            await client.list_ssh_keys()


@pytest.mark.parametrize("row", [
    {"id": 3, "public_key": f"{ED25519} a@b", "created_at": 1_700_000_000},       # the official CLI's users
    {"id": 3, "ssh_key": f"{ED25519} a@b", "created_at": 1_700_000_000.0},        # older answers
    {"id": 3, "key": f"  {ED25519} a@b\n", "created_at": "2023-11-14T22:13:20+00:00"},
])
def test_older_row_shapes_read_the_same_key(row: dict[str, object]) -> None:
    key = SshKey.from_api(row)
    assert key.public_key == f"{ED25519} a@b" and key.created_at == 1_700_000_000.0 and not key.is_deleted


@pytest.mark.parametrize(("row", "field"), [
    ({"id": 3, "key": ED25519, "created_at": "last tuesday"}, "created_at"),
    ({"id": 3, "key": ED25519, "created_at": True}, "created_at"),
    ({"id": 3, "created_at": "2023-11-14T22:13:20Z"}, "'key'"),
])
def test_a_garbled_row_names_its_field(row: dict[str, object], field: str) -> None:
    with pytest.raises(ApiError, match=field):
        SshKey.from_api(row)


def test_a_registered_key_matches_whatever_its_comment_or_options() -> None:
    key = SshKey(id=1, public_key=f"{ED25519} registered@laptop", created_at=None)
    assert key.matches(ED25519) and key.matches(f'no-pty,command="x" {ED25519} other comment')
    assert not key.matches(ED25519.replace("AAAAIK0w", "AAAAIK1w"))
    assert not key.matches(f"ssh-rsa {ED25519.split()[1]}") and not key.matches("garbage")
