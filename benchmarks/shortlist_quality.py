"""How often the shortlist holds the market's true optimum, judged by the simulator's hidden truth (plans only).

    python benchmarks/shortlist_quality.py --markets 460 --seed 1        (about two minutes)

A campaign can only choose among the offers it measures: the shortlist (docs/method.md, Shortlist) bounds every
decision. For each seeded market (the workload mix and manifests of ``decision_quality.py``), the oracle's true cost
of every offer the manifest allows, and the best true cost within each strategy's shortlist:

- ``vastui``: the plan as built (compressed dlperf, the SLO-shortfall rule, the billing model's prices);
- ``dlperf at its word``: the same plan with the compression and the shortfall rule off (the baseline);
- ``top dlperf_usd``, ``cheapest $/h``: the 8 first offers (one per machine) by those orders.

Each shortlist is judged twice: at the manifest's first profile, and end to end (every offer at its best allowed
profile, against the market's best offer at its best: what production runs once the knobs are screened and tuned).

Per strategy: the share of markets whose shortlist holds an offer within 3 % and 10 % of the optimum, the share
whose shortlist has no offer meeting the SLO, each as a ratio to the baseline's in the same run; the same for a
4-offer shortlist (the size the demo tests use). No campaign runs: nothing is rented, nothing measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from decision_quality import MIX, allowed_variants, true_cost, write_manifest

from vastui.bench.manifest import Manifest, load_manifest
from vastui.campaign import plan as plan_module
from vastui.campaign import prior as prior_module
from vastui.campaign.plan import build_plan
from vastui.sim.demo import open_demo
from vastui.vast.models import Offer

SIZES = (8, 4)


@contextlib.contextmanager
def dlperf_at_its_word() -> Iterator[None]:
    """The plan with the prior's compression and shortfall rule switched off (module settings, read per call; the
    plan holds the shortfall under its own name, so both are set: setting the prior's alone left the rule on)."""
    saved = prior_module.DLPERF_EXPONENT_PRIOR, prior_module.SLO_SHORTFALL_PRIOR, plan_module.SLO_SHORTFALL_PRIOR
    prior_module.DLPERF_EXPONENT_PRIOR, prior_module.SLO_SHORTFALL_PRIOR, plan_module.SLO_SHORTFALL_PRIOR = 1.0, 0.0, 0.0
    try:
        yield
    finally:
        prior_module.DLPERF_EXPONENT_PRIOR, prior_module.SLO_SHORTFALL_PRIOR, plan_module.SLO_SHORTFALL_PRIOR = saved


def _sized(manifest: Manifest, size: int) -> Manifest:
    return replace(manifest, shortlist=replace(manifest.shortlist, max_candidates=size))


