"""GPUs: every GPU the account rents, live ones first, one dense row each, with where its utilisation comes from.

A campaign's GPUs read the agent's NVML samples (source ``nvml``: utilisation, memory, power, a short history and
the candidate's data-wait share); every other listed instance reads the marketplace's ``gpu_util`` (source ``api``,
one row per instance). An instance that was destroyed (its campaign sent the destroy, or proved it gone) or that a
complete listing no longer shows leaves the live rows at once and stays greyed below them, "destroyed at" when;
the title counts live GPUs only. A GPU's bottleneck verdict holds still (``bench/hysteresis.py``) and is not judged
while it idles; an input-bound GPU is flagged, with the next move under the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from vastui.bench.attribution import Bottleneck
from vastui.campaign.adhoc import renter_of
from vastui.campaign.snapshot import GpuState
from vastui.tui.campaign_cells import pct, spark
from vastui.tui.campaign_state import CampaignPicture, gpu_key
from vastui.tui.cells import num
from vastui.tui.state import ConsoleState
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, KeyedTable
from vastui.vast.models import Instance

HISTORY = 24
COLUMNS: tuple[tuple[str, str], ...] = (
    ("cand", "cand"), ("inst", "instance"), ("gpu", "gpu"), ("work", "work"), ("util", "util"), ("src", "src"),
    ("util_hist", "util history"), ("mem", "mem MiB"), ("power", "power W"), ("power_hist", "power history"),
    ("wait", "data-wait"), ("limit", "limit"),
)
# dropped first to fit a narrow terminal: utilisation, data-wait and the limit stay to the last
DROP_ORDER = ("power_hist", "util_hist", "inst", "power", "work", "mem")
INPUT_BOUND = "INPUT-BOUND"
NVML = "nvml"      # the agent's samples, per GPU
API = "api"        # the marketplace's gpu_util, per instance
GREY = "dim"
LEGEND = (f"src: {NVML} = the agent's samples per GPU, {API} = the marketplace's gpu_util per instance · "
          "data-wait: share of recent step time spent waiting for input")


def clock_time(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class GpuRows:
    """What the view shows: live rows, then the greyed history, and the live counts for the title."""

    live: dict[str, tuple[Cell, ...]]
    history: dict[str, tuple[Cell, ...]]
    live_gpus: int
    live_instances: int


def destroyed_at(gpu: GpuState, picture: CampaignPicture, state: ConsoleState) -> float | None:
    """When this GPU's instance stopped being live: its campaign's destroy (or proof of gone), or the first complete
    listing without it; None while it is live."""
    if gpu.instance_id is None:
        return None
    cleanup = next((i for i in picture.snapshot.instances if i.instance_id == gpu.instance_id), None)
    if cleanup is not None and cleanup.destroy_sent_at is not None:
        return cleanup.destroy_sent_at
    if cleanup is not None and cleanup.is_proven_gone:
        return cleanup.missed_listing_at[0]
    gone = state.gone.get(gpu.instance_id)
    return None if gone is None else gone.gone_at


def limit_cell(gpu: GpuState, picture: CampaignPicture) -> Cell:
    if picture.gpu_is_idle(gpu):
        return Text("idle, not judged", style=GREY)
    attribution = picture.gpu_attribution(gpu)
    if attribution is None:
        return Text("judging…", style=GREY)
    if attribution.bottleneck is Bottleneck.INPUT_BOUND:
        return Text(f"⚠ {INPUT_BOUND}", style="bold red")
    return str(attribution.bottleneck).replace("_", "-")


def gpu_cells(gpu: GpuState, picture: CampaignPicture, *, gone_at: float | None = None) -> tuple[Cell, ...]:
    attribution = None if gone_at is not None else picture.gpu_attribution(gpu)
    input_bound = attribution is not None and attribution.bottleneck is Bottleneck.INPUT_BOUND
    mem = "-" if gpu.mem_used_mib is None else (
        f"{gpu.mem_used_mib:,.0f}" + ("" if gpu.mem_total_mib is None else f" / {gpu.mem_total_mib:,.0f}"))
    powers = [p for p in gpu.power_history if p is not None]
    top_power, low_power = max(powers, default=0.0), 0.8 * min(powers, default=0.0)
    util: Cell = "-" if gpu.util_pct is None else f"{gpu.util_pct:.0f} %"
    if input_bound:
        util = Text(str(util), style="bold red")
    limit = f"destroyed at {clock_time(gone_at)}" if gone_at is not None else limit_cell(gpu, picture)
    cells: tuple[Cell, ...] = (
        gpu.candidate, num(gpu.instance_id, "d"), str(gpu.gpu_index), gpu.purpose or "-", util, NVML,
        spark(gpu.util_history, width=HISTORY, top=100.0), mem, num(gpu.power_w, ".0f"),
        spark(gpu.power_history, width=HISTORY, top=top_power, bottom=low_power),
        pct(picture.data_wait_share.get(gpu.candidate)), limit)
    return cells if gone_at is None else tuple(Text(str(c), style=GREY) for c in cells)


def instance_cells(inst: Instance, state: ConsoleState, *, gone_at: float | None = None) -> tuple[Cell, ...]:
    """One row for an instance no campaign samples: the marketplace's utilisation of all its GPUs."""
    intent = None if state.instances is None else state.instances.intents.get(inst.id)
    work = renter_of(intent.campaign_id if intent is not None else None) or (inst.label or "-")
    util = "-" if inst.gpu_util is None else f"{inst.gpu_util:.0f} %"
    limit = f"destroyed at {clock_time(gone_at)}" if gone_at is not None else "-"
    cells: tuple[Cell, ...] = ("-", str(inst.id), f"all {inst.num_gpus or '?'}", work, util, API, "-", "-", "-", "-",
                               "-", limit)
    return cells if gone_at is None else tuple(Text(str(c), style=GREY) for c in cells)


