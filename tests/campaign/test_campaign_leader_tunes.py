"""Who gets instance time. The leader leaves the race's measuring for tuning with the winner's minimum blocks,
its SLO certified, its last independent run under way, not tuned before, and something the manifest lets it try; a
waiting candidate is passed over unrented when even twice its prior could not win; a candidate done measuring that
the decision would choose is tuned too."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.campaign.campaign_support import fast_manifest
from vastui.bench.manifest import Manifest, MeasureRule, load_manifest
from vastui.bench.select import Race, RaceCandidate
from vastui.bench.stats import Block
from vastui.campaign.candidate import CandidateRun
from vastui.campaign.charges import prior_cost_inputs
from vastui.campaign.measure import MeasuredBlock
from vastui.campaign.measuring import MeasuringEnded, MeasuringStop, RaceState
from vastui.campaign.plan import build_plan
from vastui.campaign.slots import Slot
from vastui.sim.offers import offer_row
from vastui.sim.world import generate_world
from vastui.vast.models import Offer

NOW = 1_800_000_000.0


def _state(manifest: Manifest, race: Race | None = None) -> RaceState:
    """The race's shared state, nobody leading yet (``leader_may_tune`` reads no race)."""
    return RaceState(race=race or Race([], units=manifest.production_units), manifest=manifest)


def _run(manifest: Manifest, *, blocks: int, runs_done: int, index: int = 0) -> CandidateRun:
    world = generate_world(7, n_machines=80, now=NOW)
    offers = [Offer.from_api(offer_row(m, now=NOW, rented=False), where="row") for m in world.machines]
    run = CandidateRun(build_plan(campaign_id="c", manifest=manifest, offers=offers, knowledge=(),
                                  bad_hosts=()).candidates[index])
    block = MeasuredBlock(block=Block(units=100, duration_s=10.0, steps=10), start_t=0.0, end_t=10.0,
                          data_wait_share=0.0, gpu_util_pct=None, mem_used_mib=None, mem_total_mib=None,
                          pcie_rx_gbps=None, throttled_share=None)
    run.blocks = [block] * blocks
    run.measured_runs = runs_done
    return run


def test_the_leader_tunes_only_with_enough_blocks_a_certified_slo_and_something_to_try(tmp_path: Path) -> None:
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    need = manifest.measure.winner_min_blocks
    slot = Slot(_run(manifest, blocks=need, runs_done=manifest.measure.min_runs - 1), certified=True)
    state = _leading(manifest, slot)
    assert state.leader_may_tune(slot)

    assert not _state(manifest).leader_may_tune(slot)                     # not the leader
    state.choice_now = "c9"
    assert not state.leader_may_tune(slot)    # leads by point, but a narrower rival would be chosen: measures on
    state.choice_now = slot.cid
    slot.certified = False
    assert not state.leader_may_tune(slot)                                # SLO not yet certified
    slot.certified = True
    few = Slot(_run(manifest, blocks=need - 1, runs_done=1), certified=True)
    assert not _leading(manifest, few).leader_may_tune(few)               # too few blocks
    assert manifest.measure.min_runs == 2
    early = Slot(_run(manifest, blocks=need, runs_done=0), certified=True)   # in its first run of two: not yet
    assert not _leading(manifest, early).leader_may_tune(early)
    slot.tuning_started = True
    assert not state.leader_may_tune(slot)                                # one tuning per candidate
    slot.tuning_started = False
    other = Slot(_run(manifest, blocks=need, runs_done=1, index=1), tuning_started=True)
    assert other.cid != slot.cid and state.leader_may_tune(slot)          # another's tuning does not stop it
    untunable = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",)))
    assert not _leading(untunable, slot).leader_may_tune(slot)            # nothing the manifest lets it try


def test_a_leader_stopped_for_tuning_stays_bound_for_it_when_the_lead_moves_on(tmp_path: Path) -> None:
    """Its measuring ended for tuning; a block from another candidate took the lead before its instance got there.
    It is still tuned (before, it sat idle until the race ended and was never tuned)."""
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    slot = Slot(_run(manifest, blocks=manifest.measure.winner_min_blocks, runs_done=manifest.measure.min_runs - 1),
                certified=True)
    state = _leading(manifest, slot)
    reason = state.stop_reason(slot, now=NOW)
    assert reason == MeasuringStop(MeasuringEnded.TO_TUNING, blocks=manifest.measure.winner_min_blocks)
    assert slot.tune_next
    state.leader = "c9"
    assert not state.leader_may_tune(slot)
    assert state.stop_reason(slot, now=NOW) == reason and slot.tune_next


def _leading(manifest: Manifest, slot: Slot, race: Race | None = None) -> RaceState:
    state = _state(manifest, race)
    state.leader, state.choice_now = slot.cid, slot.cid
    return state


async def test_a_candidate_that_ran_on_to_the_narrower_interval_while_the_leader_tuned_is_tuned_too(
        tmp_path: Path) -> None:
    """Seen in the decision benchmark: the leader (the lowest cost point) left for tuning with 5 blocks; another ran
    on to max_blocks, ended with the lower upper bound and was chosen, at its first profile (a third below its
    best). The decision chooses by the upper bound, so a candidate done measuring that it would choose now is tuned
    as well; one it would not choose is not."""
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    leader, steady = _run(manifest, blocks=0, runs_done=2), _run(manifest, blocks=0, runs_done=2, index=1)
    cost = prior_cost_inputs(leader.candidate, manifest)
    race = Race([RaceCandidate(leader.cid, cost), RaceCandidate(steady.cid, cost)], units=manifest.production_units,
                measure=MeasureRule(run_cv_prior=0.0), resamples=400)
    for theta in (120.0, 84.0, 118.0, 86.0, 117.0):         # the lower cost point, its blocks far apart
        race.add_block(leader.cid, Block(units=theta * 30.0, duration_s=30.0, steps=30))
    for theta in (99.0, 100.0, 101.0, 100.0, 99.5, 100.5, 100.0, 99.8):   # a little slower, and steady
        race.add_block(steady.cid, Block(units=theta * 30.0, duration_s=30.0, steps=30))
    assert race.decide().leader == leader.cid
    leading, steady_slot = Slot(leader), Slot(steady)
    state = _leading(manifest, leading, race)
    leading.tuning_started = True
    assert await state.would_be_chosen(steady_slot)
    assert not await state.would_be_chosen(leading)          # tuned already
    leading.tuning_started, steady_slot.tuning_started = False, True
    assert not await state.would_be_chosen(steady_slot)      # once each
    steady_slot.tuning_started = False
    untunable = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",)))
    assert not await _leading(untunable, leading, race).would_be_chosen(steady_slot)   # nothing the manifest lets it try
    for theta in (100.0, 100.0, 100.0):                       # the leader's interval narrows: it is the choice
        race.add_block(leader.cid, Block(units=theta * 30.0, duration_s=30.0, steps=30))
    race.add_block(leader.cid, Block(units=103.0 * 30.0, duration_s=30.0, steps=30))
    assert not await state.would_be_chosen(steady_slot)
