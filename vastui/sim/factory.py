"""Building a ready market from a seed: shared by ``vastui sim``, the demo and the tests."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vastui.clock import Clock
from vastui.sim.chaos import Chaos
from vastui.sim.market import INSTANCE_ID_BASE, HostProvider, Market
from vastui.sim.realism import Realism
from vastui.sim.world import World, generate_world

if TYPE_CHECKING:
    from vastui.sim.hosts import SshHostPool

DEMO_API_KEY = "vastui-demo-key"


def build_market(seed: int, *, clock: Clock, api_key: str = DEMO_API_KEY, n_machines: int = 360,
                 initial_credit_usd: float = 500.0, host_provider: HostProvider | None = None,
                 chaos: Chaos | None = None, realism: Realism | None = None, world: World | None = None,
                 first_instance_id: int = INSTANCE_ID_BASE + 1) -> Market:
    """A market over the world of ``seed``, generated at the clock's current time, or over ``world`` (a re-drawn
    one, sim/redraw.py) with instance ids from ``first_instance_id``."""
    world = world or generate_world(seed, n_machines=n_machines, now=clock.now())
    return Market(world, clock=clock, api_key=api_key, initial_credit_usd=initial_credit_usd,
                  host_provider=host_provider, chaos=chaos, realism=realism, first_instance_id=first_instance_id)


def build_market_with_hosts(seed: int, *, clock: Clock, hosts_dir: Path, api_key: str = DEMO_API_KEY,
                            n_machines: int = 360, initial_credit_usd: float = 500.0,
                            chaos: Chaos | None = None, realism: Realism | None = None,
                            world: World | None = None, first_instance_id: int = INSTANCE_ID_BASE + 1,
                            ) -> tuple[Market, SshHostPool]:
    """A market whose running instances get real SSH hosts on loopback (files under ``hosts_dir``).

    A host that dies (``Fault.DIES_MID_RUN``) takes its instance ``offline``. Close the market (``aclose``) and
    then the pool (``close``) when done.
    """
    from vastui.sim.hosts import SshHostPool  # asyncssh only for those who want hosts

    pool = SshHostPool(base_dir=hosts_dir, clock=clock, realism=realism, seed=seed)
    market = build_market(seed, clock=clock, api_key=api_key, n_machines=n_machines,
                          initial_credit_usd=initial_credit_usd, host_provider=pool, chaos=chaos, realism=realism,
                          world=world, first_instance_id=first_instance_id)
    pool.on_host_died = market.mark_offline
    return market, pool
