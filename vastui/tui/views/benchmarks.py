"""Benchmarks: throughput over time, one line per candidate, with the moments candidates were eliminated marked;
and the results table — throughput, p50/p95 latency, GPU utilisation, data-wait, startup split, cost per 1k
accepted units with its interval, correctness and bottleneck.

While the race runs the table shows what the blocks say; once the receipt is written, the receipt's figures.
The chart is drawn with ``PlotextPlot``'s own ``plt`` and only when its series changed.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static
from textual_plotext import PlotextPlot

from vastui.bench.attribution import Readings, attribute
from vastui.bench.receipt import CandidateReport, Receipt
from vastui.bench.stats import Interval
from vastui.campaign.candidate import CandidatePhase
from vastui.campaign.snapshot import CandidateState
from vastui.events import Band
from vastui.events_live import StandingRow
from vastui.tui.campaign_cells import cost_per_1k, pct, short, span
from vastui.tui.campaign_state import CampaignPicture
from vastui.tui.cells import num
from vastui.tui.state import ConsoleState
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, KeyedTable
from vastui.tui.widgets.throughput_axis import ELIMINATED_COLOUR, Rgb, colour_of, hex_of, time_axis

COLUMNS: tuple[tuple[str, str], ...] = (
    ("cand", "cand"), ("gpu", "gpu"), ("state", "state"), ("tput", "u/s [interval]"), ("p50", "p50 ms"),
    ("p95", "p95 ms"), ("util", "GPU util"), ("wait", "data-wait"), ("startup", "startup pull/ready/warm"),
    ("cost", "$/1k accepted [interval]"), ("correct", "correctness"), ("limit", "bottleneck"),
)
# dropped first to fit a narrow terminal: throughput and cost per 1k stay to the last
DROP_ORDER = ("startup", "p95", "correct", "gpu", "util", "p50", "wait", "limit")
Series = tuple[tuple[str, tuple[tuple[float, float], ...]], ...]


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _interval(i: Interval | None) -> str:
    return "-" if i is None else f"{i.point:,.0f} [{i.low:,.0f}–{i.high:,.0f}]"


def _band(i: Interval | None) -> Band | None:
    return None if i is None else Band(point=i.point, low=i.low, high=i.high)


def live_cells(c: CandidateState, row: StandingRow | None, *, awaiting: bool = False) -> tuple[Cell, ...]:
    """A candidate's row from its blocks while the race runs (latency and startup come with the receipt);
    ``awaiting``: its rent waits for the operator's answer (shown so, not as "renting")."""
    util = _median([b.gpu_util_pct for b in c.blocks])
    wait = _median([b.data_wait_share for b in c.blocks])
    tput = _median([b.throughput_units_per_s for b in c.blocks])
    limit = str(attribute(Readings(gpu_activity_pct=util, data_wait_share=wait)).bottleneck) if c.blocks else "-"
    correct = ("canary passed" if c.blocks or c.phase in (CandidatePhase.MEASURING, CandidatePhase.TUNING, CandidatePhase.DONE) else
               ("FAILED: " + short(c.detail, 24) if c.phase == CandidatePhase.FAILED else "-"))
    phase = "awaiting approval" if awaiting else c.phase
    return (c.candidate_id, c.gpu_name, phase, "-" if tput is None else f"{tput:,.0f}", "-", "-", num(util, ".0f"),
            pct(wait), f"-/-/{span(c.warmup_s)}" if c.warmup_s is not None else "-",
            "-" if row is None else cost_per_1k(row.cost_per_unit_usd, is_measured=row.is_measured), correct,
            limit.replace("_", "-"))


def receipt_cells(r: CandidateReport) -> tuple[Cell, ...]:
    lat = r.latency
    s = r.startup
    startup = f"{span(s.pull_s)}/{span(s.readiness_s)}/{span(s.warmup_s)}"
    correct = "FAILED: " + short(r.outcome_detail, 24) if str(r.outcome) == "failed" and not r.blocks else (
        "passed" if r.is_measured else "-")
    limit = "-" if r.attribution is None else str(r.attribution.bottleneck).replace("_", "-")
    tput = _interval(r.throughput) if r.is_measured or r.throughput is None else f"~{r.throughput.point:,.0f} prior"
    return (r.candidate_id, f"{r.gpu_name} ×{r.num_gpus}", str(r.outcome), tput,
            "-" if lat is None else f"{lat.p50_ms:,.0f}", "-" if lat is None else f"{lat.p95_ms:,.0f}",
            num(r.gpu_util_pct, ".0f"), pct(r.data_wait_share), startup,
            cost_per_1k(_band(r.cost_per_unit), is_measured=r.is_measured), correct,
            limit)


