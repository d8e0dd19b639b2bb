"""Campaign: the plan and each candidate's phase, the approval queue, the race, the spend against the budget, the
decision, and the cleanup evidence (each instance destroyed, then proven gone).

``a`` approves the request under the cursor, ``x`` refuses it, ``A`` approves the printed plan as a whole (after a
confirmation); the keys show only while something is pending. The queue is the approval: each row says what would be
rented and its cost cap, and the answer goes to the campaign's broker, which audits it. Waiting and expiry are the
operator's wall time (``ApprovalDesk``). ``q``/``ctrl+c`` while the campaign runs asks: abort, or detach.
Timers and spend held for live rentals are shown only while the campaign runs.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from vastui.campaign.broker import PendingApproval
from vastui.campaign.candidate import CandidatePhase
from vastui.campaign.snapshot import CampaignSnapshot, CampaignStage, CandidateState, DecisionState, InstanceCleanup
from vastui.events_live import StandingRow
from vastui.tui.campaign_cells import cost_per_1k, per_1k, since_start, span, throughput_cell
from vastui.tui.campaign_state import CampaignEnd, CampaignPicture
from vastui.tui.cells import num, usd
from vastui.tui.state import ConsoleState
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, Forms, KeyedTable

APPROVAL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"), ("action", "action"), ("target", "target"), ("gpu", "gpu"), ("dph", "$/h"), ("cap", "cost cap"),
    ("deadline", "destroy by"), ("expires", "expires in"), ("summary", "what"),
)
CANDIDATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cand", "cand"), ("gpu", "gpu @offer"), ("dph", "$/h"), ("prior", "prior"), ("hypothesis", "hypothesis"),
    ("phase", "phase, for"), ("inst", "instance"), ("blocks", "blk"), ("tput", "u/s"),
    ("cost", "$/1k accepted"), ("slo", "SLO"), ("note", "note"),
)
CLEANUP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("inst", "instance"), ("cand", "cand"), ("offer", "offer"), ("dph", "$/h"), ("rented", "rented"),
    ("deadline", "deadline"), ("status", "last status"), ("destroyed", "destroyed"), ("gone", "proven gone"),
)
# dropped first to fit a narrow terminal (what is asked, its cap and its expiry stay; the phase and cost stay)
APPROVAL_DROP = ("summary", "action", "deadline", "target")
CANDIDATE_DROP = ("hypothesis", "note", "inst", "blocks", "prior", "slo", "gpu")
CLEANUP_DROP = ("offer", "dph", "rented", "deadline", "status")


def headline(picture: CampaignPicture, end: CampaignEnd | None, *, now: float) -> str:
    s = picture.snapshot
    plan, spend = s.plan, s.spend
    running = picture.is_running and end is None
    deadline = ("" if plan.deadline_at is None or not running
                else f" · last destroy due in {span(plan.deadline_at - now)}")
    held = f"held for live rentals {usd(spend.reserved_usd, 2)} · " if running else ""
    stage = str(s.stage) + (f" ({s.finished_status})" if s.finished_status else "")
    abort = f" · ABORTING: {s.abort_reason}" if s.abort_reason and s.stage != CampaignStage.FINISHED else (
        f" · aborted: {s.abort_reason}" if s.abort_reason else "")
    lost = f" · {picture.events_lost} events lost (redrawn from the snapshot)" if picture.events_lost else ""
    error = f" · FAILED: {s.error or (end.error if end else '')}" if s.error or (end and end.error) else ""
    # two lines on purpose: one that wraps at 160 columns reads as a broken layout
    return (f"Campaign {s.campaign_id} · {plan.workload} · {stage}{abort}{error} · spent {usd(spend.spent_usd, 2)} "
            f"of {usd(spend.budget_usd, 2)} budget{deadline}{lost}\n"
            f"  {held}plan worst case {usd(plan.spend_cap_usd, 2)}, expected {usd(plan.expected_spend_usd, 2)}")


def decision_text(decision: DecisionState | None, snapshot: CampaignSnapshot) -> str:
    if decision is None:
        race = snapshot.race
        leader = f"leader {race.leader}" if race.leader else "no leader yet"
        return f"Decision: not yet — race: {leader}; {race.reason}"
    provisional = " PROVISIONAL (rests on provider dlperf)" if decision.provisional else ""
    margin = "-" if decision.margin is None else f"{100 * decision.margin:.1f} %"
    break_even = ("none: the choice wins at every N" if decision.break_even_units is None
                  else f"{decision.break_even_units:,.0f} units")
    slo = {True: "SLO met", False: "SLO NOT certified", None: "SLO unknown"}[decision.slo_met]
    units = "-" if decision.units is None else f"{decision.units:,}"
    return (f"Decision: {decision.chosen or 'none'}{provisional} at {per_1k(decision.chosen_cost_usd)} per 1k "
            f"accepted (N={units}) · runner-up {decision.runner_up or 'none'} at "
            f"{per_1k(decision.runner_up_cost_usd)} · margin {margin} · break-even N {break_even} · {slo}\n"
            f"  {decision.summary}")


def approval_cells(p: PendingApproval, *, now: float, wall_now: float) -> tuple[Cell, ...]:
    """``now`` on the campaign's clock (the destroy deadline), ``wall_now`` on the broker's (the expiry)."""
    gpu = f"{p.gpu_name} ×{p.num_gpus}" if p.gpu_name else "-"
    expires: Cell = (Text("EXPIRED", style="bold red") if p.is_expired(wall_now)
                     else span(p.expires_in_s(wall_now)))
    return (p.request_id, str(p.action), p.target, gpu, usd(p.dph_usd), usd(p.cost_cap_usd, 2),
            "-" if p.deadline_at is None else f"in {span(p.deadline_at - now)}", expires, p.summary)


def phase_cell(c: CandidateState, *, running: bool, now: float, awaiting: PendingApproval | None,
               wall_now: float) -> Cell:
    """The phase and for how long: a candidate whose rent waits for an answer says so (wall time, ticking); while
    the campaign runs the time ticks from ``phase_since``; once it ended, the last snapshot's time stands."""
    if awaiting is not None and running:
        return Text(f"awaiting approval {span(awaiting.waited_s(wall_now))}", style="bold yellow")
    seconds = max(0.0, now - c.phase_since) if running else c.time_in_phase_s
    text = f"{c.phase} {span(seconds)}"
    return text if c.phase not in (CandidatePhase.FAILED, CandidatePhase.ELIMINATED) else Text(text, style="bold red")


