"""Every benchmark in one go, printed as one table with the machine it ran on.

Runs each ``benchmarks/bench_*.py`` as its own process (``--quick`` is passed through), keeps the ``#`` notes, and
turns every ratio line into a table row: what was measured, ours, the baseline measured in the same run, and the
ratio (for times: ours / baseline, below 1 is faster; for rates: ours / baseline, above 1 is faster). The load
average is printed before and after: on a shared machine, read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ("bench_cli.py", "bench_sim_server.py", "bench_sim_search.py", "bench_query.py", "bench_store.py",
         "bench_stats.py", "bench_console.py", "bench_events.py")
RATIO = re.compile(r"^(?P<name>[^:#][^:]*): (?P<ours>.+?) (?:per op )?\(baseline (?P<base>.+?)(?: per op)?\) "
                   r"-> ratio (?P<ratio>\S+)×$")


def machine() -> str:
    """CPU model, cores, Python and OS, in one line."""
    model = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        model = names[0] if names else model
    return (f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    """A Markdown table of (measure, ours, baseline, ratio)."""
    lines = ["| measure | ours | baseline (same run) | ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {ours} | {base} | {ratio}× |" for name, ours, base, ratio in rows]
    return lines


def parse(output: str) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """(table rows, # notes) from one benchmark's output."""
    rows, notes = [], []
    for line in output.splitlines():
        if line.startswith("#"):
            notes.append(line)
        elif (match := RATIO.match(line)) is not None:
            rows.append((match["name"], match["ours"], match["base"], match["ratio"]))
    return rows, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks they run, figures mean nothing")
    options = parser.parse_args()
    started = load()
    rows: list[tuple[str, str, str, str]] = []
    notes: list[str] = []
    failed = []
    for script in ORDER:
        argv = [sys.executable, str(HERE / script), *(["--quick"] if options.quick else [])]
        result = subprocess.run(argv, capture_output=True, text=True, cwd=HERE.parent)
        if result.returncode != 0:
            failed.append(f"{script}: exit {result.returncode}\n{result.stdout[-400:]}{result.stderr[-800:]}")
            continue
        found, said = parse(result.stdout)
        rows += found
        notes += [f"{script}: {note[1:].strip()}" for note in said]
    print(f"machine: {machine()}")
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; load average (1/5/15 min) before: {started}, "
          f"after: {load()}{' (--quick: figures mean nothing)' if options.quick else ''}")
    print()
    print("\n".join(table(rows)))
    print()
    print("\n".join(f"- {note}" for note in notes))
    for failure in failed:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
