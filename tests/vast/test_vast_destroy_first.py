"""Destroy before paperwork: when no trace of a call can be written (the store and its journal refuse: a full disk),
a destroy still goes out — it stops the billing — while every other mutation stays unsent."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes import FakeClock, FakeVastApi
from vastui.approval import Action, Approval, ApprovalRequest, AuditKind, AuditRecord
from vastui.config import Secret
from vastui.errors import StoreError
from vastui.vast.client import HttpVastClient


class RefusingAudit:
    """An audit sink on a full disk: every record is refused."""

    def __init__(self) -> None:
        self.tried: list[AuditRecord] = []

    async def record_audit(self, record: AuditRecord) -> None:
        self.tried.append(record)
        raise StoreError("could not record the audit: database or disk is full")


def _approval(action: Action, target: str) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="test", campaign_id="c1"),
                    granted_by="own-instance rule", granted_at=0.0)


async def test_a_destroy_goes_out_when_its_audit_cannot_be_written() -> None:
    api, audit = FakeVastApi(httpx.Response(200, json={"success": True})), RefusingAudit()
    async with HttpVastClient(base_url="http://vast.test", api_key=Secret("sk-test-key-0002"), clock=FakeClock(),
                              transport=api.transport(), audit=audit) as client:
        await client.destroy_instance(7, approval=_approval(Action.DESTROY_INSTANCE, "instance:7"))
    assert [(r.method, r.url.raw_path) for r in api.requests] == [("DELETE", b"/api/v0/instances/7/")]
    assert [r.kind for r in audit.tried] == [AuditKind.SENDING, AuditKind.CALL]   # it tried to write both


async def test_a_rent_does_not_go_out_without_its_trace() -> None:
    api = FakeVastApi(httpx.Response(200, json={"success": True, "new_contract": 9}))
    async with HttpVastClient(base_url="http://vast.test", api_key=Secret("sk-test-key-0002"), clock=FakeClock(),
                              transport=api.transport(), audit=RefusingAudit()) as client:
        with pytest.raises(StoreError):
            await client.create_instance(offer_id=5, image="img", disk_gib=10, label="x",
                                         approval=_approval(Action.CREATE_INSTANCE, "offer:5"))
    assert api.requests == []
