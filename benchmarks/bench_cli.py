"""Whole commands as a user runs them: ``vastui offers``, ``vastui instances`` and ``vastui --help`` as processes,
against the official ``vastai`` 1.9.1 CLI on the same simulator, and against a plain httpx script.

What it measures: the wall time of one process, from exec to exit, median over interleaved runs (ours, theirs,
ours, theirs, ...): ``vastui offers 'gpu_ram>=16 num_gpus=1' --limit 1000 --json`` and ``vastui instances --json``
(30 instances, two pages of the official CLI's 25) against a simulator in another process (``benchmarks/simproc.py``),
and ``vastui --help``.

Why these baselines: the official CLI is what people would otherwise run (``vastai search offers ... --raw``,
``vastai show instances --raw``, ``vastai --help``), against the same simulator, same answers, with its start-up side
requests pointed at the simulator too (``VAST_URL``) and its update check off. The plain httpx script is the floor of
any Python client: interpreter, ``import httpx``, the same POST and ``json.dumps`` of the answer, nothing else. A
ratio below 1 means ours is faster.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from simproc import SimProcess
from timing import Comparison, duration, parse_options, ratio_line

BIN = Path(sys.executable).parent
QUERY = "gpu_ram>=16 num_gpus=1"
INSTANCES = 30
PLAIN_HTTPX = """\
import json, os, sys
import httpx
body = {"verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True}, "gpu_ram": {"gte": 16000.0},
        "num_gpus": {"eq": "1"}, "order": [["score", "desc"]], "type": "on-demand", "limit": 1000,
        "allocated_storage": 5.0}
r = httpx.post(os.environ["VAST_URL"] + "/api/v0/bundles/", json=body,
               headers={"Authorization": "Bearer " + os.environ["VAST_API_KEY"]})
r.raise_for_status()
print(json.dumps(r.json()["offers"], indent=1))
"""


def _command(name: str) -> list[str]:
    script = BIN / name
    if script.exists():
        return [str(script)]
    if name == "vastui":
        return [sys.executable, "-m", "vastui"]
    raise SystemExit(f"the official CLI is not installed next to {sys.executable} (pip install vastai==1.9.1)")


def _timed(argv: Sequence[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    if result.returncode != 0 or (not result.stdout and "--help" not in argv):
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout[-500:]}{result.stderr}")
    return took


def interleaved(ours: Sequence[str], theirs: Sequence[str], *, runs: int, env_ours: dict[str, str],
                env_theirs: dict[str, str]) -> Comparison:
    """Median wall time of ``runs`` alternating runs of each, after one untimed run each (caches, role file)."""
    _timed(ours, env_ours)
    _timed(theirs, env_theirs)
    mine, others = [], []
    for _ in range(runs):
        mine.append(_timed(ours, env_ours))
        others.append(_timed(theirs, env_theirs))
    return Comparison(statistics.median(mine), statistics.median(others))


def main() -> None:
    options = parse_options(__doc__)
    runs = 1 if options.quick else 10
    vastui, vastai = _command("vastui"), _command("vastai")
    with tempfile.TemporaryDirectory(prefix="vastui-bench-cli-") as home, SimProcess(instances=INSTANCES) as sim:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("VAST", "XDG_"))}
        ours_env = {**base, "VAST_URL": sim.url, "VAST_API_KEY": sim.key, "VASTUI_CONFIG_DIR": f"{home}/cfg",
                    "VASTUI_DATA_DIR": f"{home}/data"}
        theirs_env = {**base, "HOME": home, "VAST_URL": sim.url, "VASTAI_NO_UPDATE_CHECK": "1"}
        official = [*vastai, "--url", sim.url, "--api-key", sim.key, "--raw"]
        offers = interleaved([*vastui, "offers", QUERY, "--limit", "1000", "--json"],
                             [*official[:1], "search", "offers", QUERY, "--limit", "1000", *official[1:]],
                             runs=runs, env_ours=ours_env, env_theirs=theirs_env)
        instances = interleaved([*vastui, "instances", "--json"], [*official[:1], "show", "instances", *official[1:]],
                                runs=runs, env_ours=ours_env, env_theirs=theirs_env)
        floor = interleaved([*vastui, "offers", QUERY, "--limit", "1000", "--json"],
                            [sys.executable, "-c", PLAIN_HTTPX], runs=runs, env_ours=ours_env, env_theirs=ours_env)
        helps = interleaved([*vastui, "--help"], [*vastai, "--help"], runs=runs, env_ours=ours_env,
                            env_theirs=theirs_env)
    print(f"# whole processes, median of {runs} interleaved runs; simulator in its own process ({INSTANCES} "
          f"instances); baselines: vastai 1.9.1 on the same simulator, and a plain httpx script")
    print(ratio_line("cli.offers --limit 1000 --json vs vastai search offers --raw", offers))
    print(ratio_line("cli.instances --json vs vastai show instances --raw", instances))
    print(ratio_line("cli.offers --json vs plain httpx script (same POST, same JSON out)", floor))
    print(ratio_line("cli.--help vs vastai --help", helps))
    print(f"# vastui --help: {duration(helps.ours_s)} (target: at most 300 ms)")


if __name__ == "__main__":
    main()
