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
EXPECTED = {"bench_query.py": 2, "bench_store.py": 2, "bench_sim_search.py": 2, "bench_stats.py": 2,
            "bench_cli.py": 4, "bench_sim_server.py": 3, "bench_console.py": 2, "bench_events.py": 2}
# Whole processes and a simulator in another process: seconds even at --quick, so only the full suite runs them.
SLOW = {"bench_cli.py", "bench_sim_server.py", "bench_console.py", "bench_events.py"}

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


@pytest.mark.parametrize("script", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name
                                    for name in sorted(EXPECTED)])
def test_benchmark_runs_and_prints_ratios(script: str) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run([sys.executable, "-W", "error", str(BENCHMARKS / script), "--quick"], cwd=ROOT, env=env,
                            capture_output=True, encoding="utf-8", timeout=240 if script in SLOW else 60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    matches = [RATIO_LINE.match(line) for line in lines]
    assert all(matches), f"lines not in the ratio format: {[l for l, m in zip(lines, matches, strict=True) if not m]}"
    assert len(matches) == EXPECTED[script]
    for match in matches:
        assert match is not None
        ours, base = (match["ours_t"], match["base_t"]) if match["ours_t"] else (match["ours_r"], match["base_r"])
        for figure in (ours, base, match["ratio"]):
            assert math.isfinite(_value(figure)) and _value(figure) > 0, match.group(0)


def test_run_all_turns_every_ratio_line_into_one_table_row() -> None:
    """run_all's table, fed the real output of one benchmark (bench_query at --quick)."""
    from benchmarks import run_all
    result = subprocess.run([sys.executable, "-W", "error", str(BENCHMARKS / "bench_query.py"), "--quick"], cwd=ROOT,
                            capture_output=True, encoding="utf-8", timeout=60, check=True)
    rows, notes = run_all.parse(result.stdout)
    assert len(rows) == EXPECTED["bench_query.py"] and notes
    lines = run_all.table(rows)
    assert len(lines) == 2 + len(rows)
    for (name, ours, base, ratio), line in zip(rows, lines[2:], strict=False):
        assert line == f"| {name} | {ours} | {base} | {ratio}× |" and math.isfinite(_value(ratio))
    assert set(run_all.ORDER) == set(EXPECTED)


_SUMMARY = re.compile(r"^summary: vastui within 3 % in \d+ % of \d+ markets, p95 regret (?:[0-9.]+|inf) % "
                      r"\(at the race's own profile within 3 % in \d+ %\), end to end within 3 % in \d+ %, p95 (?:[0-9.]+|inf) %, stopping misses \d+, coverage \d+ %, "
                      r"median startup error \d+ %, tuned within 5 % in \d+ %, spend \d+ % of benchmark-everything, "
                      r"time to decision (?:\d+|nan) min \(everything (?:\d+|nan)\), \d+ wrong-output choices$")


@pytest.fixture(scope="module")
def decision_quick_repeat() -> subprocess.CompletedProcess[str]:
    """decision_quality.py --quick --repeat, run once for both tests below: its first campaigns print the whole
    first-campaign report, then each market is run again a week later (a separate --quick run cost 40 s more)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run([sys.executable, "-W", "error", str(BENCHMARKS / "decision_quality.py"), "--quick",
                             "--repeat"], cwd=ROOT, env=env, capture_output=True, encoding="utf-8", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.slow
def test_decision_quality_runs_two_markets_and_ends_with_one_summary_line(
        decision_quick_repeat: subprocess.CompletedProcess[str]) -> None:
    """decision_quality.py at --quick: whole campaigns on two simulated markets, judged by the hidden truth."""
    result = decision_quick_repeat
    lines = result.stdout.strip().splitlines()
    summaries = [line for line in lines if line.startswith("summary: ")]
    assert len(summaries) == 1 and _SUMMARY.match(summaries[0]), summaries
    table = [line for line in lines if line.startswith("| ") and not line.startswith("| strategy")]
    assert [row.split(" | ")[0].removeprefix("| ") for row in table][:5] == [
        "vastui", "top dlperf_usd", "cheapest $/h", "vastui prior", "benchmark-everything"]
    assert "oracle validation" in result.stdout and "market variety" in result.stdout
    assert "the race ended by:" in result.stdout and "indifference-stop misses" in result.stdout
    for what in ("at the race's profile", "end to end"):   # the yardsticks again, without markets no one could rent
        found = re.search(rf"(?m)^- {re.escape(what)}, markets whose best could not be scheduled when the campaign "
                          rf"tried to rent it: (\d+); within 3 % among the others: \d+ % of (\d+)$", result.stdout)
        assert found is not None and int(found[1]) + int(found[2]) == 2, what
    assert len(re.findall(r"(?m)^market \d+ \(", result.stderr)) == 2


_REPEAT_SUMMARY = re.compile(r"^summary \(repeat\): second campaign spend \d+ % of benchmark-everything \(first \d+ %\), "
                             r"at the race's profile within 3 % in \d+ %, end to end within 3 % in \d+ %, "
                             r"(\d+) of (\d+) raced at an inherited screening$")


@pytest.mark.slow
def test_decision_quality_repeat_runs_a_second_campaign_on_each_market_from_the_first_s_store(
        decision_quick_repeat: subprocess.CompletedProcess[str]) -> None:
    """decision_quality.py --quick --repeat: each market again a week later, planned on what the first measured."""
    result = decision_quick_repeat
    lines = result.stdout.strip().splitlines()
    summary = _REPEAT_SUMMARY.match(lines[-1])
    assert summary, lines[-1]
    assert summary.group(2) == "2"
    assert any(line.startswith("summary: vastui within 3 % in ") for line in lines)   # the first campaigns' report
    second = next(line for line in lines if line.startswith("- second campaign: "))
    reverified = re.search(r"(\d+) candidates re-verified on earlier runs", second)
    assert reverified is not None and int(reverified.group(1)) > 0, second   # the first campaign's store was used
    passed = next(line for line in lines if line.startswith("- second campaign, passed over by the calibrated prior: "))
    counted = re.search(r"prior: (\d+) offers, stated chances summing to [\d.]+ .*in truth the market's optimum: "
                        r"(\d+); in truth cheaper than vastui's choice: (\d+)", passed)
    assert counted is not None, passed
    assert int(counted.group(2)) <= int(counted.group(1)) and int(counted.group(3)) <= int(counted.group(1))
    assert result.stderr.count(" again (") == 2
