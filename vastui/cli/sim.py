"""``vastui sim``: serve the embedded simulated marketplace on loopback. Part of the composition root.

The key the simulator accepts can come from a file or the environment as well as from argv: argv is visible to every
user of the machine (``ps``), so the help points at the safer two.
"""

from __future__ import annotations

import argparse
import sys

from vastui.cli.terminal import port_number, positive_number
from vastui.errors import VastuiError

SIM_EPILOG = """\
the key the simulator accepts, first found:
  --api-key KEY          (visible to other users in `ps`: prefer the next two)
  --api-key-file PATH    one line, mode 0600
  $VASTUI_SIM_API_KEY
  otherwise the demo key vastui-demo-key, printed at start
"""


def require_simulator() -> None:
    """The simulator's web stack comes with the ``[sim]`` extra: without it, say which extra to install (not a
    traceback). Called by ``vastui sim`` and ``vastui demo`` before they load ``vastui.sim``."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise VastuiError(f"the simulated marketplace needs the [sim] extra ({exc.name} is not installed): "
                          "pip install 'vastui[sim]' (in a clone: pip install -e '.[sim]')",
                          title="Missing extra") from exc


def add_sim_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sim", help="serve the embedded simulated marketplace on loopback", epilog=SIM_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (loopback only; default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8765, help="TCP port (0 picks a free one; default 8765)")
    p.add_argument("--seed", type=int, default=7, help="world seed: same seed, same market (default 7)")
    p.add_argument("--api-key", help="key the simulator accepts (visible in `ps`; see below for safer ways)")
    p.add_argument("--api-key-file", metavar="PATH", help="read the key the simulator accepts from this file")
    p.add_argument("--time-scale", type=positive_number, default=1.0,
                   help="simulated seconds per wall second (e.g. 60: an hour of billing per minute)")
    p.add_argument("--chaos", metavar="PROFILE", choices=("flaky", "storm", "quota"),
                   help="inject faults, seeded by --seed and counted (printed at stop): flaky (a few 429s, 5xx, "
                        "taken offers, dropped replies), storm (many of each) or quota (searches refused)")
    p.add_argument("--realism", choices=("vast", "kind"), default="vast",
                   help="how hard the marketplace is: vast (the default: rate limits without Retry-After, 404 for a "
                        "bad key, proxy SSH, late keys, transient states, container logs, padded rows, as "
                        "docs/api-notes.md cites) or kind (every rule off; only for the fastest unit tests)")
    p.set_defaults(handler=_cmd_sim)


async def _cmd_sim(args: argparse.Namespace) -> int:
    import asyncio
    import os
    import signal
    import tempfile
    from pathlib import Path

    require_simulator()
    from vastui.clock import ScaledClock
    from vastui.config import resolve_sim_key
    from vastui.sim.chaos import Chaos
    from vastui.sim.factory import DEMO_API_KEY, build_market_with_hosts
    from vastui.sim.realism import Realism
    from vastui.sim.server import SimServer

    if args.host not in ("127.0.0.1", "localhost", "::1"):
        raise VastuiError("The simulator serves loopback only (127.0.0.1, localhost or ::1).", title="Bad option")
    resolved = resolve_sim_key(explicit=args.api_key, key_file=args.api_key_file, env=os.environ)
    key = DEMO_API_KEY if resolved.key is None else resolved.key.reveal()
    hosts_dir = tempfile.TemporaryDirectory(prefix="vastui-sim-hosts-")
    chaos = Chaos.from_profile(args.chaos, seed=args.seed) if args.chaos else None
    market, pool = build_market_with_hosts(args.seed, clock=ScaledClock(scale=args.time_scale), api_key=key,
                                           hosts_dir=Path(hosts_dir.name), chaos=chaos,
                                           realism=Realism.named(args.realism))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with SimServer(market, host=args.host, port=args.port) as server:
            if resolved.key is None:
                print(f"demo API key: {key}")
            print(f"vastui sim: seed {args.seed}, {len(market.world.machines)} machines, "
                  f"time x{args.time_scale:g}, realism {args.realism}, serving {server.url}")
            shown_key = key if resolved.key is None else f"<the key from {resolved.source}>"
            if chaos is not None:
                print(f"chaos {args.chaos} (seed {args.seed}): {chaos.describe()}")
            print(f"  export VAST_URL={server.url} VAST_API_KEY={shown_key}   (Ctrl-C stops)", flush=True)
            await stop.wait()
    except OSError as exc:
        raise VastuiError(f"Cannot serve on {args.host}:{args.port}: {exc.strerror or exc}.",
                          title="Simulator") from exc
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await pool.close()
        hosts_dir.cleanup()
    if chaos is not None:
        print(f"vastui sim: chaos {args.chaos} injected: {chaos.summary()}", file=sys.stderr)
    print("vastui sim: stopped", file=sys.stderr)
    return 0
