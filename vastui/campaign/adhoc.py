"""Ad-hoc rentals: what an operator rents by hand at the console is owned the way a campaign's instances are.

The console's session is an *ad-hoc campaign* in the store (its manifest is a fixed placeholder, its phase
``ad-hoc``), claimed by the console's process. Each rent writes an intent before the create call and binds it
after, under a vastui label (``vastui-<campaign>-<renter>-<offer>``), exactly as a campaign's candidate does. So the
leak watcher judges these instances by its usual rules (``campaign/watch.py``): owned while the console that rented
them runs and their deadline (the rent's cap) has not passed; a leak when the console died without a word, when
the deadline passed, or when they are stopped. Quitting with nothing billing finishes the ad-hoc campaign; quitting
and leaving instances billing on purpose drops the console's claim, so they stay owned until their deadline.
"""

from __future__ import annotations

import os
import secrets
import time

from vastui.campaign.labels import build_label
from vastui.campaign.owner import current_owner
from vastui.clock import Clock
from vastui.store import Campaign, Intent, SqliteStore
from vastui.store.records import CampaignPhase

ADHOC_DIGEST = "adhoc-console"
ADHOC_PHASE = "ad-hoc"
ADHOC_PREFIX = "adhoc-"
RENTER = "console"             # the candidate part of the label: who rented it


def is_adhoc(campaign: Campaign) -> bool:
    """True for the console's ad-hoc campaigns (never a workload's): kept out of receipts and host knowledge."""
    return campaign.manifest_digest == ADHOC_DIGEST


def is_adhoc_id(campaign_id: str | None) -> bool:
    return campaign_id is not None and campaign_id.startswith(ADHOC_PREFIX)


def renter_of(campaign_id: str | None) -> str | None:
    """Who rented an instance of this campaign, in words: ``ad-hoc (console)`` or None for a workload campaign."""
    return f"ad-hoc ({RENTER})" if is_adhoc_id(campaign_id) else None


class AdhocOwner:
    """The console session's ad-hoc campaign, created in the store on the first rent."""

    def __init__(self, *, store: SqliteStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.campaign_id: str | None = None

    async def _ensure(self) -> str:
        if self.campaign_id is not None:
            return self.campaign_id
        now = self._clock.now()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        campaign_id = f"{ADHOC_PREFIX}{stamp}-{secrets.token_hex(2)}"
        if await self._store.manifest(ADHOC_DIGEST) is None:
            await self._store.save_manifest(digest=ADHOC_DIGEST, name="ad-hoc rentals at the console",
                                            toml_text="# no workload: instances rented by hand at the console\n",
                                            stored_at=now)
        await self._store.create_campaign(campaign_id=campaign_id, manifest_digest=ADHOC_DIGEST, created_at=now,
                                          phase=ADHOC_PHASE)
        await self._store.claim_campaign(current_owner(campaign_id, at=now))  # this console owns it while it runs
        self.campaign_id = campaign_id
        return campaign_id

    async def intend(self, *, offer_id: int, machine_id: int | None, dph_usd: float | None,
                     deadline_at: float | None) -> Intent:
        """Write the intent (and the ad-hoc campaign, the first time) before the create call; its label is the
        one to create the instance under."""
        campaign_id = await self._ensure()
        return await self._store.record_intent(campaign_id=campaign_id, offer_id=offer_id,
                                               label=build_label(campaign_id=campaign_id, candidate_id=RENTER,
                                                                 offer_id=offer_id),
                                               at=self._clock.now(), machine_id=machine_id, dph_usd=dph_usd,
                                               deadline_at=deadline_at)

    async def bound(self, intent: Intent, instance_id: int) -> None:
        await self._store.bind_intent(intent_id=intent.intent_id, instance_id=instance_id, at=self._clock.now())
        await self._store.record_transition(instance_id=instance_id, state="created", at=self._clock.now())

    async def not_rented(self, intent: Intent, error: str) -> None:
        """The create call failed: the intent is ruled out (nothing to look for)."""
        await self._store.rule_out_intent(intent_id=intent.intent_id, at=self._clock.now(), reason=error)

    async def maybe_rented(self, intent: Intent, error: str) -> None:
        """The create call's outcome is unknown: the intent stays owned (the watcher finds it by its label)."""
        await self._store.fail_intent(intent_id=intent.intent_id, error=error, at=self._clock.now())

    async def close(self, *, leaving_billing: bool) -> None:
        """The console quits. Nothing billing: the ad-hoc campaign is finished. Instances left billing on purpose:
        the claim is dropped, so they stay owned until their deadline instead of reading as a dead console's."""
        if self.campaign_id is None:
            return
        if leaving_billing:
            await self._store.release_campaign(self.campaign_id, pid=os.getpid())
        else:
            await self._store.finish_campaign(campaign_id=self.campaign_id, phase=CampaignPhase.FINISHED,
                                              at=self._clock.now(), note="the console quit with nothing billing")
            await self._store.release_campaign(self.campaign_id, pid=os.getpid())
