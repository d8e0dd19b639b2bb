"""The same market some time later: a seeded world re-drawn with a share of its machines kept (docs/simulator.md,
Re-drawn markets).

A repeat campaign (the same workload a week later) meets a market that has partly changed: most machines are still
listed, with their hidden truth unchanged (a host's luck is its hardware, cooling and neighbours), at prices that
have moved a little, and a few a lot; some machines left and new ones came. ``redraw_world`` makes that market from
a world and a seed, deterministically, without changing how any world is generated: the new machines come from
``generate_world`` under a seed of their own, their machine, host and offer ids moved past the original world's so
no new machine can pass for a kept one.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from vastui.sim.gpus import GPU_MODELS
from vastui.sim.machine import Machine, World
from vastui.sim.market import Market
from vastui.sim.world import DAY_S, generate_world

# Most kept machines' prices drift a little; a few hosts re-price by up to MAX_PRICE_MOVE either way.
DRIFT_PRICE_MOVE = 0.03
MAX_PRICE_MOVE = 0.15
LARGE_MOVE_SHARE = 0.2
# New machines' ids start this far past the original world's largest (ids are never reused on Vast.ai).
ID_GAP = 1_000


@dataclass(frozen=True, slots=True)
class LaterMarket:
    """What a market opened some time after an earlier one needs: the re-drawn world, the simulated time it opens
    at, and its first instance id (past the earlier market's: the same account's ids never repeat)."""

    world: World
    clock_origin: float
    first_instance_id: int


def later_market(market: Market, *, seed: int, kept_share: float = 0.7, days_later: float = 7.0,
                 max_price_move: float = MAX_PRICE_MOVE) -> LaterMarket:
    """``market``'s world re-drawn (``redraw_world``) for a market opening ``days_later`` days after its clock's
    now."""
    opens_at = market.clock.now() + days_later * DAY_S
    world = redraw_world(market.world, seed=seed, kept_share=kept_share, now=opens_at, max_price_move=max_price_move)
    return LaterMarket(world=world, clock_origin=opens_at, first_instance_id=market.next_instance_id)


def redraw_world(world: World, *, seed: int, kept_share: float = 0.7, now: float,
                 max_price_move: float = MAX_PRICE_MOVE) -> World:
    """``world`` later: ``kept_share`` of its machines (chosen by ``seed``) still listed with the same ids and hidden
    truth, each price moved by a factor within 1 ± ``max_price_move`` (most within 1 ± DRIFT_PRICE_MOVE), whether
    each is rented by someone else drawn again at its model's rented share; the rest replaced by as many new
    machines. The result keeps the original world's ``seed`` (it is the same marketplace: its per-machine fates
    stay its own) and is generated at ``now``."""
    if not 0.0 <= kept_share <= 1.0:
        raise ValueError(f"kept_share must be within 0..1, not {kept_share}")
    if not 0.0 <= max_price_move < 1.0:
        raise ValueError(f"max_price_move must be within 0..1, not {max_price_move}")
    rng = random.Random(f"redraw:{world.seed}:{seed}")
    n = len(world.machines)
    kept_indices = set(rng.sample(range(n), round(kept_share * n)))
    kept = [_moved(m, rng, max_price_move=max_price_move)
            for index, m in enumerate(world.machines) if index in kept_indices]
    fresh = generate_world(rng.randrange(2**31), n_machines=n - len(kept), now=now).machines
    return World(seed=world.seed, generated_at=now, machines=[*kept, *_renumbered(fresh, past=world.machines)])


def _moved(machine: Machine, rng: random.Random, *, max_price_move: float) -> Machine:
    bound = max_price_move if rng.random() < LARGE_MOVE_SHARE else min(DRIFT_PRICE_MOVE, max_price_move)
    factor = 1.0 + rng.uniform(-bound, bound)
    rented_share = next((g.rented_share for g in GPU_MODELS if g.name == machine.gpu_name), 0.5)
    rented = rng.random() < rented_share
    return dataclasses.replace(machine, dph_base=round(machine.dph_base * factor, 4),
                               min_bid=round(machine.min_bid * factor, 4), rented=rented, rentable=not rented)


def _renumbered(machines: list[Machine], *, past: list[Machine]) -> list[Machine]:
    """New machines with machine, host and offer ids past every id of ``past``."""
    if not machines or not past:
        return machines
    machine_shift = max(m.machine_id for m in past) + ID_GAP - min(m.machine_id for m in machines)
    host_shift = max(m.host_id for m in past) + ID_GAP - min(m.host_id for m in machines)
    offer_shift = max(m.offer_id for m in past) + ID_GAP - min(m.offer_id for m in machines)
    out = []
    for m in machines:
        machine_id = m.machine_id + machine_shift
        cluster = m.cluster_id + host_shift if m.cluster_id is not None else None
        out.append(dataclasses.replace(
            m, machine_id=machine_id, host_id=m.host_id + host_shift, offer_id=m.offer_id + offer_shift,
            hostname=f"host{m.host_id + host_shift}", cluster_id=cluster,
            truth=dataclasses.replace(m.truth, machine_id=machine_id)))
    return out
