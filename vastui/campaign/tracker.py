"""Fold a campaign's events into its current state, exactly (it listens on the bus, so it never drops one), and
freeze that state into a ``CampaignSnapshot`` on demand."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vastui.campaign.broker import PendingApproval
from vastui.campaign.plan import Candidate, Plan
from vastui.campaign.snapshot import (
    BlockPoint,
    CampaignSnapshot,
    CampaignStage,
    CandidateState,
    DecisionState,
    GpuState,
    InstanceCleanup,
    PlannedCandidate,
    PlanState,
    RaceState,
    SpendState,
    TuningTrialState,
)
from vastui.events import (
    BlockMeasured,
    CampaignFinished,
    CampaignStarted,
    CandidateEliminated,
    CandidatePhaseChanged,
    DecisionMade,
    Event,
    InstanceConfirmedGone,
    InstanceDestroyed,
    InstanceRented,
    InstanceStatusChanged,
    Notice,
    SampleTaken,
)
from vastui.events_live import (
    AbortRequested,
    CampaignPhaseChanged,
    ProgressReported,
    StandingsUpdated,
    TuningTrialJudged,
    TuningTrialStarted,
    WarmupEnded,
)

GPU_HISTORY = 60      # readings kept per GPU for a sparkline
NOTICES_KEPT = 20


def planned(candidate: Candidate, *, is_reserve: bool) -> PlannedCandidate:
    o = candidate.offer
    return PlannedCandidate(
        candidate_id=candidate.candidate_id, offer_id=o.id, machine_id=o.machine_id, gpu_name=o.gpu_name,
        num_gpus=candidate.gpu_count, dph_usd=o.dph_total,
        prior_throughput_units_per_s=candidate.prior_throughput_units_per_s,
        prior_is_measured=candidate.prior_is_measured, prior_cost_per_unit_usd=candidate.prior_cost_per_unit_usd,
        hypothesis=candidate.hypothesis, expected_spend_usd=candidate.expected_spend_usd,
        max_spend_usd=candidate.max_spend_usd, time_cap_s=candidate.time_cap_s, is_reserve=is_reserve)


@dataclass(slots=True)
class _Candidate:
    cid: str
    offer_id: int
    gpu_name: str
    dph_usd: float
    since: float
    phase: str = "waiting"
    detail: str = ""
    instance_id: int | None = None
    instance_status: str | None = None
    deadline_at: float | None = None
    warmup_s: float | None = None
    blocks: list[BlockPoint] = field(default_factory=list)
    units_total: int = 0
    accepted_total: int = 0
    data_wait_s: float = 0.0
    compute_s: float = 0.0
    steps: int = 0
    eliminated: str | None = None

    def freeze(self, now: float) -> CandidateState:
        return CandidateState(
            candidate_id=self.cid, offer_id=self.offer_id, gpu_name=self.gpu_name, dph_usd=self.dph_usd,
            phase=self.phase, detail=self.detail, phase_since=self.since, time_in_phase_s=max(0.0, now - self.since),
            instance_id=self.instance_id, instance_status=self.instance_status, deadline_at=self.deadline_at,
            warmup_s=self.warmup_s, blocks=tuple(self.blocks), units_total=self.units_total,
            accepted_total=self.accepted_total, data_wait_s=self.data_wait_s, compute_s=self.compute_s,
            steps=self.steps, eliminated=self.eliminated)


@dataclass(slots=True)
class _Gpu:
    latest: SampleTaken
    util: deque[float | None] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    power: deque[float | None] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))

    def freeze(self) -> GpuState:
        s = self.latest
        return GpuState(candidate=s.candidate, instance_id=s.instance_id, gpu_index=s.gpu_index, at=s.at,
                        purpose=s.purpose, util_pct=s.util_pct, mem_used_mib=s.mem_used_mib,
                        mem_total_mib=s.mem_total_mib, power_w=s.power_w, util_history=tuple(self.util),
                        power_history=tuple(self.power))


@dataclass(slots=True)
class _Instance:
    instance_id: int
    candidate: str | None = None
    offer_id: int | None = None
    dph_usd: float | None = None
    rented_at: float | None = None
    deadline_at: float | None = None
    status: str | None = None
    destroy_sent_at: float | None = None
    missed_listing_at: tuple[float, ...] = ()

    def freeze(self) -> InstanceCleanup:
        return InstanceCleanup(self.instance_id, self.candidate, self.offer_id, self.dph_usd, self.rented_at,
                               self.deadline_at, self.status, self.destroy_sent_at, self.missed_listing_at)


class CampaignTracker:
    """The campaign's state, kept by applying each of its events in order (``apply`` is a bus listener)."""

    def __init__(self, *, plan: Plan, workload: str, created_at: float) -> None:
        self._plan = plan
        self._workload = workload
        self.seq = 0
        self.stage = CampaignStage.STARTING
        self.abort_reason: str | None = None
        self.error: str | None = None
        self.started_at: float | None = None
        self._candidates = {c.candidate_id: _Candidate(c.candidate_id, c.offer.id, c.offer.gpu_name,
                                                       c.offer.dph_total, since=created_at)
                            for c in plan.candidates}
        self._gpus: dict[tuple[str, int], _Gpu] = {}
        self._instances: dict[int, _Instance] = {}
        self._tuning: list[TuningTrialState] = []
        self._notices: deque[str] = deque(maxlen=NOTICES_KEPT)
        self._race = RaceState(leader=None, rows=(), finished=False, reason="not started", updated_at=None)
        self._spend = (0.0, 0.0)
        self._decision: DecisionState | None = None
        self.finished_status: str | None = None
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            CampaignStarted: self._started, CampaignPhaseChanged: self._stage, AbortRequested: self._abort,
            CandidatePhaseChanged: self._phase, InstanceRented: self._rented, InstanceStatusChanged: self._status,
            BlockMeasured: self._block, ProgressReported: self._progress, WarmupEnded: self._warm,
            SampleTaken: self._sample, CandidateEliminated: self._eliminated, StandingsUpdated: self._standings,
            DecisionMade: self._decided, InstanceDestroyed: self._destroyed, InstanceConfirmedGone: self._gone,
            TuningTrialStarted: self._trial_started, TuningTrialJudged: self._trial_judged, Notice: self._notice,
            CampaignFinished: self._finished,
        }

    def apply(self, event: Event) -> None:
        campaign_id = getattr(event, "campaign_id", None)
        if campaign_id is not None and campaign_id != self._plan.campaign_id:
            return
        self.seq = max(self.seq, event.seq)
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    # --- handlers ----------------------------------------------------------------------------------------------
    def _started(self, e: CampaignStarted) -> None:
        self.started_at = e.at

    def _stage(self, e: CampaignPhaseChanged) -> None:
        if e.phase in {str(stage) for stage in CampaignStage}:
            self.stage = CampaignStage(e.phase)

    def _abort(self, e: AbortRequested) -> None:
        self.abort_reason = e.reason

    def _phase(self, e: CandidatePhaseChanged) -> None:
        if (c := self._candidates.get(e.candidate)) is not None:
            c.phase, c.detail, c.since = e.phase, e.detail, e.at

    def _rented(self, e: InstanceRented) -> None:
        if (c := self._candidates.get(e.candidate)) is not None:
            c.offer_id, c.dph_usd, c.instance_id, c.deadline_at = e.offer_id, e.dph_total, e.instance_id, e.deadline_at
            gpu = next((r.offer.gpu_name for r in self._plan.reserves if r.offer.id == e.offer_id), None)
            c.gpu_name = gpu or c.gpu_name
        instance = self._instance(e.instance_id)
        instance.candidate, instance.offer_id, instance.dph_usd = e.candidate, e.offer_id, e.dph_total
        instance.rented_at, instance.deadline_at = e.at, e.deadline_at

    def _status(self, e: InstanceStatusChanged) -> None:
        instance = self._instance(e.instance_id)
        instance.status = e.status
        if instance.candidate is not None and (c := self._candidates.get(instance.candidate)) is not None:
            c.instance_status = e.status

    def _block(self, e: BlockMeasured) -> None:
        if (c := self._candidates.get(e.candidate)) is not None:
            c.blocks.append(BlockPoint(e.block_index, e.at, e.throughput_units_per_s, e.data_wait_share,
                                       e.gpu_util_pct))

    def _progress(self, e: ProgressReported) -> None:
        if (c := self._candidates.get(e.candidate)) is not None:
            c.units_total, c.accepted_total = e.units_total, e.accepted_total
            c.data_wait_s += e.data_wait_s
            c.compute_s += e.compute_s
            c.steps += e.steps

    def _warm(self, e: WarmupEnded) -> None:
        if (c := self._candidates.get(e.candidate)) is not None:
            c.warmup_s = e.warmup_s

    def _sample(self, e: SampleTaken) -> None:
        gpu = self._gpus.setdefault((e.candidate, e.gpu_index), _Gpu(e))
        gpu.latest = e
        gpu.util.append(e.util_pct)
        gpu.power.append(e.power_w)

    def _eliminated(self, e: CandidateEliminated) -> None:
        if (c := self._candidates.get(e.candidate)) is not None:
            c.eliminated = e.reason

    def _standings(self, e: StandingsUpdated) -> None:
        self._race = RaceState(leader=e.leader, rows=e.rows, finished=e.finished, reason=e.reason, updated_at=e.at)
        self._spend = (e.spent_usd, e.reserved_usd)

    def _decided(self, e: DecisionMade) -> None:
        self._decision = DecisionState(
            chosen=e.chosen, runner_up=e.runner_up, margin=e.margin, break_even_units=e.break_even_units,
            units=e.units, chosen_cost_usd=e.chosen_cost_usd, runner_up_cost_usd=e.runner_up_cost_usd,
            slo_met=e.slo_met, provisional=e.provisional, summary=e.summary)

    def _destroyed(self, e: InstanceDestroyed) -> None:
        instance = self._instance(e.instance_id)
        if instance.destroy_sent_at is None:
            instance.destroy_sent_at = e.at

    def _gone(self, e: InstanceConfirmedGone) -> None:
        self._instance(e.instance_id).missed_listing_at = e.missed_listing_at or (e.at,)

    def _trial_started(self, e: TuningTrialStarted) -> None:
        self._tuning.append(TuningTrialState(e.candidate, e.knob, e.baseline, e.value, "running", None, ""))

    def _trial_judged(self, e: TuningTrialJudged) -> None:
        judged = TuningTrialState(e.candidate, e.knob, e.baseline, e.value,
                                  "accepted" if e.accepted else "rejected", e.gain, e.reason)
        for index, trial in enumerate(self._tuning):
            if trial.state == "running" and (trial.candidate, trial.knob, trial.value) == (e.candidate, e.knob,
                                                                                          e.value):
                self._tuning[index] = judged
                return
        self._tuning.append(judged)

    def _notice(self, e: Notice) -> None:
        self._notices.append(f"{e.level}: {e.text}")

    def _finished(self, e: CampaignFinished) -> None:
        self.stage = CampaignStage.FINISHED
        self.finished_status = e.status
        self._spend = (e.spend_usd, self._spend[1])

    def _instance(self, instance_id: int) -> _Instance:
        return self._instances.setdefault(instance_id, _Instance(instance_id))

    # --- the snapshot ------------------------------------------------------------------------------------------
    def instances(self) -> tuple[InstanceCleanup, ...]:
        """Every instance of the campaign, from rent to proof, by id."""
        return tuple(i.freeze() for _, i in sorted(self._instances.items()))

    def plan_state(self) -> PlanState:
        p = self._plan
        caps = [c.time_cap_s for c in p.candidates]
        return PlanState(
            campaign_id=p.campaign_id, workload=self._workload, query=p.query,
            candidates=tuple(planned(c, is_reserve=False) for c in p.candidates),
            reserves=tuple(planned(c, is_reserve=True) for c in p.reserves), excluded_count=len(p.excluded),
            budget_usd=p.budget_usd, expected_spend_usd=p.expected_spend_usd,
            spend_cap_usd=p.spend_upper_bound_usd, max_instances=p.max_instances, started_at=self.started_at,
            deadline_at=self.started_at + max(caps) if self.started_at is not None and caps else None)

    def snapshot(self, *, now: float, pending: tuple[PendingApproval, ...],
                 spend: tuple[float, float] | None = None) -> CampaignSnapshot:
        """Freeze the state; ``spend`` (spent, reserved) is the engine's live figure when it has one."""
        spent, reserved = spend if spend is not None else self._spend
        return CampaignSnapshot(
            campaign_id=self._plan.campaign_id, seq=self.seq, taken_at=now, stage=self.stage,
            abort_reason=self.abort_reason, plan=self.plan_state(),
            candidates=tuple(c.freeze(now) for c in self._candidates.values()),
            gpus=tuple(g.freeze() for _, g in sorted(self._gpus.items(), key=lambda kv: kv[0])),
            race=self._race,
            spend=SpendState(spent_usd=spent, reserved_usd=reserved, budget_usd=self._plan.budget_usd,
                             spend_cap_usd=self._plan.spend_upper_bound_usd),
            pending_approvals=pending, decision=self._decision,
            instances=self.instances(),
            tuning=tuple(self._tuning), notices=tuple(self._notices), finished_status=self.finished_status,
            error=self.error)
