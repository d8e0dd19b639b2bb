"""Composition root: parses argv, loads settings, builds the real services, runs a headless command or the TUI.

This package (with the TUI) is the only place that prints or exits. This module holds ``main`` (the ``vastui``
console script), the parser and the market commands; each other command has its module here. Each ``_cmd_*``
function builds what its command needs and returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING

from vastui import __version__
from vastui.cli.leaks import add_leaks_command
from vastui.cli.output import guarded_output
from vastui.cli.parser import SafeArgumentParser
from vastui.cli.signals import (
    ExitReport,
    Stopped,
    install_exit_report,
    reset_exit_report,
    signals_restored,
    stopping_on_signals,
)
from vastui.cli.sim import add_sim_command
from vastui.cli.terminal import add_connection_args, fmt_num, make_table, print_table, vast_client
from vastui.errors import VastuiError

if TYPE_CHECKING:


    pass

EPILOG = """\
examples:
  vastui sim --port 8765 --seed 7            serve the simulated marketplace on loopback
  vastui offers 'gpu_name=RTX_4090 num_gpus>=2 reliability>0.98' -o dlperf_usd- --limit 10
  vastui instances --json
  vastui ssh-run 1234 -- nvidia-smi -L       run one command on an instance, streaming its output
  vastui manifest check examples/resnet.toml
  vastui demo --headless                     a whole campaign on the simulated marketplace, no account needed
  vastui campaign plan examples/resnet.toml  shortlist and price a campaign (rents nothing)
  vastui campaign run examples/resnet.toml   plan, ask approval, rent, measure, decide, destroy, prove
  vastui leaks                               instances billing without a reason (--destroy: each approved)
  vastui watch                               the same every 5 min as a service: alerts to a webhook
  vastui migrate --to postgresql://...       copy this operator's store into the team's

