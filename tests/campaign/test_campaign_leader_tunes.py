"""Who gets instance time. The leader leaves the race's measuring for tuning with the winner's minimum blocks,
its SLO certified, its last independent run under way, not tuned before, and something the manifest lets it try; a
waiting candidate is passed over unrented when even twice its prior could not win; a candidate done measuring that
the decision would choose is tuned too."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from tests.campaign.campaign_support import fast_manifest
from vastui.bench.cost import cost_per_accepted_unit
from vastui.bench.manifest import Manifest, MeasureRule, load_manifest
from vastui.bench.select import Race, RaceCandidate
from vastui.bench.stats import Block
from vastui.campaign.candidate import CandidateRun
from vastui.campaign.charges import PRIOR_OPTIMISM, hopeless_reason, prior_cost_inputs
from vastui.campaign.measure import MeasuredBlock
from vastui.campaign.measuring import Measuring
from vastui.campaign.plan import build_plan
from vastui.sim.offers import offer_row
from vastui.sim.world import generate_world
from vastui.vast.models import Offer

NOW = 1_800_000_000.0


class _Engine(Measuring):
    """Only the state ``leader_may_tune`` reads."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self._leader = None
        self._tuning_started = set()
        self._certified = set()
        self._choice_now = None
        self._tune_next = set()
        self._stop = defaultdict(asyncio.Event)
        self._finished = asyncio.Event()


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
    engine = _Engine(manifest)
    run = _run(manifest, blocks=need, runs_done=manifest.measure.min_runs - 1)
    engine._leader, engine._certified, engine._choice_now = run.cid, {run.cid}, run.cid
    assert engine.leader_may_tune(run)

    assert not _Engine(manifest).leader_may_tune(run)                     # not the leader
    engine._choice_now = "c9"
    assert not engine.leader_may_tune(run)    # leads by point, but a narrower rival would be chosen: measures on
    engine._choice_now = run.cid
    engine._certified = set()
    assert not engine.leader_may_tune(run)                                # SLO not yet certified
    engine._certified = {run.cid}
    assert not engine.leader_may_tune(_run(manifest, blocks=need - 1, runs_done=1))   # too few blocks
    assert manifest.measure.min_runs == 2
    early = _run(manifest, blocks=need, runs_done=0)                      # in its first run of two: not yet
    assert not engine.leader_may_tune(early)
    engine._leader, engine._tuning_started = run.cid, {run.cid}
    assert not engine.leader_may_tune(run)                                # one tuning per candidate
    engine._tuning_started = {"c9"}
    assert engine.leader_may_tune(run)                                    # another's tuning does not stop it
    engine._tuning_started = set()
    untunable = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",)))
    assert not _with(untunable, run).leader_may_tune(run)                 # nothing the manifest lets it try


def test_a_leader_stopped_for_tuning_stays_bound_for_it_when_the_lead_moves_on(tmp_path: Path) -> None:
    """Its measuring ended for tuning; a block from another candidate took the lead before its instance got there.
    It is still tuned (before, it sat idle until the race ended and was never tuned)."""
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    run = _run(manifest, blocks=manifest.measure.winner_min_blocks, runs_done=manifest.measure.min_runs - 1)
    engine = _with(manifest, run)
    reason = engine._stop_reason(run)
    assert reason is not None and "goes to tuning" in reason
    engine._leader = "c9"
    assert not engine.leader_may_tune(run)
    assert engine._stop_reason(run) == reason and engine._tune_next == {run.cid}


def _with(manifest: Manifest, run: CandidateRun) -> _Engine:
    engine = _Engine(manifest)
    engine._leader, engine._certified, engine._choice_now = run.cid, {run.cid}, run.cid
    return engine


def test_a_candidate_is_passed_over_only_when_even_twice_its_prior_cannot_win_a_certified_leader(tmp_path: Path) -> None:
    manifest = load_manifest(fast_manifest(tmp_path / "m"))
    candidate = _run(manifest, blocks=0, runs_done=0).candidate
    fast = candidate.prior_throughput_units_per_s * PRIOR_OPTIMISM
    best_case = replace(prior_cost_inputs(candidate, manifest), warmup_s=0.0, loading_s=0.0, transfer_gb_fixed=0.0)
    cost = cost_per_accepted_unit(best_case, units=manifest.production_units, throughput_units_per_s=fast)

    def hopeless(m: Manifest, leader: str | None, high: float | None, certified: bool = True) -> str | None:
        return hopeless_reason(candidate, m, leader=leader, leader_cost_high=high, leader_certified=certified)

    assert hopeless(manifest, None, None) is None                                        # nothing measured
    assert hopeless(manifest, "c9", cost * 1.01) is None
    reason = hopeless(manifest, "c9", cost * 0.99)
    assert reason is not None and reason.startswith("passed over") and "c9" in reason
    assert hopeless(manifest, "c9", cost * 0.99, certified=False) is None    # a leader on the SLO's knife-edge

    floor = replace(manifest.slo, throughput_min_units_per_s=fast * 1.01)
    reason = hopeless(replace(manifest, slo=floor), None, None, certified=False)
    assert reason is not None and "SLO floor" in reason
    floor = replace(manifest.slo, throughput_min_units_per_s=fast * 0.99)
    assert hopeless(replace(manifest, slo=floor), None, None) is None


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
    engine = _with(manifest, leader)
    engine.race, engine._lock = race, asyncio.Lock()
    engine._tuning_started = {leader.cid}
    assert await engine._would_be_chosen(steady)
    assert not await engine._would_be_chosen(leader)          # tuned already
    engine._tuning_started = {steady.cid}
    assert not await engine._would_be_chosen(steady)          # once each
    untunable = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32",)))
    engine.manifest, engine._tuning_started = untunable, {leader.cid}
    assert not await engine._would_be_chosen(steady)          # nothing the manifest lets it try
    engine.manifest = manifest
    for theta in (100.0, 100.0, 100.0):                       # the leader's interval narrows: it is the choice
        race.add_block(leader.cid, Block(units=theta * 30.0, duration_s=30.0, steps=30))
    race.add_block(leader.cid, Block(units=103.0 * 30.0, duration_s=30.0, steps=30))
    assert not await engine._would_be_chosen(steady)
