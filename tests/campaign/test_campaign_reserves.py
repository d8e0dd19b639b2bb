"""The plan's reserves: a candidate passed over unrented gives its slot to the best reserve that could still win,
and a vanished offer's to a reserve of its model. The campaign test runs on the simulator with the demo's plan, a
later wave's candidate given a prior with no chance; the pool is tested on real plan candidates."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from vastui.bench.manifest import load_manifest
from vastui.campaign.plan import Candidate, build_plan
from vastui.campaign.reserves import Reserves
from vastui.events import Event, InstanceRented, Notice
from vastui.sim.demo import open_demo
from vastui.sim.offers import offer_row
from vastui.sim.world import generate_world
from vastui.vast.models import Offer

NOW = 1_800_000_000.0


def _plan_candidates(tmp_path: Path) -> tuple[list[Candidate], list[Candidate]]:
    manifest = load_manifest(fast_manifest(tmp_path / "m"))
    world = generate_world(7, n_machines=120, now=NOW)
    offers = [Offer.from_api(offer_row(m, now=NOW, rented=False), where="row") for m in world.machines]
    plan = build_plan(campaign_id="cres", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
    assert len(plan.reserves) >= 3
    return list(plan.candidates), list(plan.reserves)


async def test_a_passed_over_slot_goes_to_the_best_reserve_that_could_still_win(tmp_path: Path) -> None:
    _candidates, reserves = _plan_candidates(tmp_path)
    pool = Reserves(reserves)
    ruled_out = {reserves[0].offer.id}
    asked: list[int] = []

    async def hopeless(candidate: Candidate) -> str | None:
        asked.append(candidate.offer.id)
        return "passed over: test" if candidate.offer.id in ruled_out else None

    got = await pool.for_passed_over(hopeless)
    assert got is reserves[1] and asked == [reserves[0].offer.id, reserves[1].offer.id]
    assert len(pool) == len(reserves) - 2      # the one ruled out is dropped, the one handed out is gone
    got = await pool.for_passed_over(hopeless)
    assert got is reserves[2]


async def test_a_vanished_offer_takes_a_reserve_of_its_own_model_first(tmp_path: Path) -> None:
    candidates, reserves = _plan_candidates(tmp_path)
    pool = Reserves(reserves)
    model = reserves[-1].offer.gpu_name
    vanished = next((c for c in candidates if c.offer.gpu_name == model), None)
    if vanished is None:
        vanished = replace(candidates[0], offer=replace(candidates[0].offer, gpu_name=model))
    same = next(r for r in reserves if r.offer.gpu_name == model)
    assert pool.for_vanished(vanished) is same
    other = replace(candidates[0], offer=replace(candidates[0].offer, gpu_name="no such model"))
    best = reserves[0] if reserves[0] is not same else reserves[1]
    assert pool.for_vanished(other) is best        # none of its model: the best prior left


@pytest.mark.slow
async def test_a_candidate_passed_over_in_a_campaign_is_replaced_by_a_reserve(tmp_path: Path) -> None:
    # The last candidate (a later wave's) is given a prior that cannot reach the SLO floor: when the first wave has
    # spoken its chance is nil, and the campaign rents a reserve in its place (approved with the plan), measures it
    # under the candidate's id, and destroys it with the rest.
    async with open_demo(seed=2, time_scale=100.0, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        plan = demo.plan
        assert plan.reserves, "the demo plan has reserves"
        doomed = replace(plan.candidates[-1], prior_throughput_units_per_s=0.1)
        assert doomed.candidate_id not in plan.first_wave
        demo.plan = replace(plan, candidates=(*plan.candidates[:-1], doomed))
        events: list[Event] = []
        demo.services.bus.listen(events.append)
        result = await demo.start(plan_approved=True).result()
    run = next(r for r in result.outcome.runs if r.cid == doomed.candidate_id)
    reserves = {r.offer.id: r for r in plan.reserves}
    assert run.candidate.offer.id in reserves, (run.phase, run.detail)
    rented = {e.offer_id for e in events if isinstance(e, InstanceRented)}
    assert run.candidate.offer.id in rented and doomed.offer.id not in rented
    # measured under c4's id: the reserve passed the canary gate and gave blocks (whatever the race then decided)
    assert run.passed_gate is True and run.blocks, (run.phase, run.detail)
    [notice] = [e for e in events if isinstance(e, Notice) and "its slot goes to reserve" in e.text]
    assert f"reserve {run.candidate.offer.id}" in notice.text and f"offer {doomed.offer.id} passed over" in notice.text
    rented_ids = {e.instance_id for e in events if isinstance(e, InstanceRented)}
    assert result.receipt.teardown_passed and rented_ids == {d.instance_id for d in result.receipt.destroyed}