def candidate_cells(c: CandidateState, s: CampaignSnapshot, row: StandingRow | None,
                    phase: Cell | None = None) -> tuple[Cell, ...]:
    planned = next((p for p in (*s.plan.candidates, *s.plan.reserves) if p.candidate_id == c.candidate_id), None)
    prior = "-" if planned is None else f"{planned.prior_throughput_units_per_s:,.0f}" + (
        "" if planned.prior_is_measured else "*")
    gpus = f"{c.gpu_name}×{planned.num_gpus}" if planned else c.gpu_name
    note = c.eliminated or (row.eliminated if row else None) or c.detail
    lead = "★ " if s.race.leader == c.candidate_id else ""
    if phase is None:
        phase_text = f"{c.phase} {span(c.time_in_phase_s)}"
        phase = phase_text if c.phase not in (CandidatePhase.FAILED, CandidatePhase.ELIMINATED) else Text(phase_text, style="bold red")
    return (lead + c.candidate_id, f"{gpus} @{c.offer_id}", usd(c.dph_usd), prior,
            planned.hypothesis if planned else "", phase, num(c.instance_id, "d"), str(len(c.blocks)),
            "-" if row is None else throughput_cell(row.throughput_units_per_s, is_measured=row.is_measured),
            "-" if row is None else cost_per_1k(row.cost_per_unit_usd, is_measured=row.is_measured),
            row.slo if row else "-", note or "-")


def cleanup_cells(i: InstanceCleanup, start: float | None) -> tuple[Cell, ...]:
    if i.is_proven_gone:
        listings = ", ".join(since_start(t, start) for t in i.missed_listing_at)
        proven = f"✔ proven gone ({len(i.missed_listing_at)} listings: {listings})"
        gone: Cell = Forms(Text(proven, style="bold green"), (Text("✔ proven gone", style="bold green"),))
    elif i.destroy_sent_at is not None:
        gone = Forms(Text("destroyed, not yet proven gone", style="yellow"),
                     (Text("destroyed, unproven", style="yellow"),))
    else:
        gone = "alive" if i.rented_at is not None else "-"
    return (str(i.instance_id), i.candidate or "-", num(i.offer_id, "d"), usd(i.dph_usd),
            since_start(i.rented_at, start), since_start(i.deadline_at, start), i.status or "-",
            since_start(i.destroy_sent_at, start), gone)


