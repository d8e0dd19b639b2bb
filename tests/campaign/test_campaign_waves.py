"""Waves: the first wave holds the best priors and two GPU models; later candidates wait until every rented one has
spoken, and are rented or passed over by their chance of beating the measured leader, stated in the receipt."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from vastui.bench.calibration import Calibration, Observation
from vastui.bench.cost import cost_curve
from vastui.bench.manifest import Manifest, load_manifest
from vastui.bench.receipt import Outcome, render_markdown
from vastui.bench.stats import Block, Interval
from vastui.campaign.candidate import CandidateRun, NotRented
from vastui.campaign.charges import prior_cost_inputs
from vastui.campaign.measure import MeasuredBlock
from vastui.campaign.plan import FIRST_WAVE_PRIOR_TIE, Candidate, build_plan, first_wave, model_key, render_plan
from vastui.campaign.slots import Slot
from vastui.campaign.waves import warmup_units, win_chance
from vastui.events import BlockMeasured, CandidatePhaseChanged, Event, InstanceRented, Notice
from vastui.sim.demo import open_demo
from vastui.sim.offers import offer_row
from vastui.sim.world import generate_world
from vastui.vast.models import Offer

NOW = 1_800_000_000.0


def _plan(tmp_path: Path, *, max_candidates: int = 8) -> tuple[Manifest, list[Candidate]]:
    manifest = load_manifest(fast_manifest(tmp_path / "m", max_candidates=max_candidates))
    world = generate_world(7, n_machines=160, now=NOW)
    offers = [Offer.from_api(offer_row(m, now=NOW, rented=False), where="row") for m in world.machines]
    plan = build_plan(campaign_id="cwave", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
    assert len({c.offer.gpu_name for c in plan.candidates}) >= 2
    return manifest, list(plan.candidates)


def test_the_first_wave_is_the_best_priors_with_two_gpu_models(tmp_path: Path) -> None:
    manifest, candidates = _plan(tmp_path)
    wave = first_wave(candidates, manifest=manifest, calibrated=False)
    assert len(wave) == 3
    chosen = [c for c in candidates if c.candidate_id in wave]
    assert len({c.offer.gpu_name for c in chosen}) >= 2
    assert wave[:2] == tuple(c.candidate_id for c in candidates[:2])     # rank order, the best priors first
    # calibrated by earlier campaigns: two; the manifest and the instance limit bound it
    assert len(first_wave(candidates, manifest=manifest, calibrated=True)) == 2
    one = replace(manifest, race=replace(manifest.race, first_wave=1))
    assert first_wave(candidates, manifest=one, calibrated=False) == (candidates[0].candidate_id,)
    narrow = replace(manifest, budget=replace(manifest.budget, max_instances=2))
    assert len(first_wave(candidates, manifest=narrow, calibrated=False)) == 2


def test_the_last_place_of_the_first_wave_goes_to_a_second_gpu_model(tmp_path: Path) -> None:
    manifest, candidates = _plan(tmp_path)
    model = candidates[0].offer.gpu_name
    same = [replace(c, offer=replace(c.offer, gpu_name=model)) for c in candidates[:4]]
    other = next(c for c in candidates[4:] if c.offer.gpu_name != model)
    wave = first_wave([*same, other], manifest=manifest, calibrated=False)
    assert wave == (same[0].candidate_id, same[1].candidate_id, other.candidate_id)


def test_a_later_place_in_the_first_wave_goes_to_the_cheaper_hour_among_tied_priors(tmp_path: Path) -> None:
    # Every first-wave machine is billed while the knobs are screened: at a prior within FIRST_WAVE_PRIOR_TIE of the
    # next in rank order, the cheaper hour takes the place; a prior further off, or one short of the SLO, does not.
    manifest, candidates = _plan(tmp_path)
    first, second, third = candidates[0], candidates[1], candidates[2]
    rest = [c for c in candidates[3:] if c.offer.gpu_name != first.offer.gpu_name]
    assert rest, [c.offer.gpu_name for c in candidates]
    prior, price = second.prior_cost_per_unit_usd, second.offer.dph_total

    def like(candidate: Candidate, *, tie: float, dph: float, short: bool = False) -> Candidate:
        return replace(candidate, prior_cost_per_unit_usd=prior * (1.0 + tie), short_of_slo=short,
                       offer=replace(candidate.offer, dph_total=dph, gpu_name="other model"))

    cheap_tied = like(rest[0], tie=FIRST_WAVE_PRIOR_TIE * 0.9, dph=price / 3)
    wave = first_wave([first, second, third, cheap_tied], manifest=manifest, calibrated=False)
    assert wave[0] == first.candidate_id                  # the best prior always first
    assert wave[1] == cheap_tied.candidate_id             # tied with the second, a third of its price per hour
    cheap_far = like(rest[0], tie=FIRST_WAVE_PRIOR_TIE * 1.1, dph=price / 3)
    wave = first_wave([first, second, third, cheap_far], manifest=manifest, calibrated=False)
    assert wave[:2] == (first.candidate_id, second.candidate_id)
    cheap_short = like(rest[0], tie=0.0, dph=price / 3, short=True)
    wave = first_wave([first, second, third, cheap_short], manifest=manifest, calibrated=False)
    assert cheap_short.candidate_id not in wave[:2]


def test_the_plan_states_the_first_wave_and_what_the_waves_expect(tmp_path: Path) -> None:
    manifest = load_manifest(fast_manifest(tmp_path / "m", max_candidates=8))
    world = generate_world(7, n_machines=160, now=NOW)
    offers = [Offer.from_api(offer_row(m, now=NOW, rented=False), where="row") for m in world.machines]
    plan = build_plan(campaign_id="cwave", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
    assert plan.outlook is not None and len(plan.first_wave) == 3
    first = sum(c.expected_spend_usd for c in plan.candidates if c.candidate_id in plan.first_wave)
    assert first < plan.outlook.expected_spend_usd < plan.expected_spend_usd   # some, not all, of the rest
    assert 0.0 < plan.outlook.expected_later_rents < plan.outlook.later == len(plan.candidates) - 3
    assert plan.outlook.expected_decision_s > 0.0
    text = render_plan(plan)
    assert f"first wave: {', '.join(plan.first_wave)}" in text and "expected spend" in text


def _cost(point: float, *, spread: float = 1.0) -> Interval:
    """A leader's cost interval: ``point``, ``spread`` times it at the upper end (1: known exactly)."""
    return Interval(point=point, low=point / spread, high=point * spread, confidence=0.95, n=10)


