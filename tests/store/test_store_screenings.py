"""Screenings (store/screenings.py, campaign/inherited.py): what a campaign's knob screening kept is stored, read back
as a later campaign of the workload inherits it, never rewritten, and a stored text that is not one is refused
with what is wrong."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import psycopg
import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.store.store_support import DIGEST, raw_rows
from vastui.bench.manifest import load_manifest
from vastui.bench.tuning import Profile
from vastui.campaign.inherited import BatchSeen, InheritedScreening
from vastui.errors import StoreError
from vastui.store import Store

KEPT = InheritedScreening(campaign_id="c1", screened_at=500.0, start=Profile(64, "fp32", 4),
                          profile=Profile(256, "bf16", 8),
                          batches=(BatchSeen(64, "fp32", 24_000.0, True), BatchSeen(256, "bf16", 24_000.0, True),
                                   BatchSeen(512, "bf16", 24_000.0, False)),
                          knobs=("precision fp32 -> bf16: kept (gain +39.0% [+25.0%, +48.0%])",))


async def test_the_latest_screening_of_a_workload_is_read_back_whole_and_an_older_one_is_not(
        campaign_store: Store) -> None:
    store = campaign_store
    assert await store.latest_screening(workload_digest=DIGEST) is None
    await store.save_screening(campaign_id="c2", workload_digest=DIGEST, screened_at=100.0,
                               json_text=json.dumps({"old": True}))
    await store.save_screening(campaign_id="c1", workload_digest=DIGEST, screened_at=500.0, json_text=KEPT.to_json())
    await store.save_screening(campaign_id="c2", workload_digest="sha256:another", screened_at=900.0,
                               json_text=json.dumps({"other": True}))
    latest = await store.latest_screening(workload_digest=DIGEST)
    assert latest is not None and (latest.campaign_id, latest.screened_at) == ("c1", 500.0)
    assert InheritedScreening.from_json(latest.json_text, campaign_id=latest.campaign_id,
                                        screened_at=latest.screened_at) == KEPT
    assert await store.latest_screening(workload_digest=DIGEST, since=500.0) == latest
    assert await store.latest_screening(workload_digest=DIGEST, since=500.5) is None   # too old for this campaign


async def test_a_screening_is_never_rewritten_and_its_text_must_be_json(campaign_store: Store) -> None:
    await campaign_store.save_screening(campaign_id="c1", workload_digest=DIGEST, screened_at=1.0,
                                        json_text=KEPT.to_json())
    with pytest.raises(StoreError, match="the screening of campaign c1"):
        await campaign_store.save_screening(campaign_id="c1", workload_digest=DIGEST, screened_at=2.0,
                                            json_text="{not json")
    for sql in ("UPDATE screenings SET json_text = '{}'", "DELETE FROM screenings"):
        with pytest.raises((sqlite3.IntegrityError, psycopg.errors.RaiseException), match="append-only"):
            raw_rows(campaign_store, sql)


@pytest.mark.parametrize(("text", "says"), [
    ("[1, 2", "not JSON"),
    ('{"start": {}, "profile": {}}', "lacks start, profile, batches or knobs"),
    ('{"start": {"batch_size": "64"}, "profile": {}, "batches": [], "knobs": []}', "malformed profile"),
    (json.dumps({**json.loads(KEPT.to_json()), "batches": [[64, "fp32", "lots", True]]}), "malformed batch entry"),
    (json.dumps({**json.loads(KEPT.to_json()), "knobs": [3]}), "malformed knob descriptions"),
    (json.dumps({**json.loads(KEPT.to_json()), "trials": [{"knob": 3}]}), "malformed trial: knob is 3"),
    (json.dumps({**json.loads(KEPT.to_json()), "trials": [{"knob": "precision", "baseline": "fp32", "value": "bf16",
                                                           "gain": [0.1, "x", 0.2]}]}), "malformed trial gain"),
    (json.dumps({**json.loads(KEPT.to_json()), "screener_gpus": "two"}), "malformed screener GPU count"),
])
def test_a_stored_screening_that_is_not_one_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=f"campaign c7 .*{says}|campaign c7 {says}"):
        InheritedScreening.from_json(text, campaign_id="c7", screened_at=0.0)


def test_a_run_variant_reads_back_as_its_profile_and_anything_else_as_none() -> None:
    profile = Profile(128, "bf16", 8, 2)
    assert Profile.from_json(profile.to_json()) == profile
    assert Profile.from_json("{}") is None and Profile.from_json('{"batch": 64}') is None
    assert Profile.from_json(json.dumps({"batch_size": True, "precision": None, "loaders": 1, "gpu_count": 1})) is None


def test_each_gpu_class_inherits_the_largest_kept_batch_it_is_known_to_hold(tmp_path: Path) -> None:
    assert KEPT.profile_for(gpu_ram_mb=24_000.0, gpu_count=1) == Profile(256, "bf16", 8, 1)
    assert KEPT.profile_for(gpu_ram_mb=80_000.0, gpu_count=2) == Profile(256, "bf16", 8, 2)
    # less memory than the screener's: nothing says 256 fits, so the first profile's batch
    assert KEPT.profile_for(gpu_ram_mb=12_000.0, gpu_count=1) == Profile(64, "bf16", 8, 1)
    assert KEPT.profile_for(gpu_ram_mb=None, gpu_count=1).batch_size == 64


def test_a_manifest_that_starts_elsewhere_or_no_longer_allows_the_kept_values_does_not_inherit(
        tmp_path: Path) -> None:
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    start = Profile.first(manifest.tuning, gpu_count=None)
    bf16 = Profile(start.batch_size, "bf16", start.loaders)
    fits = InheritedScreening(campaign_id="c1", screened_at=0.0, start=start, profile=bf16, batches=(), knobs=())
    assert fits.unusable(manifest) is None
    elsewhere = InheritedScreening(campaign_id="c1", screened_at=0.0, start=bf16, profile=bf16, batches=(), knobs=())
    assert "the manifest now starts at" in (elsewhere.unusable(manifest) or "")
    fp8 = InheritedScreening(campaign_id="c1", screened_at=0.0, start=start, profile=Profile(start.batch_size, "fp8",
                             start.loaders), batches=(), knobs=())
    assert "no longer allows" in (fp8.unusable(manifest) or "")