class CampaignView(ConsoleView):
    view_name = "campaign"
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("cost cap", "the most the request can spend once approved (its $/h until its deadline)"),
        ("expires in", "how long the request waits for an answer before it counts as refused"),
        ("prior", "the throughput guessed before measuring (* : from the provider's dlperf, not measured)"),
        ("phase, for", "the candidate's phase and how long it has been in it"),
        ("u/s", "measured throughput, units per second (median of its blocks)"),
        ("$/1k accepted", "cost per 1,000 accepted units: point [interval]"),
        ("proven gone", "destroyed, then missed by two complete instance listings"),
    )
    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset({"approve", "refuse", "approve_plan"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "approve", "Approve"),
        Binding("x", "refuse", "Refuse"),
        Binding("A", "approve_plan", "Plan", key_display="A", tooltip="approve the printed plan"),
    ]

    TICK_S = 1.0   # the timers on screen (waiting, expiry, time in phase) move once a second

    def compose(self) -> ComposeResult:
        yield Static("Campaign: none followed (start one with `vastui demo` or `vastui campaign run`)",
                     id="campaign-title", classes="campaign-line", markup=False)
        yield Static("Approvals: none pending", id="campaign-queue-title", classes="view-title", markup=False)
        yield KeyedTable(columns=APPROVAL_COLUMNS, drop_order=APPROVAL_DROP, squeeze="summary", id="campaign-approvals")
        yield KeyedTable(columns=CANDIDATE_COLUMNS, drop_order=CANDIDATE_DROP, squeeze="note", id="campaign-candidates")
        yield Static("", id="campaign-decision", markup=False)
        yield KeyedTable(columns=CLEANUP_COLUMNS, drop_order=CLEANUP_DROP, squeeze="gone", id="campaign-cleanup")

    @property
    def approvals(self) -> KeyedTable:
        return self.query_one("#campaign-approvals", KeyedTable)

    @property
    def candidates(self) -> KeyedTable:
        return self.query_one("#campaign-candidates", KeyedTable)

    @property
    def cleanup(self) -> KeyedTable:
        return self.query_one("#campaign-cleanup", KeyedTable)

    def focus_main(self) -> None:
        focus_now(self.approvals)

    def on_mount(self) -> None:
        self.set_interval(self.TICK_S, self._tick)

    def _tick(self) -> None:
        console = self.console
        if console.current_view == self.view_name and console.control.is_running:
            console.render_current()

    def pending(self, picture: CampaignPicture | None) -> list[PendingApproval]:
        """The requests listed as pending, less those answered at the console (the desk's list)."""
        if picture is None:
            return []
        return self.console.desk.listed(dataclasses.replace(self.console.state, campaign=picture))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.MUTATING_ACTIONS and not (self.console.control.is_running and self.console.desk.listed()):
            return False   # nothing to answer: the footer does not offer the keys (and after the end, never)
        return super().check_action(action, parameters)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        picture = state.campaign
        if picture is None:
            return
        s = picture.snapshot
        desk = self.console.desk
        wall_now = desk.wall_now()
        running = picture.is_running and state.campaign_end is None
        self.query_one("#campaign-title", Static).update(headline(picture, state.campaign_end, now=now))
        pending = desk.listed(state)
        self.query_one("#campaign-queue-title", Static).update(
            f"Approvals: {len(pending)} pending — a approve · x refuse · A approve the whole plan"
            if pending else "Approvals: none pending")
        self.approvals.sync({p.request_id: approval_cells(p, now=now, wall_now=wall_now) for p in pending},
                            [p.request_id for p in pending])
        awaiting = {p.offer_id: p for p in pending if p.offer_id is not None and p.is_spending}
        rows = {r.candidate: r for r in s.race.rows}
        self.candidates.sync(
            {c.candidate_id: candidate_cells(c, s, rows.get(c.candidate_id),
                                             phase_cell(c, running=running, now=now, wall_now=wall_now,
                                                        awaiting=awaiting.get(c.offer_id)))
             for c in s.candidates},
            [c.candidate_id for c in s.candidates])
        self.query_one("#campaign-decision", Static).update(decision_text(s.decision, s))
        start = s.plan.started_at
        self.cleanup.sync({str(i.instance_id): cleanup_cells(i, start) for i in s.instances},
                          [str(i.instance_id) for i in s.instances])

    def _cursor_request(self) -> str | None:
        key = self.approvals.cursor_key
        if key is None:
            self.notify("no approval is pending", severity="warning")
        return key

    def action_approve(self) -> None:
        request_id = self._cursor_request()
        if request_id is not None:
            self.console.desk.approve(request_id)

    def action_refuse(self) -> None:
        request_id = self._cursor_request()
        if request_id is not None:
            self.console.desk.refuse(request_id)

    def action_approve_plan(self) -> None:
        self.console.control.ask_approve_plan()