def test_a_waiting_candidate_s_chance_is_judged_against_a_certified_leader_and_the_slo_floor(tmp_path: Path) -> None:
    manifest, candidates = _plan(tmp_path)
    candidate = candidates[4]
    blank = Calibration.fit([])
    free = replace(manifest, slo=replace(manifest.slo, throughput_min_units_per_s=None))
    # nothing to beat: certain
    assert win_chance(candidate, free, blank, leader=None, leader_cost=None, leader_misses_slo=1.0
                      ).probability == 1.0
    # the leader's cost equal to this candidate's cost at its predicted median: even odds
    fit = Calibration.fit([Observation(model_key(candidate), 100.0, 60.0), Observation("other x1", 100.0, 70.0)])
    median = fit.predict(model_key(candidate), candidate.prior_throughput_units_per_s).median_units_per_s
    at = cost_curve(prior_cost_inputs(candidate, free), units=free.production_units)
    even = win_chance(candidate, free, fit, leader="c1", leader_cost=_cost(at(median)), leader_misses_slo=0.0)
    assert even.probability == pytest.approx(0.5, abs=1e-6) and even.leader == "c1"
    cheaper = win_chance(candidate, free, fit, leader="c1", leader_cost=_cost(at(median * 2.5)),
                         leader_misses_slo=0.0)
    assert cheaper.probability < 0.05 and "c1" in cheaper.describe()
    # a leader known loosely rules out less than one known exactly
    loose = win_chance(candidate, free, fit, leader="c1", leader_cost=_cost(at(median * 2.5), spread=1.5),
                       leader_misses_slo=0.0)
    assert cheaper.probability < loose.probability < 0.5
    # a leader that may yet miss the SLO rules out less, one sure to miss it rules nobody out on cost
    unsure = win_chance(candidate, free, fit, leader="c1", leader_cost=_cost(at(median * 2.5)), leader_misses_slo=0.3)
    assert unsure.probability == pytest.approx(cheaper.probability + 0.3)
    assert win_chance(candidate, free, fit, leader="c1", leader_cost=_cost(at(median * 2.5)),
                      leader_misses_slo=1.0).probability == 1.0
    # the SLO floor: far above the prediction, no chance whoever leads
    floor = replace(manifest, slo=replace(manifest.slo, throughput_min_units_per_s=median * 3.0))
    hopeless = win_chance(candidate, floor, fit, leader=None, leader_cost=None, leader_misses_slo=1.0)
    assert hopeless.probability < 1e-3 and math.isclose(hopeless.needed_units_per_s, median * 3.0)


