"""A simulated marketplace in its own process for the benchmarks: one process, one event loop, one core.

Run as a script it serves a seeded world (no SSH hosts: the benchmarks measure the API) with ``--instances N`` already
rented, prints ``URL KEY`` on one line, and serves until stdin closes. ``SimProcess`` starts and stops it.
With ``--floor FILE`` it serves instead the floor of the same HTTP stack: the same uvicorn server and listening socket
with a bare ASGI app that reads the request body and answers FILE's bytes, nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType

HERE = Path(__file__).resolve().parent
KEY = "bench-sim-key"


class SimProcess:
    """``with SimProcess(instances=30) as sim: sim.url``; ``sim.rss_mib()`` reads its resident memory."""

    def __init__(self, *, seed: int = 7, instances: int = 0, machines: int | None = None,
                 floor: Path | None = None) -> None:
        args = [sys.executable, str(HERE / "simproc.py"), "--seed", str(seed), "--instances", str(instances)]
        if machines is not None:
            args += ["--machines", str(machines)]
        if floor is not None:
            args += ["--floor", str(floor)]
        self._args = args
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.key = KEY

    def __enter__(self) -> SimProcess:
        self._proc = subprocess.Popen(self._args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      env={**os.environ, "PYTHONWARNINGS": "error"})
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().split()
        if len(line) != 2:
            self.__exit__(None, None, None)
            raise SystemExit(f"the simulator did not start: {line}")
        self.url, self.key = line
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def rss_mib(self) -> float:
        """Resident memory of the simulator process (Linux /proc)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise SystemExit("no VmRSS in /proc: the memory figure needs Linux")


async def _serve(seed: int, instances: int, machines: int | None) -> None:
    from vastui.clock import WallClock
    from vastui.sim.factory import build_market
    from vastui.sim.instance import CreateRequest
    from vastui.sim.realism import Realism
    from vastui.sim.server import SimServer

    extra = {} if machines is None else {"n_machines": machines}
    # the HTTP stack's speed is measured, not the marketplace's rules: the kind simulator, by name (its rate limits
    # would measure the limiter)
    market = build_market(seed, clock=WallClock(), api_key=KEY, realism=Realism.kind(), **extra)
    free = [m for m in market.world.machines if not m.rented][:instances]
    for machine in free:
        await market.create_instance(machine.offer_id, CreateRequest.from_body(
            {"image": "pytorch/pytorch", "disk": 10, "label": "bench"}))
    async with SimServer(market, port=0) as server:
        print(server.url, KEY, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def _serve_floor(answer: bytes) -> None:
    from typing import Any

    from vastui.clock import WallClock
    from vastui.sim.factory import build_market
    from vastui.sim.realism import Realism
    from vastui.sim.server import SimServer

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]})
        await send({"type": "http.response.body", "body": answer})

    market = build_market(1, clock=WallClock(), api_key=KEY, n_machines=1, realism=Realism.kind())
    async with SimServer(market, port=0, poll=False, app=app) as server:
        print(server.url, KEY, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--instances", type=int, default=0)
    parser.add_argument("--machines", type=int, default=None)
    parser.add_argument("--floor", type=Path, default=None)
    args = parser.parse_args()
    if args.floor is not None:
        asyncio.run(_serve_floor(args.floor.read_bytes()))
    else:
        asyncio.run(_serve(args.seed, args.instances, args.machines))


if __name__ == "__main__":
    main()