def series_of(picture: CampaignPicture) -> Series:
    """Per candidate: (minutes since the campaign started, throughput) of each measured block."""
    start = picture.snapshot.plan.started_at or 0.0
    return tuple((c.candidate_id, tuple(((b.end_at - start) / 60.0, b.throughput_units_per_s) for b in c.blocks))
                 for c in picture.snapshot.candidates if c.blocks)


def legend(colours: dict[str, Rgb], *, eliminated: bool) -> Text:
    """The plot's legend, on its own line under the plot (plotext's own is drawn over the lines)."""
    text = Text()
    for cid, rgb in colours.items():
        text.append("━━ ", style=hex_of(rgb)).append(cid).append("   ")
    if eliminated:
        text.append("✕", style=f"bold {hex_of(ELIMINATED_COLOUR)}").append(" eliminated")
    return text


class BenchmarksView(ConsoleView):
    view_name = "benchmarks"
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("u/s [interval]", "throughput in units per second, with its interval once the receipt is written"),
        ("startup", "image pull / readiness / warm-up times"),
        ("$/1k accepted", "cost per 1,000 accepted units: point [interval]"),
        ("plot", "one line per candidate on a time axis of measured time only (idle gaps cut out, ┆ marks a "
                 "cut); ✕ marks an elimination"),
    )

    def __init__(self) -> None:
        super().__init__()
        self._drawn: tuple[Series, tuple[tuple[str, float], ...]] | None = None

    def compose(self) -> ComposeResult:
        yield Static("Benchmarks: no campaign measured yet", id="bench-title", classes="view-title", markup=False)
        yield PlotextPlot(id="bench-plot")
        yield Static("", id="bench-legend")
        yield KeyedTable(columns=COLUMNS, drop_order=DROP_ORDER, id="bench-table")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#bench-table", KeyedTable)

    @property
    def plot(self) -> PlotextPlot:
        return self.query_one("#bench-plot", PlotextPlot)

    def focus_main(self) -> None:
        focus_now(self.table)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        picture = state.campaign
        if picture is None:
            return
        receipt = state.campaign_end.receipt if state.campaign_end is not None else None
        source = "the receipt" if receipt is not None else "the race's blocks so far"
        blocks = sum(len(c.blocks) for c in picture.snapshot.candidates)
        self.query_one("#bench-title", Static).update(
            f"Benchmarks: campaign {picture.snapshot.campaign_id} — {blocks} blocks measured; table from {source}")
        self._draw(picture)
        self._fill(picture, receipt)

    def _fill(self, picture: CampaignPicture, receipt: Receipt | None) -> None:
        if receipt is not None and receipt.campaign_id == picture.snapshot.campaign_id:
            rows = {r.candidate_id: receipt_cells(r) for r in receipt.candidates}
            self.table.sync(rows, [r.candidate_id for r in receipt.candidates])
            return
        standings = {r.candidate: r for r in picture.snapshot.race.rows}
        candidates = picture.snapshot.candidates
        waiting = {p.offer_id for p in picture.snapshot.pending_approvals if p.is_spending}
        self.table.sync({c.candidate_id: live_cells(c, standings.get(c.candidate_id),
                                                    awaiting=picture.is_running and c.offer_id in waiting)
                         for c in candidates},
                        [c.candidate_id for c in candidates])

    def _draw(self, picture: CampaignPicture) -> None:
        series = series_of(picture)
        start = picture.snapshot.plan.started_at or 0.0
        eliminated = tuple(sorted((cid, (at - start) / 60.0) for cid, at in picture.eliminated_at.items()))
        if (series, eliminated) == self._drawn:
            return
        self._drawn = (series, eliminated)
        axis = time_axis([x for _, points in series for x, _ in points])
        plt = self.plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("throughput per candidate (units/s)")
        cut = f" — {len(axis.cuts)} idle gap(s) cut out" if axis.cuts else ""
        plt.xlabel(f"minutes since the campaign started, measured time only{cut}")
        colours = {cid: colour_of(i) for i, cid in enumerate(cid for cid, _ in series)}
        last = {cid: points[-1] for cid, points in series if points}
        for cid, points in series:
            plt.plot([axis.x(x) for x, _ in points], [y for _, y in points], marker="braille", color=colours[cid])
        for cid, minute in eliminated:
            if cid in last:   # a marker where its line ends, not a full-height line that reads as a frame
                plt.scatter([axis.x(min(minute, last[cid][0]))], [last[cid][1]], marker="✕",
                            color=ELIMINATED_COLOUR)
        if axis.cuts:
            plt.xticks(*axis.ticks())
        self.plot.refresh()
        self.query_one("#bench-legend", Static).update(legend(colours, eliminated=bool(eliminated)))
