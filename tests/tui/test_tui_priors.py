"""Priors are marked as priors and never drawn as intervals: a candidate never rented shows ``~$… prior`` for its
cost and ``~… prior`` for its throughput in the Campaign and Benchmarks views (live and from the receipt); a measured
one keeps its interval."""

from __future__ import annotations

import dataclasses

from tests.tui.campaign_canned import racing_snapshot, receipt
from vastui.bench.stats import Interval
from vastui.events import Band
from vastui.events_live import StandingRow
from vastui.tui.views.benchmarks import COLUMNS as BENCH_COLUMNS
from vastui.tui.views.benchmarks import live_cells, receipt_cells
from vastui.tui.views.campaign import CANDIDATE_COLUMNS, candidate_cells

PRIOR = Band(0.00000142, 0.00000142, 0.00000142)      # what an unmeasured standing carries: its prior, no spread
MEASURED = Band(0.00031, 0.00029, 0.00034)
TPUT, COST = ([k for k, _ in CANDIDATE_COLUMNS].index(c) for c in ("tput", "cost"))
B_TPUT, B_COST = ([k for k, _ in BENCH_COLUMNS].index(c) for c in ("tput", "cost"))


def test_the_campaign_view_marks_an_unmeasured_candidates_figures_as_priors() -> None:
    snapshot = racing_snapshot()
    c3 = next(c for c in snapshot.candidates if c.candidate_id == "c3")
    prior = StandingRow("c3", 0, 1210.0, PRIOR, "undecided", False, None)
    cells = candidate_cells(c3, snapshot, prior)
    assert cells[TPUT] == "~1,210 prior"
    assert cells[COST] == "~$0.00142 prior" and "[" not in str(cells[COST])
    c1 = next(c for c in snapshot.candidates if c.candidate_id == "c1")
    measured = StandingRow("c1", 9, 1489.0, MEASURED, "met", True, None)
    cells = candidate_cells(c1, snapshot, measured)
    assert cells[TPUT] == "1,489" and cells[COST] == "$0.31 [0.29–0.34]"


def test_benchmarks_never_shows_an_interval_for_a_candidate_never_rented() -> None:
    snapshot = racing_snapshot()
    c3 = next(c for c in snapshot.candidates if c.candidate_id == "c3")
    cells = live_cells(c3, StandingRow("c3", 0, 1210.0, PRIOR, "undecided", False, None))
    assert cells[B_COST] == "~$0.00142 prior"
    report = dataclasses.replace(receipt().candidates[1], is_measured=False, blocks=0,
                                 throughput=Interval(1210.0, 1210.0, 1210.0, 0.95, 0),
                                 cost_per_unit=Interval(0.00000142, 0.00000142, 0.00000142, 0.95, 0))
    cells = receipt_cells(report)
    assert cells[B_TPUT] == "~1,210 prior" and cells[B_COST] == "~$0.00142 prior"
    measured = receipt_cells(receipt().candidates[0])
    assert "[" in str(measured[B_TPUT]) and "[" in str(measured[B_COST])
