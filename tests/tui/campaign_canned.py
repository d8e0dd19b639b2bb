"""Canned campaign states for the control room's snapshot tests and for the event benchmark: a race in progress
with two pending approvals and one input-bound GPU, and the same campaign finished with its receipt. Every time is
fixed (``NOW``), every id is written out: the pictures are the same on every run."""

from __future__ import annotations

from vastui.approval import Action
from vastui.bench.receipt import (
    CandidateReport,
    DestroyedInstance,
    Outcome,
    Receipt,
    StartupSplit,
    WorkloadIdentity,
    render_markdown,
)
from vastui.bench.select import Decision
from vastui.bench.stats import Interval, LatencySummary
from vastui.campaign.broker import PendingApproval
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
)
from vastui.events import Band
from vastui.events_live import StandingRow
from vastui.tui.campaign_state import CampaignEnd, CampaignPicture, PastCampaign, ReceiptPage

NOW = 1_800_000_600.0
START = 1_800_000_000.0
CID = "c0ffee42"
PLAN = (("c1", 9001, "RTX_4090", 2, 0.62, "fastest per dollar by dlperf; 2 GPUs cover multi-GPU scaling"),
        ("c2", 9002, "A100_SXM4", 1, 1.10, "datacentre card; checks whether memory bandwidth pays"),
        ("c3", 9003, "RTX_3090", 1, 0.28, "cheapest host that passes the filters"))


def planned() -> tuple[PlannedCandidate, ...]:
    return tuple(PlannedCandidate(candidate_id=cid, offer_id=offer, machine_id=offer - 8000, gpu_name=gpu,
                                  num_gpus=n, dph_usd=dph, prior_throughput_units_per_s=900.0 * n / (1 + i),
                                  prior_is_measured=False, prior_cost_per_unit_usd=0.0004 * (1 + i),
                                  hypothesis=why, expected_spend_usd=0.8 + i, max_spend_usd=1.5 + i,
                                  time_cap_s=1800.0, is_reserve=False)
                 for i, (cid, offer, gpu, n, dph, why) in enumerate(PLAN))


def blocks(base: float, wait: float, util: float, count: int) -> tuple[BlockPoint, ...]:
    return tuple(BlockPoint(index=i, end_at=START + 120.0 + 30.0 * i, throughput_units_per_s=base + (i % 3) * 9.0,
                            data_wait_share=wait, gpu_util_pct=util) for i in range(count))


def gpu(cand: str, inst: int, index: int, util: float, power: float) -> GpuState:
    history = tuple(max(0.0, min(100.0, util + ((k * 7) % 11) - 5)) for k in range(30))
    powers = tuple(power + ((k * 5) % 9) for k in range(30))
    return GpuState(candidate=cand, instance_id=inst, gpu_index=index, at=NOW - 1, purpose="race", util_pct=util,
                    mem_used_mib=18_000.0 + 500 * index, mem_total_mib=24_564.0, power_w=power,
                    util_history=history, power_history=powers)


def pending() -> tuple[PendingApproval, ...]:
    return tuple(PendingApproval(request_id=f"r{n}", action=Action.CREATE_INSTANCE, target=f"offer:{offer}",
                                 summary=f"rent offer {offer} ({gpu} x{count}) for candidate {cid}, at most "
                                         f"${cap:.2f} over 30 min", campaign_id=CID, offer_id=offer,
                                 instance_id=None, gpu_name=gpu, num_gpus=count, dph_usd=dph, cost_cap_usd=cap,
                                 deadline_at=NOW + 1800.0, requested_at=NOW - 20.0, asked_wall_s=NOW - 20.0,
                                 expires_wall_s=NOW + 880.0)
                 for n, (cid, offer, gpu, count, dph, cap) in enumerate(
                     (("c3", 9003, "RTX_3090", 1, 0.28, 0.31), ("r1", 9004, "RTX_4080", 1, 0.35, 0.39)), start=4))


def racing_snapshot(*, with_pending: bool = True) -> CampaignSnapshot:
    c1 = CandidateState(candidate_id="c1", offer_id=9001, gpu_name="RTX_4090", dph_usd=0.62, phase="measuring",
                        detail="", phase_since=NOW - 300, time_in_phase_s=300.0, instance_id=501,
                        instance_status="running", deadline_at=START + 1800, warmup_s=42.0,
                        blocks=blocks(1480.0, 0.02, 96.0, 9), units_total=480_000, accepted_total=479_500,
                        data_wait_s=9.0, compute_s=290.0, steps=3750, eliminated=None)
    c2 = CandidateState(candidate_id="c2", offer_id=9002, gpu_name="A100_SXM4", dph_usd=1.10, phase="eliminated",
                        detail="dominated", phase_since=START + 300, time_in_phase_s=NOW - START - 300, instance_id=502,
                        instance_status="exited", deadline_at=START + 1800, warmup_s=55.0,
                        blocks=blocks(610.0, 0.41, 38.0, 6), units_total=150_000, accepted_total=150_000,
                        data_wait_s=98.0, compute_s=140.0, steps=1170,
                        eliminated="dominated: its lower bound is above c1's upper bound")
    c3 = CandidateState(candidate_id="c3", offer_id=9003, gpu_name="RTX_3090", dph_usd=0.28, phase="renting",
                        detail="waiting for approval", phase_since=NOW - 20, time_in_phase_s=20.0, instance_id=None,
                        instance_status=None, deadline_at=None, warmup_s=None, blocks=(), units_total=0,
                        accepted_total=0, data_wait_s=0.0, compute_s=0.0, steps=0, eliminated=None)
    rows = (StandingRow("c1", 9, 1489.0, Band(0.00031, 0.00029, 0.00034), "met", True, None),
            StandingRow("c2", 6, 619.0, Band(0.00121, 0.00110, 0.00133), "undecided", True, "dominated: c1 is cheaper"),
            StandingRow("c3", 0, None, None, "undecided", False, None))
    plan = PlanState(campaign_id=CID, workload="resnet50-train", query="num_gpus>=1 reliability>0.98",
                     candidates=planned(), reserves=(), excluded_count=12, budget_usd=5.0, expected_spend_usd=3.9,
                     spend_cap_usd=4.8, max_instances=3, started_at=START, deadline_at=START + 1800)
    instances = (InstanceCleanup(501, "c1", 9001, 0.62, START + 30, START + 1800, "running", None, ()),
                 InstanceCleanup(502, "c2", 9002, 1.10, START + 35, START + 1800, "exited", START + 310, ()))
    return CampaignSnapshot(
        campaign_id=CID, seq=812, taken_at=NOW, stage=CampaignStage.RUNNING, abort_reason=None, plan=plan,
        candidates=(c1, c2, c3), gpus=(gpu("c1", 501, 0, 97.0, 410.0), gpu("c1", 501, 1, 95.0, 398.0),
                                       gpu("c2", 502, 0, 36.0, 140.0)),
        race=RaceState(leader="c1", rows=rows, finished=False, reason="racing: 2 measured, 1 waiting",
                       updated_at=NOW - 5),
        spend=SpendState(spent_usd=0.31, reserved_usd=2.9, budget_usd=5.0, spend_cap_usd=4.8),
        pending_approvals=pending() if with_pending else (), decision=None, instances=instances, tuning=(),
        notices=(), finished_status=None, error=None)


