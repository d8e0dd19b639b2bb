"""The full chaos run: ``.venv/bin/python -m tests.chaos.run --campaigns 50 --seed 1`` (from the repository root).

Runs campaigns of seeds ``seed .. seed + campaigns - 1`` one after another, prints one line per campaign and
the summary (faults injected by kind, each invariant held), and exits 1 if any invariant failed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from pathlib import Path

from tests.campaign.campaign_support import fast_manifest
from tests.chaos.chaos_mix import mix_for
from tests.chaos.chaos_runner import CampaignReport, run_chaos_campaign, summary
from vastui.cli.campaign import _event_line as event_line  # the headless run's progress lines
from vastui.events import Event


async def run(*, campaigns: int, seed: int, verbose: bool) -> list[CampaignReport]:
    reports = []
    with tempfile.TemporaryDirectory(prefix="vastui-chaos-") as tmp:
        manifest = fast_manifest(Path(tmp) / "manifest")
        for s in range(seed, seed + campaigns):
            report = await run_chaos_campaign(mix_for(s), manifest=manifest, work=Path(tmp) / f"campaign-{s}",
                                              on_event=_print_event if verbose else None)
            reports.append(report)
            print(report.line() if verbose or not report.passed else f"seed {s}: {report.outcome}; ok", flush=True)
    return reports


def _print_event(event: Event) -> None:
    line = event_line(event)
    if line:
        print(f"  {line}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.run", description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="print each campaign's mix and every log line")
    args = parser.parse_args(argv)
    if not args.verbose:  # the faults make the simulator and the console log a lot; the summary says what counts
        logging.disable(logging.CRITICAL)
    reports = asyncio.run(run(campaigns=args.campaigns, seed=args.seed, verbose=args.verbose))
    print(summary(reports))
    return 0 if all(r.passed for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
