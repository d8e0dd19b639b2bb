"""Who wrote it: every campaign, intent (so every instance), kept approval request and audit record says which
operator, host and process wrote it, and a second process on the same store reads it so (schema v6)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from tests.store.store_support import DIGEST
from vastui.approval import Action, AuditKind, AuditRecord
from vastui.store import PostgresStore, SqliteStore, Store
from vastui.store.records import CampaignOwner, Writer


async def _second(store: Store, tmp_path: Path) -> Store:
    """Another process's store on the same database (another data directory)."""
    if isinstance(store, PostgresStore):
        return await PostgresStore.open(store.location, anchor=tmp_path / "bo" / "team")
    assert isinstance(store, SqliteStore)
    return await SqliteStore.open(store.path)


async def test_every_row_a_console_writes_names_its_operator_host_and_process(store: Store, tmp_path: Path) -> None:
    store.act_as("ana")
    ana = Writer("ana", socket.gethostname(), os.getpid())
    assert store.writer == ana
    await store.save_manifest(digest=DIGEST, name="resnet", toml_text="", stored_at=1.0)
    campaign = await store.create_campaign(campaign_id="c1", manifest_digest=DIGEST, created_at=1.0, phase="plan")
    intent = await store.record_intent(campaign_id="c1", offer_id=501, label="vastui:c1", at=2.0)
    await store.bind_intent(intent_id=intent.intent_id, instance_id=9001, at=3.0)
    kept = await store.keep_request(campaign_id="c1", request_id="r1", action="create_instance", target="offer:502",
                                    summary="rent 502", cost_cap_usd=0.5, gpu_name="RTX 4090", num_gpus=1,
                                    dph_usd=0.4, deadline_at=None, asked_at=4.0, expires_at=904.0)
    await store.record_audit(AuditRecord(5.0, AuditKind.APPROVAL, Action.CREATE_INSTANCE, "offer:502", "a1", "ana",
                                         "granted", "c1"))
    await store.claim_campaign(CampaignOwner(campaign_id="c1", host=ana.host, pid=ana.pid, pid_started="",
                                             claimed_at=6.0))
    assert campaign.by == intent.by == kept.by == ana
    other = await _second(store, tmp_path)
    try:
        other.act_as("bo")
        [owned] = await other.owned_instances(campaign_id="c1")
        read = await other.campaign("c1")
        [request] = await other.kept_requests("c1")
        [audit] = await other.audit_records(campaign_id="c1")
        owners = await other.campaign_owners()
        assert read is not None and read.by == owned.intent.by == request.by == ana   # bo reads ana's as ana's
        assert audit.by == ana.short and owners["c1"].operator == "ana"
        mine = await other.record_intent(campaign_id="c1", offer_id=503, label="vastui:c1", at=7.0)
        assert mine.by is not None and mine.by.operator == "bo"
    finally:
        await other.close()