def _plan_offers(manifest: Manifest, offers: list[Offer]) -> list[Offer]:
    plan = build_plan(campaign_id="shortlist-quality", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
    return [c.offer for c in plan.candidates]


def _first_by(offers: list[Offer], key: Callable[[Offer], float], size: int) -> list[Offer]:
    seen: set[int] = set()
    out = []
    for offer in sorted(offers, key=key):
        if offer.machine_id not in seen:
            seen.add(offer.machine_id)
            out.append(offer)
    return out[:size]


async def one_market(seed: int, index: int, work: Path) -> dict[tuple[str, int], float]:
    """Each strategy's shortlist regret (best true cost in it over the optimum, minus one) at each size."""
    kind = MIX[index % len(MIX)]
    manifest_path = write_manifest(work / f"m{seed}", kind)
    manifest = load_manifest(manifest_path)
    out: dict[tuple[str, int], float] = {}
    async with open_demo(seed=seed, data_dir=work / f"d{seed}", manifest_path=manifest_path) as demo:
        market = demo.market
        offers = await demo.client.search_offers(manifest.shortlist.query, order="dlperf_usd-", limit=400)
        excluded = {e.offer_id for e in demo.plan.excluded}
        eligible = [o for o in offers if o.id not in excluded] or offers
        costs = {o.id: true_cost(market, o, manifest) for o in eligible}
        best = min(costs.values())
        # end to end: each offer at its best allowed profile, as production runs it (docs/method.md, Screen)
        at_best = {o.id: min(true_cost(market, o, manifest, variant=v) for v in allowed_variants(manifest, o.num_gpus))
                   for o in eligible}
        best_pair = min(at_best.values())
        for size in SIZES:
            sized = _sized(manifest, size)
            with dlperf_at_its_word():
                baseline = _plan_offers(sized, offers)
            shortlists = {"vastui": _plan_offers(sized, offers), "dlperf at its word": baseline,
                          "top dlperf_usd": _first_by(eligible, lambda o: -(o.dlperf_per_dphtotal or 0.0), size),
                          "cheapest $/h": _first_by(eligible, lambda o: o.dph_total, size)}
            for name, chosen in shortlists.items():
                got = min((costs.get(o.id) or true_cost(market, o, manifest) for o in chosen), default=math.inf)
                out[(name, size)] = got / best - 1.0 if math.isfinite(got) else math.inf
                pair = min((at_best[o.id] if o.id in at_best else min(
                    true_cost(market, o, manifest, variant=v) for v in allowed_variants(manifest, o.num_gpus))
                    for o in chosen), default=math.inf)
                out[(f"{name} end to end", size)] = pair / best_pair - 1.0 if math.isfinite(pair) else math.inf
    return out


def report(results: list[dict[tuple[str, int], float]]) -> str:
    n = len(results)
    lines = [f"# shortlist quality over {n} markets (workloads: {', '.join(k.name for k in MIX)})", "",
             "| strategy | size | holds within 3 % | within 10 % | no offer meets the SLO | within 3 % vs baseline "
             "| end to end: within 3 % | within 10 % |",
             "|---|---|---|---|---|---|---|---|"]
    summary = []
    for size in SIZES:
        base = sum(r[("dlperf at its word", size)] <= 0.03 for r in results)
        for name in ("vastui", "dlperf at its word", "top dlperf_usd", "cheapest $/h"):
            regrets = [r[(name, size)] for r in results]
            within3 = sum(g <= 0.03 for g in regrets)
            ends = [r[(f"{name} end to end", size)] for r in results]
            lines.append(f"| {name} | {size} | {100 * within3 / n:.1f} % | "
                         f"{100 * sum(g <= 0.10 for g in regrets) / n:.1f} % | {sum(math.isinf(g) for g in regrets)} | "
                         f"{within3 / base if base else math.nan:.3f}x | {100 * sum(g <= 0.03 for g in ends) / n:.1f} % | "
                         f"{100 * sum(g <= 0.10 for g in ends) / n:.1f} % |")
            if name == "vastui":
                summary.append(f"{size} offers: {within3}/{n} within 3 % ({within3 / base if base else math.nan:.3f}x "
                               f"the baseline's {base}), {sum(math.isinf(g) for g in regrets)} with no SLO-meeting "
                               f"offer, {sum(g <= 0.03 for g in ends)}/{n} within 3 % of the optimum at its best "
                               f"allowed profile")
    lines += ["", "summary: vastui's shortlist — " + "; ".join(summary)]
    return "\n".join(lines)


async def main_async(markets: int, seed: int) -> str:
    results = []
    with tempfile.TemporaryDirectory(prefix="vastui-sq-") as tmp:
        for index in range(markets):
            results.append(await one_market(seed + index, index, Path(tmp)))
            if (index + 1) % 50 == 0:
                print(f"{index + 1} of {markets} markets", file=sys.stderr, flush=True)
    return report(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markets", type=int, default=460, help="seeded markets to plan (default 460)")
    parser.add_argument("--seed", type=int, default=1, help="the first market's seed; the workload mix rotates")
    args = parser.parse_args(argv)
    if args.markets < 1:
        parser.error("--markets must be at least 1")
    print(asyncio.run(main_async(args.markets, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