def racing_picture() -> CampaignPicture:
    return CampaignPicture(snapshot=racing_snapshot(), data_wait_share={"c1": 0.03, "c2": 0.41},
                           eliminated_at={"c2": START + 300})


def receipt() -> Receipt:
    decision = Decision(chosen="c1", runner_up="c2", units=1_000_000,
                        chosen_cost=Interval(0.00031, 0.00029, 0.00034, 0.95, 9),
                        runner_up_cost=Interval(0.00121, 0.00110, 0.00133, 0.95, 6), margin=2.91,
                        break_even_units=None, slo_met=True, provisional=False,
                        reason="c1 has the lowest upper bound of cost per accepted unit among SLO-certified "
                               "finalists")
    reports = (CandidateReport("c1", "RTX_4090", 2, 0.62, PLAN[0][5], Outcome.CHOSEN, offer_id=9001,
                               instance_id=501, machine_id=1001, blocks=9, steps=3750,
                               throughput=Interval(1489.0, 1470.0, 1502.0, 0.95, 9),
                               latency=LatencySummary(9, 41.0, 55.0, 61.0, 80.0, 95.0), gpu_util_pct=96.0,
                               data_wait_share=0.02, startup=StartupSplit(95.0, 40.0, 42.0, 6.0, 8.0),
                               cost_per_unit=Interval(0.00031, 0.00029, 0.00034, 0.95, 9)),
               CandidateReport("c2", "A100_SXM4", 1, 1.10, PLAN[1][5], Outcome.RUNNER_UP, offer_id=9002,
                               instance_id=502, machine_id=1002, blocks=6, steps=1170,
                               throughput=Interval(619.0, 600.0, 633.0, 0.95, 6),
                               latency=LatencySummary(6, 88.0, 120.0, 131.0, 150.0, 170.0), gpu_util_pct=38.0,
                               data_wait_share=0.41, startup=StartupSplit(120.0, 45.0, 55.0, 7.0, 9.0),
                               cost_per_unit=Interval(0.00121, 0.00110, 0.00133, 0.95, 6)))
    gone = tuple(DestroyedInstance(i, START + 900, (START + 910, START + 925), "missed by 2 successive complete "
                                   "listings") for i in (501, 502))
    return Receipt(campaign_id=CID, created_at=START + 930, workload=WorkloadIdentity(
        "resnet50-train", "sha256:5f0c", "pytorch/pytorch:2.4", ("python", "train.py"), ()), units=1_000_000,
        warmup_policy=">= max(30 s, 20 steps), then CV of last 10 <= 5 % (cap 180 s)", candidates=reports,
        decision=decision, approvals=(), destroyed=gone, leaked_instance_ids=(), campaign_cost_usd=1.37)


def finished_pictures() -> tuple[CampaignPicture, CampaignEnd, ReceiptPage]:
    r = receipt()
    snap = racing_snapshot(with_pending=False)
    from dataclasses import replace

    decision = DecisionState(chosen="c1", runner_up="c2", margin=2.91, break_even_units=None, units=1_000_000,
                             chosen_cost_usd=Band(0.00031, 0.00029, 0.00034),
                             runner_up_cost_usd=Band(0.00121, 0.00110, 0.00133), slo_met=True, provisional=False,
                             summary=r.decision.reason)
    instances = tuple(InstanceCleanup(i, c, o, d, START + 30, START + 1800, None, START + 900,
                                      (START + 910, START + 925))
                      for i, c, o, d in ((501, "c1", 9001, 0.62), (502, "c2", 9002, 1.10)))
    snap = replace(snap, stage=CampaignStage.FINISHED, finished_status="clean", decision=decision,
                   instances=instances)
    page = ReceiptPage(campaigns=(PastCampaign(CID, START, "finished", "sha256:5f0c", render_markdown(r),
                                               owner="ana@ws-3"),
                                  PastCampaign("c0ld0001", START - 86_400, "finished", "sha256:5f0c", None)),
                       at=NOW)
    return CampaignPicture(snapshot=snap), CampaignEnd(receipt=r, aborted=None, error=None), page