def gpu_rows(state: ConsoleState) -> GpuRows:
    """Campaign GPUs (nvml) and every other listed instance (api), live first; destroyed and gone ones greyed."""
    live: dict[str, tuple[Cell, ...]] = {}
    history: dict[str, tuple[Cell, ...]] = {}
    live_gpus, live_instances = 0, set()
    sampled: set[int] = set()
    picture = state.campaign
    for gpu in () if picture is None else picture.snapshot.gpus:
        assert picture is not None
        if gpu.instance_id is not None:
            sampled.add(gpu.instance_id)
        gone_at = destroyed_at(gpu, picture, state)
        if gone_at is None:
            live[gpu_key(gpu)] = gpu_cells(gpu, picture)
            live_gpus += 1
            live_instances.add(gpu.instance_id)
        else:
            history[gpu_key(gpu)] = gpu_cells(gpu, picture, gone_at=gone_at)
    if state.instances is not None:
        for inst in state.instances.listing.instances:
            if inst.id not in sampled:
                live[f"api/{inst.id}"] = instance_cells(inst, state)
                live_gpus += inst.num_gpus or 1
                live_instances.add(inst.id)
    for gone in sorted(state.gone.values(), key=lambda g: g.gone_at, reverse=True):
        if gone.instance.id not in sampled:
            history[f"api/{gone.instance.id}"] = instance_cells(gone.instance, state, gone_at=gone.gone_at)
    return GpuRows(live=live, history=history, live_gpus=live_gpus, live_instances=len(live_instances))


def flags_text(picture: CampaignPicture, live: set[str]) -> str:
    """One line per input-bound candidate among the live GPUs: which GPUs, the evidence, and the next move."""
    lines = []
    flagged: dict[str, list[GpuState]] = {}
    for gpu in picture.snapshot.gpus:
        attribution = picture.gpu_attribution(gpu)
        if gpu_key(gpu) in live and attribution is not None and attribution.bottleneck is Bottleneck.INPUT_BOUND:
            flagged.setdefault(gpu.candidate, []).append(gpu)
    for candidate, gpus in flagged.items():
        attribution = picture.gpu_attribution(gpus[0])
        assert attribution is not None
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
        yield Static("GPUs: no instance listed yet", id="gpus-title", classes="view-title", markup=False)
        yield KeyedTable(columns=COLUMNS, drop_order=DROP_ORDER, id="gpus-table")
        yield Static("", id="gpus-flags", markup=False)

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#gpus-table", KeyedTable)

    def focus_main(self) -> None:
        focus_now(self.table)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        picture = state.campaign
        if picture is None and state.instances is None:
            return
        rows = gpu_rows(state)
        of_campaign = "" if picture is None else f" · campaign {picture.snapshot.campaign_id}"
        history = f" · {len(rows.history)} destroyed (greyed below)" if rows.history else ""
        self.query_one("#gpus-title", Static).update(
            f"GPUs: {rows.live_gpus} on {rows.live_instances} live instance(s){of_campaign}{history}")
        both = rows.live | rows.history
        self.table.sync(both, list(both))
        flags = "" if picture is None else flags_text(picture, set(rows.live)) + "\n"
        self.query_one("#gpus-flags", Static).update(f"{flags}{LEGEND}")
