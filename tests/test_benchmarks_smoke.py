"""The benchmarks keep running: each ``benchmarks/bench_*.py`` at ``--quick`` size, as a process, warnings as errors.

Figures at quick size mean nothing and are not checked; what is checked is that every script finishes, prints its
ratio lines in the documented shape, with positive finite numbers, and that no benchmark goes missing.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
EXPECTED = {"bench_query.py": 2, "bench_store.py": 2, "bench_sim_search.py": 2, "bench_stats.py": 2}

_NUMBER = r"[0-9][0-9,.]*(?:e[+-]?[0-9]+)?"
_DURATION = rf"{_NUMBER} (?:ns|µs|ms|s)"
RATIO_LINE = re.compile(
    rf"^(?P<name>[^:#][^:]*): (?:(?P<ours_t>{_DURATION}) per op \(baseline (?P<base_t>{_DURATION}) per op\)"
    rf"|(?P<ours_r>{_NUMBER}) (?P<unit>\S+) \(baseline (?P<base_r>{_NUMBER}) (?P=unit)\)) -> ratio (?P<ratio>{_NUMBER})×$"
)


def _value(text: str) -> float:
    return float(text.split()[0].replace(",", ""))


def test_every_benchmark_is_smoke_tested() -> None:
    assert {p.name for p in BENCHMARKS.glob("bench_*.py")} == set(EXPECTED)


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_benchmark_runs_and_prints_ratios(script: str) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run([sys.executable, "-W", "error", str(BENCHMARKS / script), "--quick"], cwd=ROOT, env=env,
                            capture_output=True, encoding="utf-8", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    matches = [RATIO_LINE.match(line) for line in lines]
    assert all(matches), f"lines not in the ratio format: {[l for l, m in zip(lines, matches) if not m]}"
    assert len(matches) == EXPECTED[script]
    for match in matches:
        assert match is not None
        ours, base = (match["ours_t"], match["base_t"]) if match["ours_t"] else (match["ours_r"], match["base_r"])
        for figure in (ours, base, match["ratio"]):
            assert math.isfinite(_value(figure)) and _value(figure) > 0, match.group(0)
