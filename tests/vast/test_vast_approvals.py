"""Every mutating client method needs a matching, unused approval, checked before any request leaves, and every
call is audited: that it is going out (before the request leaves), then its outcome."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import pytest

from tests.fakes import FakeAudit, FakeClock, FakeVastApi
from vastui.approval import Action, Approval, ApprovalRequest, AuditKind, recipient_target
from vastui.config import Secret
from vastui.errors import ApiError, ApprovalRequired
from vastui.vast.client import HttpVastClient, ssh_key_target

PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample operator@laptop"


@dataclass(frozen=True)
class Case:
    name: str
    action: Action
    target: str
    call: Callable[[HttpVastClient, Approval | None], Awaitable[object]]
    method: str
    path: bytes
    body: dict[str, object]
    reply: dict[str, object]


CASES = [
    Case("create", Action.CREATE_INSTANCE, "offer:5",
         lambda c, a: c.create_instance(offer_id=5, image="pytorch/pytorch", disk_gib=20, label="x",
                                        approval=a),  # type: ignore[arg-type]
         "PUT", b"/api/v0/asks/5/",
         {"client_id": "me", "image": "pytorch/pytorch", "env": {}, "price": None, "disk": 20.0, "label": "x",
          "extra": None, "onstart": None, "image_login": None, "python_utf8": False, "lang_utf8": False,
          "use_jupyter_lab": False, "jupyter_dir": None, "force": False, "cancel_unavail": True,
          "template_hash_id": None, "user": None, "runtype": "ssh_direc ssh_proxy"},
         {"success": True, "new_contract": 1001, "instance_api_key": "ik-secret-123456"}),
    Case("destroy", Action.DESTROY_INSTANCE, "instance:1",
         lambda c, a: c.destroy_instance(1, approval=a),  # type: ignore[arg-type]
         "DELETE", b"/api/v0/instances/1/", {}, {"success": True}),
    Case("stop", Action.STOP_INSTANCE, "instance:1",
         lambda c, a: c.stop_instance(1, approval=a),  # type: ignore[arg-type]
         "PUT", b"/api/v0/instances/1/", {"state": "stopped"}, {"success": True}),
    Case("start", Action.START_INSTANCE, "instance:1",
         lambda c, a: c.start_instance(1, approval=a),  # type: ignore[arg-type]
         "PUT", b"/api/v0/instances/1/", {"state": "running"}, {"success": True}),
    Case("label", Action.LABEL_INSTANCE, "instance:1",
         lambda c, a: c.label_instance(1, "x", approval=a),  # type: ignore[arg-type]
         "PUT", b"/api/v0/instances/1/", {"label": "x"}, {"success": True}),
    Case("prepay", Action.PREPAY_INSTANCE, "instance:1",
         lambda c, a: c.prepay_instance(1, 10, approval=a),  # type: ignore[arg-type]
         "PUT", b"/api/v0/instances/prepay/1/", {"amount": 10.0},
         {"success": True, "timescale": 0.04, "discount_rate": 0.2}),
    Case("transfer", Action.TRANSFER_CREDIT, recipient_target("a@b.c"),
         lambda c, a: c.transfer_credit("a@b.c", 5, approval=a),  # type: ignore[arg-type]
         "PUT", b"/api/v0/commands/transfer_credit/", {"sender": "me", "recipient": "a@b.c", "amount": 5.0},
         {"success": True}),
    Case("create ssh key", Action.CREATE_SSH_KEY, ssh_key_target(PUBKEY),
         lambda c, a: c.create_ssh_key(PUBKEY, approval=a),  # type: ignore[arg-type]
         "POST", b"/api/v0/ssh/", {"ssh_key": PUBKEY}, {"success": True, "id": 3}),
    Case("attach ssh key", Action.ATTACH_SSH_KEY, "instance:1",
         lambda c, a: c.attach_ssh_key(1, PUBKEY, approval=a),  # type: ignore[arg-type]
         "POST", b"/api/v0/instances/1/ssh/", {"ssh_key": PUBKEY}, {"success": True}),
]
IDS = [case.name for case in CASES]
MONEY_CASES = [case for case in CASES if case.action in (Action.PREPAY_INSTANCE, Action.TRANSFER_CREDIT)]


def approval(action: Action, target: str, *, cap: float | None = 10.0) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="test", cost_cap_usd=cap,
                                    campaign_id="c1"), granted_by="operator", granted_at=0.0)


def make_client(api: FakeVastApi, audit: FakeAudit | None = None) -> HttpVastClient:
    return HttpVastClient(base_url="http://vast.test", api_key=Secret("sk-test-key-0001"), clock=FakeClock(),
                          transport=api.transport(), audit=audit)


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_no_request_without_an_approval(case: Case) -> None:
    api = FakeVastApi()
    async with make_client(api) as client:
        with pytest.raises(ApprovalRequired):
            await case.call(client, None)
    assert api.requests == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_no_request_with_an_approval_for_something_else(case: Case) -> None:
    api = FakeVastApi()
    wrong_action = Action.DESTROY_INSTANCE if case.action is not Action.DESTROY_INSTANCE else Action.STOP_INSTANCE
    async with make_client(api) as client:
        for wrong in (approval(wrong_action, case.target), approval(case.action, case.target + "9")):
            with pytest.raises(ApprovalRequired):
                await case.call(client, wrong)
            assert not wrong.used
    assert api.requests == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_the_approved_call_is_sent_once_and_audited(case: Case) -> None:
    api = FakeVastApi(httpx.Response(200, json=case.reply))
    audit = FakeAudit()
    granted = approval(case.action, case.target)
    async with make_client(api, audit) as client:
        result = await case.call(client, granted)
        assert "ik-secret" not in repr(result)
        with pytest.raises(ApprovalRequired, match="already used"):
            await case.call(client, granted)
    assert len(api.requests) == 1
    request = api.requests[0]
    assert (request.method, request.url.raw_path) == (case.method, case.path)
    assert json.loads(request.content) == case.body
    sending, record = audit.records
    assert (sending.kind, sending.action, sending.target) == (AuditKind.SENDING, case.action, case.target)
    assert (record.kind, record.action, record.target) == (AuditKind.CALL, case.action, case.target)
    assert sending.approval_id == record.approval_id == granted.approval_id and record.campaign_id == "c1"
    assert record.outcome.startswith("ok")


class AuditBeforeEachRequest(FakeAudit):
    """Notes how many audit records existed when each request left (the transport asks it)."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds_at_request: list[list[str]] = []


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_a_mutation_is_on_record_before_its_request_leaves(case: Case) -> None:
    """A console killed mid-call (SIGKILL) must still leave a trace of the request next to its approval."""
    audit = AuditBeforeEachRequest()

    def answer(request: httpx.Request) -> httpx.Response:
        audit.kinds_at_request.append([r.kind for r in audit.records])
        return httpx.Response(200, json=case.reply)

    async with HttpVastClient(base_url="http://vast.test", api_key=Secret("sk-test-key-0001"), clock=FakeClock(),
                              transport=httpx.MockTransport(answer), audit=audit) as client:
        await case.call(client, approval(case.action, case.target))
    assert audit.kinds_at_request == [[AuditKind.SENDING]]