def _slot(candidate: Candidate, *, theta: float, warmup_lost_s: list[float]) -> Slot:
    run = CandidateRun(candidate)
    run.blocks = [MeasuredBlock(block=Block(units=theta * 10.0, duration_s=10.0, steps=10), start_t=0.0, end_t=10.0,
                                data_wait_share=0.0, gpu_util_pct=None, mem_used_mib=None, mem_total_mib=None,
                                pcie_rx_gbps=None, throttled_share=None) for _ in range(3)]
    run.warmup_lost_s = warmup_lost_s
    return Slot(run)


def test_a_waiting_candidate_s_warm_up_is_priced_as_the_rented_ones_lost_it(tmp_path: Path) -> None:
    """The prior prices warm-up at the manifest's measuring floor; against a leader priced on the warm-up it lost,
    that made every waiting candidate dearer than it is. Once candidates are measured, their loss, counted in units of
    work, is the candidate's own warm-up at its pace."""
    manifest, candidates = _plan(tmp_path)
    short = replace(manifest, production_units=3000, slo=replace(manifest.slo, throughput_min_units_per_s=None),
                    warmup=replace(manifest.warmup, min_s=60.0))
    # 4 s lost at 50 units/s, 2 s at 100: 200 units each; the median of three measured candidates, none unmeasured
    slots = [_slot(candidates[0], theta=50.0, warmup_lost_s=[3.0, 5.0]),
             _slot(candidates[1], theta=100.0, warmup_lost_s=[2.0]),
             _slot(candidates[2], theta=80.0, warmup_lost_s=[30.0]), Slot(CandidateRun(candidates[3]))]
    assert warmup_units(slots) == pytest.approx(200.0)
    assert warmup_units([Slot(CandidateRun(candidates[3]))]) is None
    candidate = candidates[4]
    fit = Calibration.fit([Observation(model_key(candidate), 100.0, 60.0), Observation("other x1", 100.0, 70.0)])
    median = fit.predict(model_key(candidate), candidate.prior_throughput_units_per_s).median_units_per_s
    inputs = prior_cost_inputs(candidate, short)
    lost = replace(inputs, warmup_s=200.0 / median)
    # a leader whose cost this candidate would match at its median, were its warm-up what the others lost
    leader = _cost(cost_curve(lost, units=short.production_units)(median))
    floor = win_chance(candidate, short, fit, leader="c1", leader_cost=leader, leader_misses_slo=0.0)
    measured = win_chance(candidate, short, fit, leader="c1", leader_cost=leader, leader_misses_slo=0.0,
                          warmup_units=200.0)
    assert measured.probability == pytest.approx(0.5, abs=1e-6)
    assert floor.probability < 0.05 < measured.probability     # priced at the 60 s floor it looked hopeless
    assert floor.needed_units_per_s > measured.needed_units_per_s


