"""Whole campaigns against a simulator whose rentals take the real marketplace's turns (``Realism`` group "keys and
the instance lifecycle"; sources in docs/api-notes.md, "Keys and the instance lifecycle"): a rent that scheduling
cannot place ends at once with a clear reason and never bills its readiness deadline, and a campaign through
``scheduling``, a null first ``show instance`` and a transient ``unknown`` still decides and leaves nothing alive.

The realism is switched on the demo's own market right after it is planned, before the first rent: the market
reads it on every request.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.campaign.campaign_support import fast_manifest, first_destroys
from vastui.campaign.candidate import CandidatePhase, NotRented
from vastui.campaign.engine import RESCHEDULE_AFTER_S
from vastui.events import CandidatePhaseChanged, Event, InstanceRented, InstanceStatusChanged
from vastui.sim.demo import open_demo
from vastui.sim.instance import InstanceStatus
from vastui.sim.lifecycle import halt
from vastui.sim.realism import Realism
from vastui.sim.turns import OCI_FAILURE, SCHEDULING_FAILURE, LifecycleOdds

TIME_SCALE = 300.0
SLOWER_SCALE = 120.0
CREDIT_USD = 500.0
SEED = 4
CALM = LifecycleOdds(scheduling=0.0, scheduling_failure=0.0, transient_unknown=0.0, null_first_show=0.0,
                     runtime_failure=0.0)


async def test_a_rent_scheduling_cannot_place_is_refused_at_once_and_rents_nothing(tmp_path: Path) -> None:
    # vast-ai/docs create-instance reference (cancel_unavail) and the CLI's help: vastui asks for cancel_unavail, so
    # a rental scheduling cannot place is an error, not a stopped instance billing its disk
    events: list[Event] = []
    async with open_demo(seed=SEED, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        demo.market.realism = Realism(cancel_unavail=True)
        demo.market.lifecycle_odds = LifecycleOdds(scheduling_failure=1.0)
        stop = demo.services.bus.listen(events.append)
        try:
            result = await demo.start(plan_approved=True).result(abort_if_cancelled="test")
        finally:
            stop()
        await demo.market.refresh()
        creates = [r for r in demo.market.request_log if r.method == "PUT" and r.path.startswith("/api/v0/asks/")]
        assert creates and all(r.status == 400 for r in creates)
        assert demo.market.every_instance() == [] and demo.market.account.credit_usd == CREDIT_USD
    skipped = [r for r in result.outcome.runs if r.phase is CandidatePhase.SKIPPED]
    assert skipped and all(r.not_rented is NotRented.NOT_SCHEDULED for r in skipped), [r.detail for r in skipped]
    assert result.receipt.decision.chosen is None
    # every offer was asked twice (the refusal is about that moment), never a third time
    per_offer = Counter(t for r in creates for t in r.target_ids)
    assert set(per_offer.values()) == {2}, per_offer


async def test_an_offer_scheduling_could_not_place_is_asked_again_before_a_reserve_takes_its_slot(
        tmp_path: Path) -> None:
    # docs/api-notes.md (cancel_unavail): the refusal says the machine's resources were not free *then*; asked
    # again a minute later the same offer is rented, and no reserve is spent on it
    events: list[Event] = []
    async with open_demo(seed=SEED, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        market = demo.market
        market.realism = Realism(cancel_unavail=True)
        market.lifecycle_odds = LifecycleOdds(**{**_calm(), "scheduling_failure": 1.0})

        def free_after_first_refusal(event: Event) -> None:   # the machine's resources free up after one refusal
            events.append(event)
            if isinstance(event, CandidatePhaseChanged) and "could not be scheduled now" in event.detail:
                market.lifecycle_odds = CALM

        stop = demo.services.bus.listen(free_after_first_refusal)
        try:
            result = await demo.start(plan_approved=True).result(abort_if_cancelled="test")
        finally:
            stop()
        creates = [r for r in market.request_log if r.method == "PUT" and r.path.startswith("/api/v0/asks/")]
    # The first wave's creates go out together: on a busy machine more than one may be refused before the first
    # refusal frees the resources. Each refused offer is refused once and asked again, once, a minute later.
    refused = [r for r in creates if r.status == 400]
    offers = {r.target_ids[0] for r in refused}
    assert refused and len(refused) == len(offers), [(r.status, r.target_ids) for r in creates]
    rented = {e.offer_id for e in events if isinstance(e, InstanceRented)}
    for offer in offers:
        refusal = next(r for r in refused if offer in r.target_ids)
        again = [r for r in creates if offer in r.target_ids and r.status == 200]
        assert len(again) == 1 and again[0].at - refusal.at >= RESCHEDULE_AFTER_S, (offer, creates)
        assert offer in rented
        # no reserve took the refused offer's slot: its candidate was rented as planned (a reserve may still take
        # the slot of a later wave's candidate passed over, a different rule)
        refused_cid = next(c.candidate_id for c in demo.plan.candidates if c.offer.id == offer)
        run = next(r for r in result.outcome.runs if r.cid == refused_cid)
        assert run.candidate.offer.id == offer, "a reserve took the slot of an offer rented when asked again"
    passed = {p.candidate_id for p in result.outcome.passed_over}
    planned = {c.offer.id for c in demo.plan.candidates}
    stand_ins = {r.candidate.offer.id for r in result.outcome.runs if r.candidate.offer.id not in planned}
    assert rented - planned <= stand_ins and all(
        r.cid in passed for r in result.outcome.runs if r.candidate.offer.id in stand_ins)
    assert result.receipt.teardown_passed


async def test_a_rental_that_comes_up_stopped_ends_at_once_and_never_bills_its_readiness_deadline(
        tmp_path: Path) -> None:
    # the official CLI's help (create instance --cancel-unavail): a scheduling failure may create a *stopped*
    # instance; vastui takes it for a failed rent and destroys it at once instead of waiting out readiness
    events: list[Event] = []
    stopped: list[int] = []
    async with open_demo(seed=SEED, time_scale=SLOWER_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        market = demo.market

        def place_stopped(event: Event) -> None:   # the marketplace could not schedule the first rental
            events.append(event)
            if isinstance(event, InstanceRented) and not stopped:
                state = market.instance_state(event.instance_id)
                assert state is not None
                halt(state, market.clock.now(), status=InstanceStatus.STOPPED,
                     why=SCHEDULING_FAILURE + "; created stopped")
                stopped.append(event.instance_id)

        stop = demo.services.bus.listen(place_stopped)
        try:
            result = await demo.start(plan_approved=True).result(abort_if_cancelled="test")
        finally:
            stop()
        await market.refresh()
        assert stopped and market.instance_ids() == []
        state = market.instance_state(stopped[0])
        assert state is not None
        destroyed_at = first_destroys(market.request_log)[stopped[0]]
        readiness_s = demo.manifest.budget.readiness_min_s
        assert destroyed_at - state.created_at < readiness_s / 2, "the stopped rental was waited on"
        assert market.charges_of(stopped[0]).gpu_usd == 0.0
    failure = next(c.outcome_detail for c in result.receipt.candidates if c.instance_id == stopped[0])
    assert "came up stopped: scheduling could not place the rental" in failure and "Scheduling failed" in failure
    assert result.receipt.teardown_passed


async def test_a_campaign_through_scheduling_null_shows_and_unknown_still_decides_and_leaves_nothing(
        tmp_path: Path) -> None:
    # docs/api-notes.md (keys and lifecycle) (the official self-test waits on unknown and empty answers; the CLI's help names scheduling)
    events: list[Event] = []
    # each turn lasts several polls (10 s apart) even at a slow machine's pace: a slower clock than the others
    async with open_demo(seed=SEED, time_scale=SLOWER_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        market = demo.market
        market.realism = Realism(auth_error_404=True, cancel_unavail=True, lifecycle_turns=True,
                                 destroy_404_documented=True)
        market.lifecycle_odds = LifecycleOdds(scheduling=1.0, scheduling_s=(60.0, 60.0), scheduling_failure=0.0,
                                              transient_unknown=1.0, unknown_after_s=(70.0, 70.0),
                                              unknown_s=(100.0, 100.0), null_first_show=1.0, runtime_failure=0.0)
        stop = demo.services.bus.listen(events.append)
        try:
            result = await demo.start(plan_approved=True).result(abort_if_cancelled="test")
        finally:
            stop()
        await market.refresh()
        assert market.instance_ids() == []
        rented = market.every_instance()
        assert rented and all(st.shows >= 2 for st in rented)   # each first show answered null, and was asked again
    receipt = result.receipt
    assert receipt.decision.chosen is not None, receipt.decision.reason
    assert receipt.teardown_passed and all(d.is_proven_gone for d in receipt.destroyed)
    seen = {e.status for e in events if isinstance(e, InstanceStatusChanged)}
    assert {"scheduling", "unknown", "running"} <= seen, seen
    failures = [c.outcome_detail for c in receipt.candidates if "unknown" in (c.outcome_detail or "")]
    assert failures == [], "a transient unknown failed a candidate"


async def _all_rentals(tmp_path: Path, odds: LifecycleOdds) -> tuple[list[tuple[int, float, float]], list[str]]:
    """A campaign where every rental takes ``odds``' turns: (id, when its row first read as failing — the runtime's
    error, else its creation —, first destroy) per rental, and the receipt's failures."""
    async with open_demo(seed=SEED, time_scale=SLOWER_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m", max_candidates=2)) as demo:
        demo.market.realism = Realism(lifecycle_turns=True)
        demo.market.lifecycle_odds = odds
        result = await demo.start(plan_approved=True).result(abort_if_cancelled="test")
        await demo.market.refresh()
        assert demo.market.instance_ids() == []
        destroyed = first_destroys(demo.market.request_log)
        rentals = [(st.id, next((at for at, text in st.log_lines if text == OCI_FAILURE), st.created_at),
                    destroyed[st.id]) for st in demo.market.every_instance()]
    assert rentals and result.receipt.teardown_passed
    return rentals, [c.outcome_detail for c in result.receipt.candidates if c.instance_id is not None]


async def test_a_runtime_error_in_status_msg_fails_the_candidate_at_once_with_its_words(tmp_path: Path) -> None:
    # docs/api-notes.md (keys and lifecycle): status_msg carries runtime errors ("OCI runtime ... failed") and the official self-test
    # aborts on them: such an instance never runs, so waiting for its readiness deadline only bills it
    rentals, failures = await _all_rentals(tmp_path, LifecycleOdds(**{**_calm(), "runtime_failure": 1.0}))
    for _, failed_at, destroyed in rentals:   # within a few polls (10 s apart) of the error, not its deadline
        assert destroyed - failed_at < 200.0, "a rental whose container cannot start was waited on"
    assert failures and all("cannot start" in f and "OCI runtime create failed" in f for f in failures), failures


async def test_an_unknown_that_outlasts_its_grace_fails_the_candidate(tmp_path: Path) -> None:
    # docs/api-notes.md (keys and lifecycle): unknown is often transient, so it is waited on for UNKNOWN_GRACE_S, and no longer
    from vastui.campaign.candidate import UNKNOWN_GRACE_S

    odds = LifecycleOdds(**{**_calm(), "transient_unknown": 1.0, "unknown_after_s": (0.0, 0.0),
                            "unknown_s": (100_000.0, 100_000.0)})
    rentals, failures = await _all_rentals(tmp_path, odds)
    for _, created, destroyed in rentals:
        assert UNKNOWN_GRACE_S <= destroyed - created < UNKNOWN_GRACE_S + 300.0
    assert failures and all("went unknown for" in f for f in failures), failures


def _calm() -> dict[str, Any]:
    return {"scheduling": 0.0, "scheduling_failure": 0.0, "transient_unknown": 0.0, "null_first_show": 0.0,
            "runtime_failure": 0.0}


async def test_a_key_revoked_mid_campaign_stops_it_at_once_and_says_what_may_still_bill(tmp_path: Path) -> None:
    # vast-cli PR#378: a revoked key is answered 404 {"error": "auth_error"}; it is neither a vanished instance nor
    # an outage to outlast: the campaign stops renting and the teardown stops retrying, naming what may still bill
    from vastui.campaign.cleanup import PATIENCE_S
    from vastui.events import Notice

    events: list[Event] = []
    revoked: list[tuple[int, float]] = []
    async with open_demo(seed=SEED, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        market = demo.market
        market.realism = Realism(auth_error_404=True)

        def revoke_at_first_rent(event: Event) -> None:
            events.append(event)
            if isinstance(event, InstanceRented) and not revoked:
                market.revoke_key(replacement="a-new-key-the-console-does-not-have")
                revoked.append((event.instance_id, market.clock.now()))

        stop = demo.services.bus.listen(revoke_at_first_rent)
        try:
            result = await demo.start(plan_approved=True).result(abort_if_cancelled="test")
        finally:
            stop()
        ended = market.clock.now()
        alive = market.instance_ids()
    assert revoked and revoked[0][0] in alive, "nothing could destroy it with the revoked key"
    assert ended - revoked[0][1] < PATIENCE_S, "the campaign kept retrying a revoked key"
    receipt = result.receipt
    assert not receipt.teardown_passed and set(alive) <= set(receipt.leaked_instance_ids)
    texts = [e.text for e in events if isinstance(e, Notice)]
    assert any(t.startswith("campaign stopped: API key rejected") for t in texts), texts
    assert any("teardown stopped" in t for t in texts), texts
    assert "a-new-key" not in " ".join(texts)
