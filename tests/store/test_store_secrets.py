"""The API key never reaches the database: every text written passes the secret guard (the file bytes are grepped)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from tests.pg_server import PgServer
from tests.store.store_support import offer_snapshots
from vastui.approval import Action, AuditKind, AuditRecord, offer_target
from vastui.config import Secret
from vastui.store import GpuSample, InstanceState, OfferSnapshot, PostgresStore, RunStatus, SqliteStore, Store

API_KEY = "4f9c2a7be1d04c6f8a3e5b7d9c1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e"
MARKER = "marker-7be1d04c"  # written next to the key: proves the grep can see what was written


def _database_bytes(db: Path) -> bytes:
    files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    return b"".join(path.read_bytes() for path in files if path.exists())


async def _campaign_with_the_key_everywhere(store: Store, key: str = API_KEY) -> None:
    """A realistic campaign in which the key leaks into offers, errors, stats, the audit log and the receipt."""
    leak = f"{MARKER} api_key={key} Authorization: Bearer {key}"
    await store.save_manifest(digest="d1", name="resnet", toml_text=f"# {leak}\nname = 'resnet'\n", stored_at=1.0)
    await store.create_campaign(campaign_id="c1", manifest_digest="d1", created_at=1.0, phase="plan")
    await store.set_campaign_phase(campaign_id="c1", phase="rent", at=2.0, note=leak)
    offer = {"id": 501, "machine_id": 7, "url": f"https://console.vast.ai/api/v0/bundles/?api_key={key}",
             "note": MARKER}
    await store.save_offer_snapshots([OfferSnapshot("c1", 501, 7, "RTX 4090", 1, 0.4, 2.0, json.dumps(offer))])
    failed = await store.record_intent(campaign_id="c1", offer_id=501, label=f"vastui:c1 {leak}", at=3.0)
    await store.fail_intent(intent_id=failed.intent_id, error=f"HTTP 502 from PUT /asks/501/ {leak}", at=4.0)
    bound = await store.record_intent(campaign_id="c1", offer_id=502, label="vastui:c1", at=5.0)
    await store.bind_intent(intent_id=bound.intent_id, instance_id=9001, at=6.0)
    await store.record_transition(instance_id=9001, state=InstanceState.LOADING, at=7.0, detail=leak)
    await store.record_audit(AuditRecord(8.0, AuditKind.CALL, Action.CREATE_INSTANCE, offer_target(502), "a1", None,
                                         f"created 9001 {leak}", "c1"))
    run = await store.start_run(campaign_id="c1", instance_id=9001, machine_id=7, gpu_name="RTX 4090", num_gpus=1,
                                workload_digest="d1", variant_json=json.dumps({"env": leak}), started_at=9.0)
    await store.add_measurements(samples=[GpuSample(run_id=run.run_id, at=10.0 + i, gpu_index=0, util_pct=90.0)
                                          for i in range(20)])
    await store.finish_run(run_id=run.run_id, status=RunStatus.ERROR, at=30.0, stats_json=json.dumps({"log": leak}),
                           error=leak)
    await store.record_bad_host(machine_id=7, reason=leak, evidence_json=json.dumps({"stderr": leak}),
                                recorded_at=31.0, expires_at=None)
    await store.save_receipt(campaign_id="c1", created_at=32.0, json_text=json.dumps({"note": leak}),
                             markdown_text=f"# Receipt\n{leak}\n")


async def test_the_api_key_never_reaches_the_database_files(tmp_path: Path) -> None:
    db = tmp_path / "vastui.sqlite3"
    store = await SqliteStore.open(db)
    store.register_secret(Secret(API_KEY))
    try:
        await _campaign_with_the_key_everywhere(store)
        while_open = _database_bytes(db)  # the WAL still holds the recent pages here
        assert MARKER.encode() in while_open
        assert API_KEY.encode() not in while_open
        assert API_KEY[:32].encode() not in while_open
        [intent, _] = await store.intents(campaign_id="c1")
        assert intent.error is not None and "<redacted>" in intent.error and MARKER in intent.error
        [snapshot] = offer_snapshots(store, campaign_id="c1")
        assert json.loads(snapshot.snapshot_json)["url"].endswith("api_key=<redacted>")  # still valid JSON
    finally:
        await store.close()
    after_close = _database_bytes(db)  # checkpointed into the main file
    assert MARKER.encode() in after_close
    assert API_KEY.encode() not in after_close


async def test_the_grep_would_catch_an_unregistered_key(tmp_path: Path) -> None:
    db = tmp_path / "vastui.sqlite3"
    async with await SqliteStore.open(db) as store:
        await _campaign_with_the_key_everywhere(store)
        bearer_only = await store.intents(campaign_id="c1")
    # without register_secret only the Bearer form is caught; the bare key reaches the file
    assert API_KEY.encode() in _database_bytes(db)
    assert bearer_only[0].error is not None and f"Bearer {API_KEY}" not in bearer_only[0].error


async def test_the_api_key_never_reaches_the_postgres_server_s_files(pg_server: PgServer, pg_url: str,
                                                                      tmp_path: Path) -> None:
    store = await PostgresStore.open(pg_url, anchor=tmp_path / "data" / "team")
    store.register_secret(Secret(API_KEY))
    try:
        await _campaign_with_the_key_everywhere(store)
        pg_server.checkpoint()   # every committed page in the data files, beside the write-ahead log
        written = pg_server.data_bytes()
        assert MARKER.encode() in written
        assert API_KEY.encode() not in written and API_KEY[:32].encode() not in written
        [snapshot] = offer_snapshots(store, campaign_id="c1")
        assert json.loads(snapshot.snapshot_json)["url"].endswith("api_key=<redacted>")
    finally:
        await store.close()


async def test_the_grep_of_the_server_s_files_would_catch_an_unregistered_key(pg_server: PgServer, pg_url: str,
                                                                               tmp_path: Path) -> None:
    key = secrets.token_hex(32)   # its own key: the server's log keeps what this test writes for the session
    async with await PostgresStore.open(pg_url, anchor=tmp_path / "data" / "team") as store:
        await _campaign_with_the_key_everywhere(store, key)
    pg_server.checkpoint()
    assert key.encode() in pg_server.data_bytes()
