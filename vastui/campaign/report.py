"""Build the campaign's receipt from what the engine measured, the audit log and the teardown evidence."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

from vastui.approval import Action, AuditKind, AuditRecord, offer_target
from vastui.bench.attribution import Attribution, Readings, attribute, startup_share
from vastui.bench.cost import CostInputs, cost_interval
from vastui.bench.manifest import Manifest
from vastui.bench.receipt import (
    ApprovalRecord,
    CandidateReport,
    DestroyedInstance,
    Outcome,
    PassedOver,
    Receipt,
    StartupSplit,
    WorkloadIdentity,
)
from vastui.bench.runs import run_aware_interval
from vastui.bench.select import Decision
from vastui.bench.stats import Interval, summarize_latency
from vastui.campaign.candidate import CandidatePhase, CandidateRun, NotRented
from vastui.campaign.charges import measured_cost_inputs
from vastui.campaign.cleanup import TeardownReport


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def attribution_of(run: CandidateRun, *, units: int) -> Attribution | None:
    if not run.blocks:
        return None
    theta = statistics.median(b.throughput_units_per_s for b in run.blocks)
    mem = [b.mem_used_mib / b.mem_total_mib for b in run.blocks if b.mem_used_mib and b.mem_total_mib]
    share = None
    if run.startup_s is not None and theta > 0:
        share = startup_share(startup_s=run.startup_s, warmup_s=run.warmup_s or 0.0, units=units,
                              throughput_units_per_s=theta)
    return attribute(Readings(
        gpu_activity_pct=_median([b.gpu_util_pct for b in run.blocks]),
        data_wait_share=_median([b.data_wait_share for b in run.blocks]),
        pcie_rx_gbps=_median([b.pcie_rx_gbps for b in run.blocks]),
        pcie_link_gbps=run.candidate.offer.pcie_bw,
        memory_used_share=statistics.median(mem) if mem else None,
        startup_share=share, num_gpus=run.candidate.gpu_count,
        throttled_share=_median([b.throttled_share for b in run.blocks])))


def _cost_inputs(run: CandidateRun, manifest: Manifest) -> CostInputs:
    inputs = measured_cost_inputs(run, manifest)
    if run.loading_s is None or not run.passed_gate:
        return replace(inputs, loading_s=float("inf"), passed_gate=bool(run.passed_gate))
    return inputs


def _outcome(run: CandidateRun, decision: Decision) -> Outcome:
    if run.cid == decision.chosen:
        return Outcome.CHOSEN
    if run.cid == decision.runner_up:
        return Outcome.RUNNER_UP
    if run.not_rented is NotRented.PASSED_OVER:
        return Outcome.PASSED_OVER
    if run.phase in (CandidatePhase.FAILED, CandidatePhase.SKIPPED) or not run.blocks:
        return Outcome.FAILED
    if run.phase is CandidatePhase.ELIMINATED:
        return Outcome.ELIMINATED
    return Outcome.FINALIST


def candidate_report(run: CandidateRun, *, manifest: Manifest, decision: Decision,
                     billed_usd: float | None = None) -> CandidateReport:
    c = run.candidate
    parts = run.startup_parts()
    blocks = [b.block for b in run.blocks]
    # the race's kind of interval: blocks within runs plus the between-run error (bench/runs.py)
    throughput: Interval | None = (run_aware_interval(blocks, cv_prior=manifest.measure.run_cv_prior, seed=run.cid)
                                   if len(blocks) >= 2 else None)
    cost = (cost_interval(_cost_inputs(run, manifest), units=manifest.production_units, throughput=throughput)
            if throughput is not None else None)
    return CandidateReport(
        candidate_id=run.cid, gpu_name=c.offer.gpu_name, num_gpus=c.gpu_count, price_per_hour_usd=c.offer.dph_total,
        hypothesis=c.hypothesis, outcome=_outcome(run, decision), outcome_detail=run.failure or run.detail,
        offer_id=c.offer.id, instance_id=run.instance_id, machine_id=c.offer.machine_id, host_id=c.offer.host_id,
        driver_version=run.driver_version, cuda_version=str(c.offer.cuda_max_good) if c.offer.cuda_max_good else None,
        blocks=len(run.blocks), steps=sum(b.block.steps for b in run.blocks), is_measured=bool(run.blocks),
        throughput=throughput, latency=summarize_latency(run.latencies_ms) if run.latencies_ms else None,
        gpu_util_pct=_median([b.gpu_util_pct for b in run.blocks]),
        data_wait_share=_median([b.data_wait_share for b in run.blocks]),
        startup=StartupSplit(pull_s=parts.pull_s, readiness_s=parts.readiness_s, warmup_s=run.warmup_s,
                             workload_init_s=parts.workload_init_s, console_overhead_s=parts.console_overhead_s),
        cost_per_unit=cost, attribution=attribution_of(run, units=manifest.production_units),
        runs=run.measured_runs, billed_usd=billed_usd,
        profile=run.race_profile.describe() if run.race_profile is not None and run.blocks else "",
        earlier_blocks=run.earlier_blocks)


def approvals_from(audit: Sequence[AuditRecord],
                   caps: Mapping[str, float] | None = None) -> tuple[ApprovalRecord, ...]:
    """The approvals granted, with the cost cap each rent was approved under (``caps``: by approval target)."""
    caps = caps or {}
    return tuple(ApprovalRecord(action=str(r.action), target=r.target, summary=r.outcome,
                                granted_by=r.granted_by or "", granted_at=r.at,
                                cost_cap_usd=caps.get(r.target) if r.action is Action.CREATE_INSTANCE else None)
                 for r in audit if r.kind is AuditKind.APPROVAL)


def rent_caps(runs: Sequence[CandidateRun]) -> dict[str, float]:
    """The cost cap each candidate's rent was asked with (its ``max_spend_usd``), by the rent's approval target.
    A reserve that stood in for a candidate asked with its own; the audit keeps the earlier ones as well."""
    return {offer_target(r.candidate.offer.id): r.candidate.max_spend_usd for r in runs}


def build_receipt(*, campaign_id: str, created_at: float, manifest: Manifest, runs: Sequence[CandidateRun],
                  decision: Decision, audit: Sequence[AuditRecord], teardown: TeardownReport,
                  destroyed_at: dict[int, float], spend_usd: float, notes: Sequence[str] = (),
                  billed_usd: Mapping[str, float] | None = None, passed_over: Sequence[PassedOver] = ()) -> Receipt:
    """The receipt; ``spend_usd`` is what the marketplace billed, ``billed_usd`` the same per candidate."""
    billed = billed_usd or {}
    destroyed = tuple(DestroyedInstance(instance_id=g.instance_id, destroyed_at=destroyed_at.get(g.instance_id),
                                        absent_in_listings_at=g.missed_listing_at,
                                        evidence=f"missed by {len(g.missed_listing_at)} successive complete listings")
                      for g in teardown.gone)
    w = manifest.warmup
    return Receipt(
        campaign_id=campaign_id, created_at=created_at, workload=WorkloadIdentity.from_manifest(manifest),
        units=manifest.production_units,
        warmup_policy=f">= max({w.min_s:g} s, {w.min_steps} steps), then CV of last {w.window} <= "
                      f"{100 * w.cv_max:g} % (cap {w.cap_s:g} s)",
        candidates=tuple(candidate_report(r, manifest=manifest, decision=decision, billed_usd=billed.get(r.cid))
                         for r in runs),
        decision=decision, approvals=approvals_from(audit, rent_caps(runs)), destroyed=destroyed,
        leaked_instance_ids=tuple(sorted({*teardown.still_alive, *teardown.refused})),
        campaign_cost_usd=spend_usd, notes=tuple(notes), miss_probability=manifest.race.miss_probability,
        passed_over=tuple(passed_over))