@pytest.mark.slow
async def test_later_waves_wait_for_the_first_and_are_passed_over_with_their_chance_stated(tmp_path: Path) -> None:
    events: list[Event] = []
    async with open_demo(seed=3, time_scale=150.0, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m", max_candidates=8)) as demo:
        demo.services.bus.listen(events.append)
        plan, manifest = demo.plan, demo.manifest
        result = await demo.start(plan_approved=True).result()
    assert len(plan.candidates) == 8 and len(plan.first_wave) == 3
    min_blocks = manifest.measure.min_blocks
    ended_phases = {"done", "eliminated", "failed", "skipped", "aborted", "tuning"}
    rents = [e for e in events if isinstance(e, InstanceRented)]
    later = [e for e in rents if e.candidate not in plan.first_wave]
    for rent in later:   # every first-wave candidate had spoken when a later one was rented
        for cid in plan.first_wave:
            blocks = sum(1 for e in events if isinstance(e, BlockMeasured) and e.candidate == cid and e.at <= rent.at)
            ended = any(isinstance(e, CandidatePhaseChanged) and e.candidate == cid and e.phase in ended_phases
                        and e.at <= rent.at for e in events)
            assert blocks >= min_blocks or ended, (rent.candidate, cid, blocks)
    passed = result.outcome.passed_over
    assert passed, "this market passes over some of the shortlist"
    assert len(rents) < len(plan.candidates)
    rented_offers = {e.offer_id for e in rents}
    for offer in passed:
        assert offer.probability < manifest.race.miss_probability
        assert offer.candidate_id not in plan.first_wave and offer.offer_id not in rented_offers
    unfilled = [r for r in result.outcome.runs if r.not_rented is NotRented.PASSED_OVER]
    assert {r.cid for r in unfilled} <= {p.candidate_id for p in passed}
    for run in unfilled:   # no reserve took its slot: never measured, but not counted as "never measured"
        assert run.win_probability is not None and run.instance_id is None
        assert run.cid not in result.receipt.never_measured
        row = next(c for c in result.receipt.candidates if c.candidate_id == run.cid)
        assert row.outcome is Outcome.PASSED_OVER
    text = render_markdown(result.receipt)
    assert "Passed over unrented" in text
    for offer in passed:
        assert f"{offer.candidate_id} offer {offer.offer_id}" in text and f"{100 * offer.probability:.1f} %" in text
    assert result.receipt.passed_over == passed
    assert result.receipt.teardown_passed


@pytest.mark.slow
async def test_a_candidate_admitted_to_a_wave_is_judged_again_when_an_instance_frees_for_it(tmp_path: Path) -> None:
    # One instance at a time beside the first wave's one: the wave admitted after it speaks queues for the other,
    # and by a queued candidate's turn a candidate rented before it may lead at a cost it cannot beat.
    path = fast_manifest(tmp_path / "m", max_candidates=8)
    text = path.read_text(encoding="utf-8")
    assert "max_instances = 4" in text and "first_wave = 0" in text
    path.write_text(text.replace("max_instances = 4", "max_instances = 2").replace("first_wave = 0", "first_wave = 1"),
                    encoding="utf-8")
    events: list[Event] = []
    async with open_demo(seed=5, time_scale=150.0, data_dir=tmp_path / "data", manifest_path=path) as demo:
        demo.services.bus.listen(events.append)
        manifest = demo.manifest
        result = await demo.start(plan_approved=True).result()
    admitted = {cid for e in events if isinstance(e, Notice) and e.text.startswith("next wave: ")
                for cid in re.findall(r"(c\d+) \(\d+ %\)", e.text)}
    rented = {e.candidate for e in events if isinstance(e, InstanceRented)}
    rented_offers = {e.offer_id for e in events if isinstance(e, InstanceRented)}
    judged_again = [p for p in result.outcome.passed_over if p.candidate_id in admitted]
    assert judged_again, "a candidate admitted to a wave is passed over at its turn"
    for passed in judged_again:   # (a reserve may take its place, under its id: its offer is never rented)
        assert passed.offer_id not in rented_offers and passed.probability < manifest.race.miss_probability
    assert admitted & rented, "the wave's likeliest winner was rented"
    assert result.receipt.teardown_passed
