"""Build the events a live view needs from the engine's own objects (agent records, the race, the decision), so
the engine only has to publish them."""

from __future__ import annotations

from vastui.bench.select import Decision, Race, RaceStep
from vastui.bench.stats import Interval, WarmupResult
from vastui.campaign.measure import Record, steps_in
from vastui.events import Band, DecisionMade, Event, SampleTaken
from vastui.events_live import ProgressReported, StandingRow, StandingsUpdated, WarmupEnded, WorkPurpose
from vastui.remote.protocol import GpuSample, Progress

# A candidate's phase (CandidatePhase values) -> the work its records belong to.
_PURPOSE_OF_PHASE = {"canary": WorkPurpose.CANARY, "measuring": WorkPurpose.RACE, "tuning": WorkPurpose.TUNING}


def band(interval: Interval | None) -> Band | None:
    return None if interval is None else Band(point=interval.point, low=interval.low, high=interval.high)


def record_event(record: Record, *, campaign_id: str, candidate: str, instance_id: int | None,
                 phase: str) -> Event | None:
    """The event for one agent record: a GPU sample or a progress marker, tagged with the work it belongs to."""
    purpose = _PURPOSE_OF_PHASE.get(phase)
    if isinstance(record, GpuSample):
        return SampleTaken(at=record.t, campaign_id=campaign_id, candidate=candidate, gpu_index=record.index,
                           util_pct=record.util_pct, mem_used_mib=record.mem_used_mib,
                           mem_total_mib=record.mem_total_mib, power_w=record.power_w, instance_id=instance_id,
                           purpose=None if purpose is None else str(purpose))
    if isinstance(record, Progress):
        return ProgressReported(at=record.t, campaign_id=campaign_id, candidate=candidate, instance_id=instance_id,
                                purpose=str(purpose or WorkPurpose.RACE), units=record.units,
                                accepted=record.accepted, data_wait_s=record.data_wait_s,
                                compute_s=record.compute_s, steps=steps_in(record), units_total=record.units_total,
                                accepted_total=record.accepted_total)
    return None


def warmup_event(warmup: WarmupResult, *, at: float, campaign_id: str, candidate: str) -> WarmupEnded:
    return WarmupEnded(at=at, campaign_id=campaign_id, candidate=candidate, warmup_s=warmup.warmup_s,
                       steps=warmup.steps, is_steady=warmup.is_steady, cv=warmup.cv)


def standings_event(race: Race, step: RaceStep, *, at: float, campaign_id: str, spent_usd: float,
                    reserved_usd: float, budget_usd: float) -> StandingsUpdated:
    """The race after a block: leader, each candidate's cost interval, spend so far."""
    rows = tuple(StandingRow(candidate=s.candidate_id, blocks=s.blocks,
                             throughput_units_per_s=None if s.throughput is None else s.throughput.point,
                             cost_per_unit_usd=band(s.cost_per_unit), slo=str(s.slo), is_measured=s.is_measured,
                             eliminated=None if s.elimination is None else
                             f"{s.elimination.reason}: {s.elimination.detail}")
                 for s in race.standings())
    return StandingsUpdated(at=at, campaign_id=campaign_id, leader=step.leader, rows=rows, spent_usd=spent_usd,
                            reserved_usd=reserved_usd, budget_usd=budget_usd, finished=step.finished,
                            reason=step.reason)


def decision_event(decision: Decision, *, at: float, campaign_id: str) -> DecisionMade:
    return DecisionMade(at=at, campaign_id=campaign_id, chosen=decision.chosen, runner_up=decision.runner_up,
                        summary=decision.reason, provisional=decision.provisional, units=decision.units,
                        margin=decision.margin, break_even_units=decision.break_even_units,
                        chosen_cost_usd=band(decision.chosen_cost), runner_up_cost_usd=band(decision.runner_up_cost),
                        slo_met=decision.slo_met)
