"""The events a live campaign view needs beyond ``vastui.events``: approvals as they are asked and answered,
every progress marker, warm-up, race standings after each block, tuning trials and the campaign's own stages.

Frozen, past tense, published on the same ``EventBus`` (so they are numbered with the others).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from vastui.events import Band, Event


class WorkPurpose(enum.StrEnum):
    """Which work a progress marker or GPU sample belongs to."""

    CANARY = "canary"
    RACE = "race"
    TUNING = "tuning"


@dataclass(frozen=True, slots=True)
class CampaignPhaseChanged(Event):
    """The campaign entered a stage (``vastui.campaign.snapshot.CampaignStage`` values: running, teardown,
    finished, aborting, ...); ``detail`` says why when it is not the usual course."""

    campaign_id: str
    phase: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class AbortRequested(Event):
    """Someone asked the campaign to stop: work stops, pending approvals are cancelled, teardown proves all gone."""

    campaign_id: str
    reason: str


# --- approvals -------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ApprovalRequested(Event):
    """A request entered the approval broker. Its facts are fields: a view shows them and answers by
    ``request_id`` (``ApprovalBroker.approve`` / ``refuse``). Unanswered for ``expires_in_s`` wall seconds (the
    operator's time, whatever the campaign's clock), it counts as refused."""

    request_id: str
    campaign_id: str | None
    action: str
    target: str
    summary: str
    expires_in_s: float
    offer_id: int | None = None
    instance_id: int | None = None
    gpu_name: str | None = None
    num_gpus: int | None = None
    dph_usd: float | None = None
    cost_cap_usd: float | None = None
    deadline_at: float | None = None


@dataclass(frozen=True, slots=True)
class ApprovalAnswered(Event):
    """A request was granted or refused, and by whom (a rule, the approved plan, an operator's key or prompt)."""

    request_id: str
    campaign_id: str | None
    action: str
    target: str
    granted: bool
    answered_by: str
    approval_id: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalExpired(Event):
    """Nobody answered in time (wall time): the request counts as refused (and is audited so)."""

    request_id: str
    campaign_id: str | None
    action: str
    target: str


@dataclass(frozen=True, slots=True)
class ApprovalCancelled(Event):
    """The request was withdrawn before an answer (the campaign is aborting, or its asker stopped)."""

    request_id: str
    campaign_id: str | None
    action: str
    target: str
    reason: str


# --- measurement -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ProgressReported(Event):
    """One progress marker of the workload (``at`` on the agent's clock): the work since the previous marker."""

    campaign_id: str
    candidate: str
    instance_id: int | None
    purpose: str
    units: int
    accepted: int
    data_wait_s: float
    compute_s: float
    steps: int
    units_total: int
    accepted_total: int


@dataclass(frozen=True, slots=True)
class WarmupEnded(Event):
    """The candidate's step times settled (``is_steady``) or the warm-up cap was reached; blocks start now."""

    campaign_id: str
    candidate: str
    warmup_s: float
    steps: int
    is_steady: bool
    cv: float | None


@dataclass(frozen=True, slots=True)
class StandingRow:
    """One candidate in the race: measured blocks, throughput, cost per accepted unit with its interval (USD),
    SLO verdict; ``eliminated`` says why it is out (None while in)."""

    candidate: str
    blocks: int
    throughput_units_per_s: float | None
    cost_per_unit_usd: Band | None
    slo: str
    is_measured: bool
    eliminated: str | None


@dataclass(frozen=True, slots=True)
class StandingsUpdated(Event):
    """The race after a block: its leader, every candidate's standing, spend so far (accrued, USD) and the
    worst case reserved for rentals alive, against the budget."""

    campaign_id: str
    leader: str | None
    rows: tuple[StandingRow, ...]
    spent_usd: float
    reserved_usd: float
    budget_usd: float
    finished: bool
    reason: str


# --- tuning ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TuningTrialStarted(Event):
    campaign_id: str
    candidate: str
    knob: str
    baseline: str
    value: str


@dataclass(frozen=True, slots=True)
class TuningTrialJudged(Event):
    """An A/B trial's verdict: kept only when its gain's interval excludes zero and exceeds the minimum."""

    campaign_id: str
    candidate: str
    knob: str
    baseline: str
    value: str
    accepted: bool
    gain: Band | None
    pairs: int
    reason: str


@dataclass(frozen=True, slots=True)
class TuningFinished(Event):
    campaign_id: str
    candidate: str
    profile: str
    trials: int
    stopped_early: str | None