async def test_a_failed_call_is_audited_with_its_error() -> None:
    api = FakeVastApi(httpx.Response(200, json={"success": False, "msg": "instance is busy"}))
    audit = FakeAudit()
    async with make_client(api, audit) as client:
        with pytest.raises(ApiError, match="instance is busy"):
            await client.stop_instance(4, approval=approval(Action.STOP_INSTANCE, "instance:4"))
    assert audit.records[-1].outcome.startswith("error:") and "busy" in audit.records[-1].outcome


async def test_money_over_the_approved_cap_is_refused_before_io() -> None:
    api = FakeVastApi()
    async with make_client(api) as client:
        capped = approval(Action.PREPAY_INSTANCE, "instance:1", cap=5.0)
        with pytest.raises(ApprovalRequired, match="cap"):
            await client.prepay_instance(1, 10, approval=capped)
        assert not capped.used
    assert api.requests == []


@pytest.mark.parametrize("case", MONEY_CASES, ids=[case.name for case in MONEY_CASES])
async def test_money_without_a_cost_cap_is_refused_before_io(case: Case) -> None:
    api = FakeVastApi()
    audit = FakeAudit()
    capless = approval(case.action, case.target, cap=None)
    async with make_client(api, audit) as client:
        with pytest.raises(ApprovalRequired) as refused:
            await case.call(client, capless)
    assert refused.value.title == "No cost cap"
    assert not capless.used and api.requests == [] and audit.records == []


@pytest.mark.parametrize("key", ["-----BEGIN OPENSSH PRIVATE KEY-----\nabc", "/home/me/.ssh/id.pub"])
async def test_bad_ssh_keys_are_refused_before_io_and_keep_the_approval(key: str) -> None:
    api = FakeVastApi()
    granted = approval(Action.ATTACH_SSH_KEY, "instance:1")
    async with make_client(api) as client:
        with pytest.raises(ApiError):
            await client.attach_ssh_key(1, key, approval=granted)
    assert api.requests == [] and not granted.used


async def test_create_needs_a_label() -> None:
    api = FakeVastApi()
    granted = approval(Action.CREATE_INSTANCE, "offer:5")
    async with make_client(api) as client:
        with pytest.raises(ApiError, match="label"):
            await client.create_instance(offer_id=5, image="img", disk_gib=10, label=" ", approval=granted)
    assert api.requests == [] and not granted.used