The API key is taken from --api-key, then VAST_API_KEY, then ~/.config/vastai/vast_api_key (as the official CLI).
The marketplace URL from --url, then VAST_URL, then https://console.vast.ai.
"""

# Commands whose modules are heavy to import (SSH, the planner, the receipt, rich): their arguments are registered
# only when argv names them, so `vastui --help`, `offers` and `instances` never load them. Each entry is
# name -> (module, its registering function, the one-line help shown in `vastui --help`).
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("vastui.cli.campaign", "add_campaign_commands",
             "run a whole benchmark campaign on the embedded simulated marketplace"),
    "campaign": ("vastui.cli.campaign", "add_campaign_commands", "plan, run and resume benchmark campaigns"),
    "ssh-key": ("vastui.cli.sshkey", "add_ssh_key_command", "register SSH public keys on the account"),
    "watch": ("vastui.cli.watch", "add_watch_command",
              "watch the account for leaks, alert, and destroy under a standing approval"),
    "migrate": ("vastui.cli.migrate", "add_migrate_command", "copy this operator's store into a team's PostgreSQL store"),
}


def build_parser(argv: Sequence[str] | None = None) -> SafeArgumentParser:
    """The whole parser; given ``argv``, the heavy commands it does not name get only their help line."""
    parser = SafeArgumentParser(
        prog="vastui",
        description="Rent Vast.ai GPUs by measured useful work: benchmark campaigns, approvals, leak watch.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vastui {__version__}")
    # typed as the base class so the add_*_command helpers take it; every subparser is still a SafeArgumentParser
    root: argparse.ArgumentParser = parser
    sub = root.add_subparsers(dest="command", metavar="COMMAND")

    add_sim_command(sub)

    # --- offers / instances --------------------------------------------------------------------------------
    p = sub.add_parser("offers", help="search offers with the official CLI's query language")
    add_connection_args(p)
    p.add_argument("query", nargs="*", help="e.g. 'gpu_name=RTX_4090 num_gpus>=2 reliability>0.98'")
    p.add_argument("-o", "--order", default="score-", help="order, e.g. dlperf_usd- or 'num_gpus-,dph+' (default score-)")
    p.add_argument("--type", default="on-demand", choices=["on-demand", "bid", "interruptible", "reserved"],
                   help="pricing type (interruptible is bid)")
    p.add_argument("--limit", type=int, default=None, help="at most N offers, N at least 1 (0 is refused; leave it out for the API's default)")
    p.add_argument("--storage", type=float, default=5.0, help="GiB of disk to price in (default 5)")
    p.add_argument("-n", "--no-default", action="store_true", help="drop the default verified/rentable filters")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    p.set_defaults(handler=_cmd_offers)

    p = sub.add_parser("instances", help="list your instances (all pages)")
    add_connection_args(p)
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    p.set_defaults(handler=_cmd_instances)

    # --- ssh-run -------------------------------------------------------------------------------------------
    p = sub.add_parser("ssh-run", help="run one command on an instance over SSH and stream its output",
                       usage="vastui ssh-run [options] INSTANCE -- CMD [ARG...]")
    add_connection_args(p)
    p.add_argument("--ssh-key", help="private key (default: $VASTUI_SSH_KEY, ~/.ssh/id_ed25519, or the ssh-agent)")
    p.add_argument("--wait", type=float, default=60.0, help="seconds to wait for SSH to accept (default 60)")
    p.add_argument("instance", type=int, help="instance id")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARG... (run as given, no shell)")
    p.set_defaults(handler=_cmd_ssh_run)

    add_leaks_command(sub)

    _add_lazy_commands(sub, argv)
    from vastui.cli.console import add_console_command  # argparse only; Textual loads when the console runs

    add_console_command(parser, sub)

    # --- manifest ------------------------------------------------------------------------------------------

    manifest_parser = sub.add_parser("manifest", help="validate workload manifests")
    manifest_sub = manifest_parser.add_subparsers(dest="manifest_command", metavar="ACTION")
    manifest_parser.set_defaults(handler=lambda args: _cmd_manifest_help(manifest_parser))
    pm = manifest_sub.add_parser("check", help="validate a manifest and print its identity digest")
    pm.add_argument("file", help="the manifest (TOML), e.g. examples/resnet.toml")
    pm.set_defaults(handler=_cmd_manifest_check)

    return parser


def _add_lazy_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser], argv: Sequence[str] | None) -> None:
    # Any word of argv that names a lazy command loads it (a query that happens to say "demo" only costs time).
    wanted = None if argv is None else {LAZY_COMMANDS[arg][:2] for arg in argv if arg in LAZY_COMMANDS}
    registered: set[tuple[str, str]] = set()
    for name, (module, function, helptext) in LAZY_COMMANDS.items():
        if wanted is not None and (module, function) not in wanted:
            sub.add_parser(name, help=helptext)  # never parsed: argv names none of this module's commands
        elif (module, function) not in registered:
            registered.add((module, function))
            getattr(importlib.import_module(module), function)(sub)


async def _cmd_offers(args: argparse.Namespace) -> int:
    from vastui.vast.query import build_search_body

    # A bad query is reported (with a caret under the column) before any connection is made.
    body = build_search_body(" ".join(args.query), order=args.order, type_=args.type, limit=args.limit,
                             storage_gib=args.storage, no_default=args.no_default)
    async with vast_client(args) as client:
        offers = await client.search_offers_body(body)
    for row in offers.unreadable:
        print(f"vastui: {row.describe('offer')}; skipped", file=sys.stderr)
    if args.json:
        import dataclasses
        import json

        print(json.dumps([dataclasses.asdict(offer) for offer in offers], indent=1))
        return 0
    table = make_table(f"{len(offers)} offers", "id", "gpu<", "n", "$/hr", "dlperf", "dlperf/$", "reliab", "inet ↓/↑",
                   "location<", "verified<")
    for o in offers:
        table.add_row(str(o.id), o.gpu_name, str(o.num_gpus), f"{o.dph_total:.3f}", fmt_num(o.dlperf, ".1f"),
                      fmt_num(o.dlperf_per_dphtotal, ".1f"), fmt_num(o.reliability, ".3f"),
                      f"{fmt_num(o.inet_down, '.0f')}/{fmt_num(o.inet_up, '.0f')}", o.geolocation or "-",
                      "yes" if o.is_verified else (o.verification or "-"))
    print_table(table)
    return 0


async def _cmd_instances(args: argparse.Namespace) -> int:
    async with vast_client(args) as client:
        listing = await client.list_instances()
    if args.json:
        import dataclasses
        import json

        print(json.dumps({"instances": [dataclasses.asdict(inst) for inst in listing.instances],
                          "is_complete": listing.is_complete, "error": listing.error,
                          "unreadable": [dataclasses.asdict(row) for row in listing.unreadable]}, indent=1))
    else:
        import datetime as dt

        title = (f"{len(listing.instances)} instances" if listing.is_complete
                 else f"{len(listing.instances)} instances seen — listing INCOMPLETE, more may be billing")
        table = make_table(title, "id", "status<", "label<", "gpu<", "n", "$/hr", "ssh<",
                       "started (UTC)<")
        for inst in listing.instances:
            ssh = inst.ssh_endpoint()
            started = (dt.datetime.fromtimestamp(inst.start_date, tz=dt.UTC).strftime("%Y-%m-%d %H:%M")
                       if inst.start_date is not None else "-")
            table.add_row(str(inst.id), inst.actual_status or "provisioning", inst.label or "-", inst.gpu_name or "-",
                          fmt_num(inst.num_gpus, "d"), fmt_num(inst.dph_total, ".3f"),
                          f"{ssh[0]}:{ssh[1]}" if ssh else "-", started)
        print_table(table)
    for row in listing.unreadable:
        print(f"vastui: {row.describe()}", file=sys.stderr)
    if not listing.is_complete:
        # Never let a partial listing pass for the whole truth: more instances may be billing.
        print(f"vastui: the instance listing is INCOMPLETE: {listing.error}", file=sys.stderr)
        return 3
    if listing.unreadable:
        return 3  # instances the table cannot show are still billing
    return 0


async def _cmd_ssh_run(args: argparse.Namespace) -> int:
    from vastui.config import load_settings
    from vastui.errors import NotFound, RemoteError
    from vastui.remote.runner import SshRunner

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise VastuiError("nothing to run: vastui ssh-run INSTANCE -- CMD [ARG...]", title="No command")
    settings = load_settings(url=args.url, api_key=args.api_key, ssh_key=args.ssh_key)
    async with vast_client(args) as client:
        instance = await client.show_instance(args.instance)
    if instance is None:
        raise NotFound(f"there is no instance {args.instance}")
    endpoints = instance.ssh_endpoints()
    if not endpoints:
        raise RemoteError(f"instance {args.instance} has no SSH endpoint yet (status "
                          f"{instance.actual_status or 'provisioning'})", title="Not reachable")
    keys = [settings.ssh_key_path] if settings.ssh_key_path else []
    runner = SshRunner(known_hosts=settings.known_hosts_path, client_keys=keys, use_agent=not keys)
    # Direct first when the row offers it, then the proxy; refusals are retried until --wait (docs/api-notes.md §3.12).
    async with runner.connect_first(endpoints, deadline_s=args.wait) as conn:
        status = await conn.stream_command(command, on_stdout=lambda text: print(text, end="", flush=True),
                                           on_stderr=lambda text: print(text, end="", file=sys.stderr, flush=True))
    return 255 if status is None else status  # as ssh does when the remote side gives no exit status


def _cmd_manifest_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _cmd_manifest_check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from vastui.bench.manifest import load_manifest
    from vastui.errors import ManifestError
    from vastui.vast.query import parse_query

    try:
        manifest = load_manifest(Path(args.file), check_query=parse_query)
    except ManifestError as exc:
        print(str(exc), file=sys.stderr)  # file:line: field — reason, as compilers do, so editors can jump to it
        return 1
    print(manifest.digest)
    print(manifest.summary())
    return 0


def _skip_httpx_command_line() -> None:
    """Keep httpx from importing its own command-line tool.

    ``import httpx`` also imports ``httpx._main`` (its ``httpx`` command: click, rich's console, pygments) whenever
    click is installed, which it is here (uvicorn needs it): about half of httpx's import time, paid by every
    ``vastui offers`` and ``vastui instances`` for a tool vastui never runs. A stand-in module in its place keeps
    ``httpx.main`` defined and the import cheap; a process that already imported httpx is left as it is.
    """
    if "httpx" not in sys.modules:
        import types

        stand_in = types.ModuleType("httpx._main", "vastui: httpx's command line is not loaded in this process")

        def main() -> None:
            raise SystemExit("httpx's command line is not available inside vastui")

        stand_in.main = main  # type: ignore[attr-defined]
        sys.modules.setdefault("httpx._main", stand_in)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _skip_httpx_command_line()
    parser = build_parser(argv)
    args = parser.parse_safely(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    # Output may vanish mid-command (a closed pipe or terminal): it is dropped, never raised into the work.
    report, token = install_exit_report()
    try:
        with guarded_output(), signals_restored(report):
            return _run_handler(handler, args, report)
    finally:
        reset_exit_report(token)


def _run_handler(handler: Callable[[argparse.Namespace], object], args: argparse.Namespace,
                 report: ExitReport) -> int:
    """Run one command; whichever way it ends, the last line names what a campaign left alive (if anything)."""
    status: int
    try:
        result = handler(args)
        if isinstance(result, Coroutine):
            import asyncio  # here, not at the top: `vastui --help` has no event loop to pay for

            result = asyncio.run(stopping_on_signals(result, quiet_after=True))
        status = int(result or 0)  # type: ignore[call-overload]
    except Stopped as exc:
        _say(f"vastui: stopped by {exc.name}")
        status = 128 + exc.signum
    except VastuiError as exc:
        _say(f"vastui: {exc.title}: {exc}")
        status = 1
    except KeyboardInterrupt:
        _say("vastui: interrupted")
        status = 130
    except BrokenPipeError:
        # the reader went away (``vastui offers --json | head``): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = 0
    left = report.leftover()
    if left is not None and (status != 0 or left.alive):
        _say(f"vastui: {report.last_line()}")
    return status


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

