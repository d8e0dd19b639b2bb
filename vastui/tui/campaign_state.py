"""The console's picture of one campaign: the handle's snapshot plus the little a live view derives from the event
stream itself (recent data-wait per candidate, when each candidate was eliminated), and how it ended.

Frozen; replaced whole by the campaign follower (``campaign_feed``) a few times a second at most.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vastui.bench.attribution import Attribution, Readings, attribute
from vastui.bench.hysteresis import IDLE_GPU_ACTIVITY_PCT
from vastui.bench.receipt import Receipt
from vastui.campaign.snapshot import CampaignSnapshot, CampaignStage, CandidateState, GpuState


def gpu_key(gpu: GpuState) -> str:
    return f"{gpu.candidate}/{gpu.gpu_index}"


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    """A GPU's standing bottleneck verdict (None: not judged yet) and whether its latest reading was idle."""

    attribution: Attribution | None
    is_idle: bool


@dataclass(frozen=True, slots=True)
class CampaignPicture:
    snapshot: CampaignSnapshot
    data_wait_share: dict[str, float | None] = field(default_factory=dict)   # candidate -> share of recent step time
    eliminated_at: dict[str, float] = field(default_factory=dict)             # candidate -> campaign clock
    events_lost: int = 0                                                      # dropped by the subscription so far
    verdicts: dict[str, GpuVerdict] = field(default_factory=dict)            # gpu_key -> verdict with hysteresis
    verdicts_from_stream: bool = False   # False: a picture drawn without the event stream (judged on one reading)

    @property
    def is_running(self) -> bool:
        return self.snapshot.stage not in (CampaignStage.FINISHED, CampaignStage.FAILED)

    def candidate(self, candidate_id: str) -> CandidateState | None:
        return next((c for c in self.snapshot.candidates if c.candidate_id == candidate_id), None)

    def gpu_is_idle(self, gpu: GpuState) -> bool:
        return gpu.util_pct is not None and gpu.util_pct < IDLE_GPU_ACTIVITY_PCT

    def gpu_attribution(self, gpu: GpuState) -> Attribution | None:
        """What limits this GPU: its standing verdict (hysteresis over the stream's readings); None while it idles
        or before a verdict held long enough. A picture without the stream judges the one reading it has."""
        if self.gpu_is_idle(gpu):
            return None
        if self.verdicts_from_stream:
            verdict = self.verdicts.get(gpu_key(gpu))
            return None if verdict is None else verdict.attribution
        return attribute(Readings(gpu_activity_pct=gpu.util_pct,
                                  data_wait_share=self.data_wait_share.get(gpu.candidate)))


@dataclass(frozen=True, slots=True)
class CampaignEnd:
    """How the followed campaign ended: its receipt, or the error it raised; ``aborted`` is the abort's reason."""

    receipt: Receipt | None
    aborted: str | None
    error: str | None
    instances_left: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PastCampaign:
    """A campaign from the store, with its latest receipt (Markdown) when it has one."""

    campaign_id: str
    created_at: float
    phase: str
    workload_digest: str
    receipt_markdown: str | None
    owner: str | None = None      # the operator and host that started it (a team's store shows whose)


@dataclass(frozen=True, slots=True)
class ReceiptPage:
    """Campaigns from the store, newest first."""

    campaigns: tuple[PastCampaign, ...]
    at: float
