"""Building a ready market from a seed: shared by ``vastui sim``, the demo and the tests."""

from __future__ import annotations

from vastui.clock import Clock
from vastui.sim.chaos import Chaos
from vastui.sim.market import HostProvider, Market
from vastui.sim.world import generate_world

DEMO_API_KEY = "vastui-demo-key"


def build_market(seed: int, *, clock: Clock, api_key: str = DEMO_API_KEY, n_machines: int = 360,
                 initial_credit_usd: float = 500.0, host_provider: HostProvider | None = None,
                 chaos: Chaos | None = None) -> Market:
    """A market over the world of ``seed``, generated at the clock's current time."""
    world = generate_world(seed, n_machines=n_machines, now=clock.now())
    return Market(world, clock=clock, api_key=api_key, initial_credit_usd=initial_credit_usd,
                  host_provider=host_provider, chaos=chaos)
