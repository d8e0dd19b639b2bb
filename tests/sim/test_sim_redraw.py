"""A world re-drawn later (sim/redraw.py): kept machines keep their ids and hidden truth, their prices move within
bounds, new machines appear with ids of their own, and the re-draw is deterministic."""

from __future__ import annotations

import pytest

from vastui.clock import ScaledClock
from vastui.sim.factory import build_market
from vastui.sim.redraw import DRIFT_PRICE_MOVE, MAX_PRICE_MOVE, later_market, redraw_world
from vastui.sim.world import DAY_S, World, generate_world

NOW = 1_800_000_000.0
LATER = NOW + 7 * DAY_S


@pytest.fixture(scope="module")
def world() -> World:
    return generate_world(11, now=NOW)


def test_kept_machines_keep_their_truth_and_ids_and_their_prices_move_within_bounds(world: World) -> None:
    later = redraw_world(world, seed=3, kept_share=0.7, now=LATER)
    before = {m.machine_id: m for m in world.machines}
    kept = [m for m in later.machines if m.machine_id in before]
    assert len(later.machines) == len(world.machines)
    assert len(kept) == round(0.7 * len(world.machines))
    moves = []
    for m in kept:
        old = before[m.machine_id]
        assert m.truth == old.truth
        assert (m.gpu_name, m.num_gpus, m.dlperf, m.offer_id, m.host_id) == (old.gpu_name, old.num_gpus, old.dlperf,
                                                                          old.offer_id, old.host_id)
        move = m.dph_base / old.dph_base - 1.0
        assert abs(move) <= MAX_PRICE_MOVE + 1e-3
        moves.append(abs(move))
    assert sum(move > 1e-6 for move in moves) > 0.9 * len(moves)       # prices did move
    assert any(move > DRIFT_PRICE_MOVE for move in moves)                 # a few by more than the drift
    assert sum(move <= DRIFT_PRICE_MOVE + 1e-3 for move in moves) > len(moves) / 2   # most by a little
    assert later.seed == world.seed and later.generated_at == LATER


def test_new_machines_appear_with_ids_no_earlier_machine_had(world: World) -> None:
    later = redraw_world(world, seed=3, kept_share=0.7, now=LATER)
    old_machines = {m.machine_id for m in world.machines}
    old_offers = {m.offer_id for m in world.machines}
    old_hosts = {m.host_id for m in world.machines}
    new = [m for m in later.machines if m.machine_id not in old_machines]
    assert len(new) == len(world.machines) - round(0.7 * len(world.machines))
    assert all(m.offer_id not in old_offers and m.host_id not in old_hosts for m in new)
    assert all(m.truth.machine_id == m.machine_id for m in new)
    assert len({m.machine_id for m in later.machines}) == len(later.machines)
    assert len({m.offer_id for m in later.machines}) == len(later.machines)


def test_the_redraw_is_deterministic_and_its_seed_matters(world: World) -> None:
    first = redraw_world(world, seed=3, now=LATER)
    assert redraw_world(world, seed=3, now=LATER) == first
    other = redraw_world(world, seed=4, now=LATER)
    assert {m.machine_id for m in other.machines} != {m.machine_id for m in first.machines}


@pytest.mark.parametrize("kept_share", [0.0, 1.0])
def test_the_kept_share_bounds_hold(world: World, kept_share: float) -> None:
    later = redraw_world(world, seed=5, kept_share=kept_share, now=LATER)
    old = {m.machine_id for m in world.machines}
    assert sum(m.machine_id in old for m in later.machines) == round(kept_share * len(world.machines))


def test_a_kept_share_outside_zero_to_one_is_refused(world: World) -> None:
    with pytest.raises(ValueError, match="kept_share"):
        redraw_world(world, seed=1, kept_share=1.2, now=LATER)


def test_a_later_market_opens_later_and_goes_on_past_the_earlier_ones_instance_ids() -> None:
    clock = ScaledClock(scale=1.0, origin=NOW)
    market = build_market(11, clock=clock, n_machines=60)
    later = later_market(market, seed=2, days_later=7.0)
    assert later.clock_origin >= NOW + 7 * DAY_S
    assert later.first_instance_id == market.next_instance_id
    again = build_market(11, clock=ScaledClock(scale=1.0, origin=later.clock_origin), world=later.world,
                         first_instance_id=later.first_instance_id)
    assert again.next_instance_id == later.first_instance_id
    kept = {m.machine_id for m in market.world.machines} & {m.machine_id for m in again.world.machines}
    assert kept and all(again.truth_of(mid) == market.truth_of(mid) for mid in kept)
