"""Offer search through the client and the simulated API, against the simulator's own search with no HTTP at all.

What it measures: the time of one ``HttpVastClient.search_offers`` with a typical shortlist query (the example
manifest's, ordered by dlperf per dollar, limit 400 as the campaign asks) against the simulator in-process over
``httpx.ASGITransport``: query parsing, the request, the middleware, the search, JSON both ways and ``Offer.from_api``
on every row. Also the world's offers searched per second (the search scans every machine, so its cost grows
with the world, not with the hits).

Why this baseline: the same search over the same world done by ``vastui.sim.offers.search_offers``, the function the
simulated API calls (offer rows, the ``vastui.sim.filters`` conditions, ordering), with the same JSON body and no
transport. What is left over is the HTTP, JSON and model-parsing overhead, so the ratio says how many times the
search's own cost a round trip costs; it stays well above 1 by nature, and growing is what to watch for.
"""

from __future__ import annotations

import asyncio

import httpx
from timing import Comparison, compare_async, parse_options, rate_line, ratio_line

from vastui.clock import WallClock
from vastui.config import Secret
from vastui.sim.app import create_app
from vastui.sim.factory import DEMO_API_KEY, build_market
from vastui.sim.market import Market
from vastui.sim.offers import search_offers
from vastui.vast.client import HttpVastClient
from vastui.vast.query import build_search_body

SEED = 7
QUERY = "gpu_ram>=16 num_gpus=1 cuda_vers>=12.1 reliability>0.98 inet_down>200"  # examples/resnet.toml
ORDER = "dlperf_usd-"
LIMIT = 400


def bare_search(market: Market) -> list[dict[str, object]]:
    """What ``Market.search`` does for the route, minus its lock and the instance lifecycle step."""
    body = build_search_body(QUERY, order=ORDER, limit=LIMIT)
    pairs = [(machine, market.is_rented(machine)) for machine in market.world.machines]
    return search_offers(pairs, body, now=market.clock.now())


async def run(*, n_machines: int, repeats: int) -> None:
    clock = WallClock()
    market = build_market(SEED, clock=clock, n_machines=n_machines)
    transport = httpx.ASGITransport(app=create_app(market))
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(DEMO_API_KEY), clock=clock,
                              transport=transport) as client:
        found = await client.search_offers(QUERY, order=ORDER, limit=LIMIT)
        rows = bare_search(market)
        if not found or [o.id for o in found] != [row["id"] for row in rows]:
            raise SystemExit(f"the client and the bare search disagree: {len(found)} vs {len(rows)} offers")

        async def through_client() -> None:
            await client.search_offers(QUERY, order=ORDER, limit=LIMIT)

        async def bare() -> None:
            bare_search(market)

        result = await compare_async(through_client, bare, repeats=repeats)
    world = len(market.world.machines)
    per_offer = Comparison(result.ours_s / world, result.baseline_s / world)
    print(f"# {len(found)} of {world} offers match {QUERY!r}, median of {repeats}; "
          "baseline: vastui.sim.offers.search_offers on the same body, no HTTP")
    print(ratio_line("HttpVastClient.search_offers via ASGI vs bare sim search", result))
    print(rate_line("HttpVastClient.search_offers offers searched/s via ASGI vs bare sim search", per_offer,
                    unit="offers/s"))


def main() -> None:
    options = parse_options(__doc__)
    n_machines, repeats = (120, 3) if options.quick else (360, 31)
    asyncio.run(run(n_machines=n_machines, repeats=repeats))


if __name__ == "__main__":
    main()
