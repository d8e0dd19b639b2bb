"""GPUs: every GPU of every campaign instance — utilisation, memory, power and its candidate's data-wait share,
with a short history — one dense row each. A GPU that is input-bound (data-wait above the attribution threshold
while it idles) is flagged, with the bottleneck's next move under the table."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from vastui.bench.attribution import Bottleneck
from vastui.campaign.snapshot import GpuState
from vastui.tui.campaign_cells import pct, spark
from vastui.tui.campaign_state import CampaignPicture
from vastui.tui.cells import num
from vastui.tui.state import ConsoleState
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, KeyedTable

HISTORY = 30
COLUMNS: tuple[tuple[str, str], ...] = (
    ("cand", "cand"), ("inst", "instance"), ("gpu", "gpu"), ("work", "work"), ("util", "util"),
    ("util_hist", "util history"), ("mem", "mem MiB"), ("power", "power W"), ("power_hist", "power history"),
    ("wait", "data-wait"), ("limit", "limit"),
)
# dropped first to fit a narrow terminal: utilisation, data-wait and the limit stay to the last
DROP_ORDER = ("power_hist", "util_hist", "inst", "power", "work", "mem")
INPUT_BOUND = "INPUT-BOUND"


def gpu_key(gpu: GpuState) -> str:
    return f"{gpu.candidate}/{gpu.gpu_index}"


def gpu_cells(gpu: GpuState, picture: CampaignPicture) -> tuple[Cell, ...]:
    attribution = picture.gpu_attribution(gpu)
    input_bound = attribution.bottleneck is Bottleneck.INPUT_BOUND
    limit: Cell = (Text(f"⚠ {INPUT_BOUND}", style="bold red") if input_bound
                   else str(attribution.bottleneck).replace("_", "-"))
    mem = "-" if gpu.mem_used_mib is None else (
        f"{gpu.mem_used_mib:,.0f}" + ("" if gpu.mem_total_mib is None else f" / {gpu.mem_total_mib:,.0f}"))
    powers = [p for p in gpu.power_history if p is not None]
    top_power, low_power = max(powers, default=0.0), 0.8 * min(powers, default=0.0)
    util: Cell = "-" if gpu.util_pct is None else f"{gpu.util_pct:.0f} %"
    if input_bound:
        util = Text(str(util), style="bold red")
    return (gpu.candidate, num(gpu.instance_id, "d"), str(gpu.gpu_index), gpu.purpose or "-", util,
            spark(gpu.util_history, width=HISTORY, top=100.0), mem, num(gpu.power_w, ".0f"),
            spark(gpu.power_history, width=HISTORY, top=top_power, bottom=low_power), pct(picture.data_wait_share.get(gpu.candidate)),
            limit)


def flags_text(picture: CampaignPicture) -> str:
    """One line per input-bound candidate: which GPUs, the evidence, and the next move."""
    lines = []
    flagged: dict[str, list[GpuState]] = {}
    for gpu in picture.snapshot.gpus:
        if picture.gpu_attribution(gpu).bottleneck is Bottleneck.INPUT_BOUND:
            flagged.setdefault(gpu.candidate, []).append(gpu)
    for candidate, gpus in flagged.items():
        attribution = picture.gpu_attribution(gpus[0])
        evidence = "; ".join(str(e) for e in attribution.evidence)
        indexes = ", ".join(str(g.gpu_index) for g in gpus)
        lines.append(f"⚠ {candidate} GPU {indexes}: {evidence}\n    next move — {attribution.next_move}")
    return "\n".join(lines) or "No GPU is input-bound."


class GpusView(ConsoleView):
    view_name = "gpus"
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("work", "what the GPU is doing for the campaign (canary, race, tuning)"),
        ("util", "GPU utilisation now, from the agent's NVML samples"),
        ("data-wait", "share of the candidate's recent step time spent waiting for input"),
        ("limit", "the bottleneck judged from util and data-wait (INPUT-BOUND: fix the data path first)"),
    )

    def compose(self) -> ComposeResult:
        yield Static("GPUs: no campaign instance reports yet", id="gpus-title", classes="view-title", markup=False)
        yield KeyedTable(columns=COLUMNS, drop_order=DROP_ORDER, id="gpus-table")
        yield Static("", id="gpus-flags", markup=False)

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#gpus-table", KeyedTable)

    def focus_main(self) -> None:
        focus_now(self.table)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        picture = state.campaign
        if picture is None:
            return
        gpus = picture.snapshot.gpus
        instances = {g.instance_id for g in gpus}
        self.query_one("#gpus-title", Static).update(
            f"GPUs: {len(gpus)} on {len(instances)} instance(s) of campaign {picture.snapshot.campaign_id} "
            f"(data-wait: share of the candidate's recent step time spent waiting for input)")
        self.table.sync({gpu_key(g): gpu_cells(g, picture) for g in gpus}, [gpu_key(g) for g in gpus])
        self.query_one("#gpus-flags", Static).update(flags_text(picture))
