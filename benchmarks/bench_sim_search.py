"""Offer search through the client, against plain httpx and ``json()`` over the same transport to the same simulator.

What it measures: the time of one ``HttpVastClient.search_offers`` with a typical shortlist query (the example
manifest's, ordered by dlperf per dollar, limit 400 as the campaign asks) against the simulator in-process over
``httpx.ASGITransport``: query parsing, the request, retries' bookkeeping, the simulated API, JSON and
``Offer.from_api`` on every row. Also offers delivered per second.

Why this baseline: it is the least any Python client of this API can do: a bare ``httpx.AsyncClient`` on the same
transport posting the same prepared body and calling ``response.json()``, with no query parsing, no checks, no
models. Both sides pay the same simulator, so the ratio is what vastui's client adds on top of raw httpx; a ratio
near 1 means the client costs next to nothing.
"""

from __future__ import annotations

import asyncio

import httpx
from timing import Comparison, compare_async, parse_options, rate_line, ratio_line

from vastui.clock import WallClock
from vastui.config import Secret
from vastui.sim.app import create_app
from vastui.sim.factory import DEMO_API_KEY, build_market
from vastui.sim.realism import Realism
from vastui.vast.client import HttpVastClient
from vastui.vast.query import build_search_body

SEED = 7
QUERY = "gpu_ram>=16 num_gpus=1 cuda_vers>=12.1 reliability>0.98 inet_down>200"  # examples/resnet.toml
ORDER = "dlperf_usd-"
LIMIT = 400


async def run(*, n_machines: int, repeats: int) -> None:
    clock = WallClock()
    market = build_market(SEED, clock=clock, n_machines=n_machines, realism=Realism.kind())  # the search's speed, not its quota
    transport = httpx.ASGITransport(app=create_app(market))
    body = build_search_body(QUERY, order=ORDER, limit=LIMIT)
    headers = {"Authorization": f"Bearer {DEMO_API_KEY}"}
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(DEMO_API_KEY), clock=clock,
                              transport=transport) as client, \
            httpx.AsyncClient(base_url="http://sim.test", transport=transport) as plain:
        found = await client.search_offers(QUERY, order=ORDER, limit=LIMIT)
        rows = (await plain.post("/api/v0/bundles/", json=body, headers=headers)).json()["offers"]
        if not found or [o.id for o in found] != [row["id"] for row in rows]:
            raise SystemExit(f"the client and plain httpx disagree: {len(found)} vs {len(rows)} offers")

        async def through_client() -> None:
            await client.search_offers(QUERY, order=ORDER, limit=LIMIT)

        async def plain_httpx() -> None:
            (await plain.post("/api/v0/bundles/", json=body, headers=headers)).json()

        result = await compare_async(through_client, plain_httpx, repeats=repeats)
    per_offer = Comparison(result.ours_s / len(found), result.baseline_s / len(found))
    print(f"# {len(found)} of {n_machines} offers match {QUERY!r}, median of {repeats}; "
          "baseline: plain httpx post + json() on the same transport")
    print(ratio_line("HttpVastClient.search_offers via ASGI vs plain httpx + json()", result))
    print(rate_line("HttpVastClient.search_offers offers delivered/s vs plain httpx + json()", per_offer,
                    unit="offers/s"))


def main() -> None:
    options = parse_options(__doc__)
    n_machines, repeats = (120, 3) if options.quick else (360, 31)
    asyncio.run(run(n_machines=n_machines, repeats=repeats))


if __name__ == "__main__":
    main()
