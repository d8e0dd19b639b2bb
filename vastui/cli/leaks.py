"""`vastui leaks`: reconcile the provider's listing with the store; destroy leaked instances, each approved."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from vastui.cli.terminal import (
    add_connection_args,
    ask_on_terminal,
    fmt_num,
    make_table,
    print_first_fitting,
    vast_client,
)

if TYPE_CHECKING:
    from rich.table import Table

    from vastui.approval import Approver
    from vastui.campaign.cleanup import TeardownReport
    from vastui.campaign.watch import LeakReport
    from vastui.clock import Clock


def add_leaks_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("leaks", help="find instances billing without a reason; --destroy them, each approved",
                       epilog="exit status: 0 no leaks, 3 listing incomplete (unknown), 4 leaks remain, 1 error")
    add_connection_args(p)
    p.add_argument("--db", help="the store, as for `campaign run`: a SQLite file or a team's postgresql:// URL "
                                   "(default: $VASTUI_DB, config db_path/db_url, or the data dir)")
    p.add_argument("--destroy", action="store_true", help="destroy the leaked instances, each with its own approval")
    p.add_argument("--include-unowned", action="store_true",
                   help="with --destroy: also instances vastui did not create (never destroyed otherwise)")
    p.add_argument("--yes", action="store_true", help="with --destroy: approve exactly the listed ids, no prompt")
    p.add_argument("--poll-interval", type=float, default=5.0, metavar="SECONDS",
                   help="seconds between the listings that prove a destroyed instance gone (default 5)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    p.set_defaults(handler=_cmd_leaks)


async def _cmd_leaks(args: argparse.Namespace) -> int:
    from vastui.campaign.approvers import AuditedApprover
    from vastui.campaign.watch import destroy_leaks, find_leaks
    from vastui.clock import MarketClock
    from vastui.config import load_settings
    from vastui.events import EventBus
    from vastui.store import open_store

    clock = MarketClock()   # the marketplace's time, from its answers: what accrued cost and deadlines are judged at
    settings = load_settings(url=args.url, api_key=args.api_key, db_path=args.db)
    store = await open_store(settings.db, data_dir=settings.data_dir, operator=settings.operator)
    async with store, vast_client(args, audit=store, clock=clock) as client:
        report = await find_leaks(market=client, store=store, clock=clock)
        targets = [leak for leak in report.leaks if not leak.is_unowned or args.include_unowned]
        if not args.json:
            _print_leaks(report)
        if not (args.destroy and targets):
            if args.json:
                _print_leaks_json(report, None)
            return _leaks_exit(report, remaining=[leak.instance_id for leak in report.leaked])
        approver = _leaks_approver(args, [leak.instance_id for leak in targets], clock)
        audited = AuditedApprover(approver, audit=store, clock=clock)
        result = await destroy_leaks(market=client, store=store, approver=audited, clock=clock, bus=EventBus(),
                                     leaks=targets, poll_s=args.poll_interval)
    if args.json:
        _print_leaks_json(report, result)
    else:
        print(f"destroyed and proven gone: {[g.instance_id for g in result.gone] or 'none'}; "
              f"refused: {result.refused or 'none'}; still listed: {result.still_alive or 'none'}")
    for error in result.errors:
        print(f"vastui leaks: {error}", file=sys.stderr)
    return _leaks_exit(report, remaining=[*result.refused, *result.still_alive])


def _leaks_approver(args: argparse.Namespace, ids: list[int], clock: Clock) -> Approver:
    """--yes approves exactly ``ids``; a terminal asks for each; otherwise every destroy is refused (and audited)."""
    from vastui.campaign.approvers import PromptApprover
    from vastui.campaign.watch import ListedDestroyApprover

    if args.yes:
        return ListedDestroyApprover(ids, clock=clock)
    if sys.stdin.isatty():
        return PromptApprover(ask_on_terminal, clock=clock)
    print(f"vastui leaks: refusing to destroy {len(ids)} instance(s) {ids}: stdin is not a terminal, so nobody "
          "can approve them. Run it in a terminal to be asked for each, or pass --yes to approve exactly these ids.",
          file=sys.stderr)
    return PromptApprover(_never, clock=clock)


async def _never(text: str) -> bool:
    return False


def _leaks_exit(report: LeakReport, *, remaining: Sequence[int]) -> int:
    if not report.is_complete:
        print(f"vastui leaks: {report.summary()}", file=sys.stderr)
        return 3
    return 4 if remaining else 0


def _print_leaks(report: LeakReport) -> None:
    if report.leaks:
        # Ids, states and money first and never cut; the label goes first on a narrow terminal (then reason and
        # campaign wrap); the why, with its resume hint, is a plain line per instance, which no cell can cut.
        wide, narrow = _leaks_table(report, with_label=True), _leaks_table(report, with_label=False)
        shown = print_first_fitting([wide, narrow])
        print("why:")
        for leak in report.leaks:
            label = f" ({leak.label})" if shown is narrow and leak.label else ""
            print(f"  {leak.instance_id}{label}: {leak.detail or leak.reason}")
    for gone in report.unlisted:
        print(f"note: campaign {gone.campaign_id} may own {gone.instance_id or gone.label} ({gone.intent_status}, "
              f"last {gone.last_state or '-'}), which the listing does not show")
    print(report.summary())


def _leaks_table(report: LeakReport, *, with_label: bool) -> Table:
    columns = ["id", "status<", "$/hr", "accrued $", "reason<~", "campaign<~", *(["label<~"] if with_label else [])]
    table = make_table(f"{len(report.leaked)} leaked, {len(report.unowned)} unowned", *columns)
    for leak in report.leaks:
        table.add_row(str(leak.instance_id), leak.status or "provisioning", fmt_num(leak.burn_usd_per_h, ".3f"),
                      fmt_num(leak.accrued_usd, ".4f"), leak.reason, leak.campaign_id or "-",
                      *([leak.label or "-"] if with_label else []))
    return table


def _print_leaks_json(report: LeakReport, result: TeardownReport | None) -> None:
    import dataclasses
    import json

    body: dict[str, object] = {"verdict": report.verdict, "summary": report.summary(), **dataclasses.asdict(report)}
    if result is not None:
        body["destroy"] = {"gone": [dataclasses.asdict(g) for g in result.gone], "refused": result.refused,
                           "still_alive": result.still_alive, "errors": result.errors}
    print(json.dumps(body, indent=1))
