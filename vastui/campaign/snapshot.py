"""A campaign's whole current state as frozen values: what a view that opens late (or fell behind) draws at once.

``CampaignHandle.snapshot()`` returns a ``CampaignSnapshot``; its ``seq`` is the last event it reflects, so a view
applies only events with a larger ``seq`` after it. Times are epoch seconds on the campaign's clock (agent
timestamps where a field says so); money in USD.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from vastui.campaign.broker import PendingApproval
from vastui.events import Band
from vastui.events_live import StandingRow


class CampaignStage(enum.StrEnum):
    STARTING = "starting"       # recording the plan; nothing rented yet
    RUNNING = "running"         # candidates rent, warm up and race
    TEARDOWN = "teardown"       # destroying and proving every instance gone
    FINISHED = "finished"       # receipt written (``CampaignSnapshot.finished_status`` says clean or LEAK)
    FAILED = "failed"           # the campaign raised; ``error`` says what


@dataclass(frozen=True, slots=True)
class PlannedCandidate:
    """One offer of the printed plan (or a reserve), with its prior and why it is worth measuring."""

    candidate_id: str
    offer_id: int
    machine_id: int
    gpu_name: str
    num_gpus: int
    dph_usd: float
    prior_throughput_units_per_s: float
    prior_is_measured: bool
    prior_cost_per_unit_usd: float
    hypothesis: str
    expected_spend_usd: float
    max_spend_usd: float
    time_cap_s: float
    is_reserve: bool


@dataclass(frozen=True, slots=True)
class PlanState:
    campaign_id: str
    workload: str
    query: str
    candidates: tuple[PlannedCandidate, ...]
    reserves: tuple[PlannedCandidate, ...]
    excluded_count: int
    budget_usd: float
    expected_spend_usd: float
    spend_cap_usd: float            # the worst case of the whole plan
    max_instances: int
    started_at: float | None
    deadline_at: float | None       # when the last instance must be gone, if rented at the start


@dataclass(frozen=True, slots=True)
class BlockPoint:
    """One measured block of the race (``end_at`` on the agent's clock)."""

    index: int
    end_at: float
    throughput_units_per_s: float
    data_wait_share: float
    gpu_util_pct: float | None


@dataclass(frozen=True, slots=True)
class GpuState:
    """The latest reading of one GPU of a candidate's instance, with a short history (oldest first)."""

    candidate: str
    instance_id: int | None
    gpu_index: int
    at: float                       # agent clock
    purpose: str | None             # canary, race or tuning
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    util_history: tuple[float | None, ...]
    power_history: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class CandidateState:
    """Where one candidate is: its phase and for how long, its instance, warm-up, blocks and work so far."""

    candidate_id: str
    offer_id: int
    gpu_name: str
    dph_usd: float
    phase: str                      # CandidatePhase values
    detail: str
    phase_since: float
    time_in_phase_s: float
    instance_id: int | None
    instance_status: str | None
    deadline_at: float | None
    warmup_s: float | None
    blocks: tuple[BlockPoint, ...]
    units_total: int
    accepted_total: int
    data_wait_s: float              # summed over every progress marker (canary, race and tuning)
    compute_s: float
    steps: int
    eliminated: str | None


@dataclass(frozen=True, slots=True)
class RaceState:
    leader: str | None
    rows: tuple[StandingRow, ...]
    finished: bool
    reason: str
    updated_at: float | None


@dataclass(frozen=True, slots=True)
class SpendState:
    """Accrued spend and the budget held for live rentals (worst case), against the budget and the plan's cap."""

    spent_usd: float
    reserved_usd: float
    budget_usd: float
    spend_cap_usd: float


@dataclass(frozen=True, slots=True)
class DecisionState:
    chosen: str | None
    runner_up: str | None
    margin: float | None
    break_even_units: float | None
    units: int | None
    chosen_cost_usd: Band | None
    runner_up_cost_usd: Band | None
    slo_met: bool | None
    provisional: bool
    summary: str


@dataclass(frozen=True, slots=True)
class InstanceCleanup:
    """One instance of the campaign from rent to proof: destroyed (when the destroy went out), then proven gone
    (missed by consecutive complete listings, at ``missed_listing_at``)."""

    instance_id: int
    candidate: str | None
    offer_id: int | None
    dph_usd: float | None
    rented_at: float | None
    deadline_at: float | None
    status: str | None
    destroy_sent_at: float | None
    missed_listing_at: tuple[float, ...]

    @property
    def is_proven_gone(self) -> bool:
        return bool(self.missed_listing_at)


@dataclass(frozen=True, slots=True)
class TuningTrialState:
    candidate: str
    knob: str
    baseline: str
    value: str
    state: str                      # running, accepted, rejected
    gain: Band | None
    reason: str


@dataclass(frozen=True, slots=True)
class CampaignSnapshot:
    campaign_id: str
    seq: int                        # the last event this snapshot reflects
    taken_at: float
    stage: CampaignStage
    abort_reason: str | None
    plan: PlanState
    candidates: tuple[CandidateState, ...]
    gpus: tuple[GpuState, ...]
    race: RaceState
    spend: SpendState
    pending_approvals: tuple[PendingApproval, ...]
    decision: DecisionState | None
    instances: tuple[InstanceCleanup, ...]
    tuning: tuple[TuningTrialState, ...]
    notices: tuple[str, ...]        # the latest operator notices, oldest first
    finished_status: str | None     # "clean" or "LEAK" once the campaign finished
    error: str | None
