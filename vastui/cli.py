"""Composition root: parses argv, loads settings, builds the real services, runs a headless command or the TUI.

This is the only module (with the TUI) that prints or exits. Each ``_cmd_*`` function builds what its command
needs and returns the process exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from vastui import __version__
from vastui.errors import VastuiError

EPILOG = """\
examples:
  vastui sim --port 8765 --seed 7            serve the simulated marketplace on loopback
  vastui offers 'gpu_name=RTX_4090 num_gpus>=2 reliability>0.98' -o dlperf_usd- --limit 10
  vastui instances --json
  vastui manifest check examples/resnet.toml

The API key is taken from --api-key, then VAST_API_KEY, then ~/.config/vastai/vast_api_key (as the official CLI).
The marketplace URL from --url, then VAST_URL, then https://console.vast.ai.
"""


def _add_connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="marketplace base URL (default: $VAST_URL or https://console.vast.ai)")
    parser.add_argument("--api-key", help="Vast API key (default: $VAST_API_KEY or the official CLI's key file)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vastui",
        description="Rent Vast.ai GPUs by measured useful work: benchmark campaigns, approvals, leak watch.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vastui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    # --- sim ---------------------------------------------------------------------------------------------
    p = sub.add_parser("sim", help="serve the embedded simulated marketplace on loopback")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (loopback only; default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="TCP port (0 picks a free one; default 8765)")
    p.add_argument("--seed", type=int, default=7, help="world seed: same seed, same market (default 7)")
    p.add_argument("--api-key", help="key the simulator accepts (default: a fixed demo key, printed at start)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="simulated seconds per wall second (e.g. 60: an hour of billing per minute)")
    p.set_defaults(handler=_cmd_sim)

    # --- offers / instances --------------------------------------------------------------------------------
    p = sub.add_parser("offers", help="search offers with the official CLI's query language")
    _add_connection_args(p)
    p.add_argument("query", nargs="*", help="e.g. 'gpu_name=RTX_4090 num_gpus>=2 reliability>0.98'")
    p.add_argument("-o", "--order", default="score-", help="order, e.g. dlperf_usd- or 'num_gpus-,dph+' (default score-)")
    p.add_argument("--type", default="on-demand", choices=["on-demand", "bid", "reserved"], help="pricing type")
    p.add_argument("--limit", type=int, default=None, help="at most N offers")
    p.add_argument("--storage", type=float, default=5.0, help="GiB of disk to price in (default 5)")
    p.add_argument("-n", "--no-default", action="store_true", help="drop the default verified/rentable filters")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    p.set_defaults(handler=_cmd_offers)

    p = sub.add_parser("instances", help="list your instances (all pages)")
    _add_connection_args(p)
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    p.set_defaults(handler=_cmd_instances)

    # --- manifest ------------------------------------------------------------------------------------------
    manifest_parser = sub.add_parser("manifest", help="validate workload manifests")
    manifest_sub = manifest_parser.add_subparsers(dest="manifest_command", metavar="ACTION")
    manifest_parser.set_defaults(handler=lambda args: _cmd_manifest_help(manifest_parser))
    pm = manifest_sub.add_parser("check", help="validate a manifest and print its identity digest")
    pm.add_argument("file", help="the manifest (TOML), e.g. examples/resnet.toml")
    pm.set_defaults(handler=_cmd_manifest_check)

    return parser


def _cmd_sim(args: argparse.Namespace) -> int:
    raise VastuiError("vastui sim is not built yet")


def _cmd_offers(args: argparse.Namespace) -> int:
    raise VastuiError("vastui offers is not built yet")


def _cmd_instances(args: argparse.Namespace) -> int:
    raise VastuiError("vastui instances is not built yet")


def _cmd_manifest_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _cmd_manifest_check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from vastui.bench.manifest import load_manifest
    from vastui.errors import ManifestError

    try:
        manifest = load_manifest(Path(args.file))
    except ManifestError as exc:
        print(str(exc), file=sys.stderr)  # file:line: field — reason, as compilers do, so editors can jump to it
        return 1
    print(manifest.digest)
    print(manifest.summary())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        result = handler(args)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except VastuiError as exc:
        print(f"vastui: {exc.title}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("vastui: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
