"""Who runs a campaign (campaign/owner.py and the store's claims): a live owner is told from a gone one, a reused
pid is not its owner, and ``campaign resume`` refuses a campaign whose console is still running."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from vastui.campaign.owner import OwnerState, current_owner, owner_state, pid_started
from vastui.campaign.session import CampaignServices, resume_campaign
from vastui.errors import CampaignError
from vastui.store import SqliteStore


async def _store_with_campaign(tmp_path: Path, campaign_id: str) -> SqliteStore:
    store = await SqliteStore.open(tmp_path / "state.sqlite3")
    await store.save_manifest(digest="sha256:" + "0" * 64, name="w", toml_text="[workload]\n", stored_at=1.0)
    await store.create_campaign(campaign_id=campaign_id, manifest_digest="sha256:" + "0" * 64, created_at=1.0,
                                phase="measuring")
    return store


def test_an_owner_is_alive_gone_or_on_a_host_this_one_cannot_see() -> None:
    me = current_owner("c1", at=5.0)
    assert owner_state(me) is OwnerState.ALIVE
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert owner_state(replace(me, pid=ended.pid)) is OwnerState.GONE
    if me.pid_started:   # Linux: a live pid that started at another time is a reused pid, not the owner
        assert owner_state(replace(me, pid_started=str(int(me.pid_started) + 1))) is OwnerState.GONE
    assert owner_state(replace(me, host=me.host + "-elsewhere")) is OwnerState.UNKNOWN


async def test_claims_round_trip_and_only_the_claimant_releases(tmp_path: Path) -> None:
    store = await _store_with_campaign(tmp_path, "c1")
    try:
        me = current_owner("c1", at=5.0)
        await store.claim_campaign(me)
        assert await store.campaign_owners() == {"c1": me}
        await store.release_campaign("c1", pid=me.pid + 1)    # someone else's release leaves the claim
        assert await store.campaign_owners() == {"c1": me}
        await store.release_campaign("c1", pid=me.pid)
        assert await store.campaign_owners() == {}
    finally:
        await store.close()


async def test_resume_refuses_a_campaign_whose_console_still_runs(tmp_path: Path) -> None:
    store = await _store_with_campaign(tmp_path, "clive")
    console = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = replace(current_owner("clive", at=5.0), pid=console.pid, pid_started=pid_started(console.pid))
        await store.claim_campaign(owner)
        # the refusal comes before anything touches the marketplace (none is given here)
        services = CampaignServices(store=store, market=None, executor=None, clock=None, bus=None,  # type: ignore[arg-type]
                            redact=None)  # type: ignore[arg-type]
        with pytest.raises(CampaignError, match=re.escape(f"still running (pid {console.pid}")):
            await resume_campaign(services, campaign_id="clive", approver=None)  # type: ignore[arg-type]
        campaign = await store.campaign("clive")
        assert campaign is not None and campaign.is_active   # nothing was changed
    finally:
        console.kill()
        console.wait()
        await store.close()
