"""Intents before create, binding, lifecycle transitions, destroy evidence, and what a campaign may own."""

from __future__ import annotations

import pytest

from tests.store.store_support import FOREIGN_KEY, UNIQUE
from vastui.errors import StoreError
from vastui.store import InstanceState, IntentStatus, Store


async def test_intent_is_pending_then_bound(campaign_store: Store) -> None:
    intent = await campaign_store.record_intent(campaign_id="c1", offer_id=501, label="vastui:c1", at=10.0,
                                                machine_id=42, dph_usd=0.45, deadline_at=610.0)
    assert intent.status is IntentStatus.PENDING and intent.instance_id is None
    assert (intent.offer_id, intent.label, intent.created_at, intent.machine_id, intent.dph_usd,
            intent.deadline_at) == (501, "vastui:c1", 10.0, 42, 0.45, 610.0)
    bound = await campaign_store.bind_intent(intent_id=intent.intent_id, instance_id=9001, at=11.0)
    assert bound.status is IntentStatus.BOUND and bound.instance_id == 9001 and bound.bound_at == 11.0
    assert await campaign_store.intents(campaign_id="c1") == [bound]
    assert await campaign_store.intent_for_instance(9001) == bound
    assert await campaign_store.intent_for_instance(1234) is None


async def test_failed_create_stays_owned_until_ruled_out_or_found(campaign_store: Store) -> None:
    store = campaign_store
    lost = await store.record_intent(campaign_id="c1", offer_id=1, label="vastui:c1", at=1.0)
    found = await store.record_intent(campaign_id="c1", offer_id=2, label="vastui:c1", at=1.0)
    for intent in (lost, found):
        failed = await store.fail_intent(intent_id=intent.intent_id, error="HTTP 502 on create", at=2.0)
        assert failed.status is IntentStatus.FAILED and failed.error == "HTTP 502 on create"
    owned = await store.owned_instances(campaign_id="c1")
    assert [(o.intent.intent_id, o.intent.status, o.state) for o in owned] == [
        (lost.intent_id, IntentStatus.FAILED, None), (found.intent_id, IntentStatus.FAILED, None)]
    ruled = await store.rule_out_intent(intent_id=lost.intent_id, at=3.0, reason="absent from 2 listings by label")
    assert ruled.status is IntentStatus.RULED_OUT and ruled.resolved_at == 3.0
    assert ruled.error == "HTTP 502 on create; absent from 2 listings by label"
    bound = await store.bind_intent(intent_id=found.intent_id, instance_id=77, at=4.0)  # a listing found it by label
    assert bound.status is IntentStatus.BOUND
    assert [o.intent.intent_id for o in await store.owned_instances(campaign_id="c1")] == [found.intent_id]


async def test_intent_transitions_are_guarded(campaign_store: Store) -> None:
    store = campaign_store
    intent = await store.record_intent(campaign_id="c1", offer_id=1, label="l", at=1.0)
    await store.bind_intent(intent_id=intent.intent_id, instance_id=5, at=2.0)
    with pytest.raises(StoreError, match="cannot be marked failed: it is bound"):
        await store.fail_intent(intent_id=intent.intent_id, error="late", at=3.0)
    with pytest.raises(StoreError, match="cannot be ruled out: it is bound"):
        await store.rule_out_intent(intent_id=intent.intent_id, at=3.0, reason="x")
    with pytest.raises(StoreError, match="no such intent"):
        await store.bind_intent(intent_id=999, instance_id=6, at=3.0)
    other = await store.record_intent(campaign_id="c1", offer_id=2, label="l", at=1.0)
    with pytest.raises(StoreError, match=UNIQUE):  # one instance belongs to one intent
        await store.bind_intent(intent_id=other.intent_id, instance_id=5, at=3.0)
    with pytest.raises(StoreError, match=FOREIGN_KEY):
        await store.record_intent(campaign_id="no-such-campaign", offer_id=3, label="l", at=1.0)
    assert (await store.intents(campaign_id="c1"))[1].status is IntentStatus.PENDING


async def test_transitions_are_kept_in_order_and_owned_shows_the_latest(campaign_store: Store) -> None:
    store = campaign_store
    intent = await store.record_intent(campaign_id="c1", offer_id=1, label="l", at=1.0)
    await store.bind_intent(intent_id=intent.intent_id, instance_id=31, at=2.0)
    states = [(InstanceState.CREATED, 2.0), (InstanceState.LOADING, 3.0), (InstanceState.RUNNING, 50.0),
              ("scheduling", 51.0), (InstanceState.EXITED, 60.0)]
    for state, at in states:
        await store.record_transition(instance_id=31, state=state, at=at, detail=f"at {at}")
    history = await store.transitions(31)
    assert [(t.state, t.at, t.detail) for t in history] == [(str(s), a, f"at {a}") for s, a in states]
    [owned] = await store.owned_instances()
    assert (owned.state, owned.state_at) == ("exited", 60.0)


async def test_gone_needs_two_listings_and_releases_ownership(campaign_store: Store) -> None:
    store = campaign_store
    for n, campaign in ((1, "c1"), (2, "c1"), (3, "c2")):
        intent = await store.record_intent(campaign_id=campaign, offer_id=n, label=f"vastui:{campaign}", at=1.0)
        await store.bind_intent(intent_id=intent.intent_id, instance_id=100 + n, at=2.0)
        await store.record_transition(instance_id=100 + n, state=InstanceState.DESTROY_REQUESTED, at=3.0)
    with pytest.raises(StoreError, match="2 complete listings"):
        await store.record_gone(instance_id=101, missed_listing_at=[4.0], at=4.0)
    evidence = await store.record_gone(instance_id=101, missed_listing_at=[4.0, 9.0], at=9.0)
    assert (evidence.instance_id, evidence.campaign_id, evidence.missed_listing_at, evidence.confirmed_at) == (
        101, "c1", (4.0, 9.0), 9.0)
    assert [t.state for t in await store.transitions(101)] == ["destroy_requested", "gone"]
    with pytest.raises(StoreError, match=UNIQUE):
        await store.record_gone(instance_id=101, missed_listing_at=[10.0, 11.0], at=11.0)
    assert [o.intent.instance_id for o in await store.owned_instances(campaign_id="c1")] == [102]
    assert [o.intent.instance_id for o in await store.owned_instances()] == [102, 103]
    assert await store.destroy_evidence(campaign_id="c1") == [evidence]
    assert await store.destroy_evidence(campaign_id="c2") == []
    assert await store.destroy_evidence() == [evidence]
