"""Campaign and watch events (frozen, past tense) and a small fan-out bus.

The TUI and the headless CLI are two views over the same stream. Rooms add their event types here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every event; ``at`` is epoch seconds on the clock of whoever emitted it."""

    at: float


class EventBus:
    """Fan-out of events to any number of subscribers, each with its own bounded queue.

    A slow subscriber loses its oldest events rather than blocking the campaign.
    """

    def __init__(self, *, queue_size: int = 10_000) -> None:
        self._queues: list[asyncio.Queue[Event]] = []
        self._queue_size = queue_size

    def subscribe(self) -> asyncio.Queue[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=self._queue_size)
        self._queues.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        if queue in self._queues:
            self._queues.remove(queue)

    def publish(self, event: Event) -> None:
        for queue in self._queues:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)


# --- campaign events ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CampaignStarted(Event):
    campaign_id: str
    workload: str
    manifest_digest: str


@dataclass(frozen=True, slots=True)
class PlanMade(Event):
    campaign_id: str
    candidate_offer_ids: tuple[int, ...]
    expected_spend_usd: float
    spend_upper_bound_usd: float


@dataclass(frozen=True, slots=True)
class ApprovalGiven(Event):
    campaign_id: str | None
    action: str
    target: str
    granted_by: str


@dataclass(frozen=True, slots=True)
class ApprovalRefused(Event):
    campaign_id: str | None
    action: str
    target: str


@dataclass(frozen=True, slots=True)
class InstanceRented(Event):
    campaign_id: str
    candidate: str
    offer_id: int
    instance_id: int
    dph_total: float


@dataclass(frozen=True, slots=True)
class InstanceStatusChanged(Event):
    campaign_id: str
    instance_id: int
    status: str


@dataclass(frozen=True, slots=True)
class CandidatePhaseChanged(Event):
    campaign_id: str
    candidate: str
    phase: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SampleTaken(Event):
    """One GPU reading from the agent (utilisation %, memory MiB)."""

    campaign_id: str
    candidate: str
    gpu_index: int
    util_pct: float | None
    mem_used_mib: float | None


@dataclass(frozen=True, slots=True)
class BlockMeasured(Event):
    campaign_id: str
    candidate: str
    block_index: int
    throughput_units_per_s: float
    data_wait_share: float
    gpu_util_pct: float | None


@dataclass(frozen=True, slots=True)
class CandidateEliminated(Event):
    campaign_id: str
    candidate: str
    reason: str


@dataclass(frozen=True, slots=True)
class InstanceDestroyed(Event):
    campaign_id: str | None
    instance_id: int


@dataclass(frozen=True, slots=True)
class InstanceConfirmedGone(Event):
    campaign_id: str | None
    instance_id: int
    listings_missed: int


@dataclass(frozen=True, slots=True)
class DecisionMade(Event):
    campaign_id: str
    chosen: str | None
    runner_up: str | None
    summary: str
    provisional: bool


@dataclass(frozen=True, slots=True)
class CampaignFinished(Event):
    campaign_id: str
    status: str
    spend_usd: float


@dataclass(frozen=True, slots=True)
class LeakFound(Event):
    """An instance billing without a reason (``campaign/watch.py``). Re-published on every check with the cost so
    far, so a view keys it by ``instance_id`` and replaces the previous one. Costs are None when the marketplace did
    not say the price or the start date."""

    instance_id: int
    reason: str
    accrued_usd: float | None
    burn_usd_per_h: float | None
    label: str | None = None
    campaign_id: str | None = None
    status: str | None = None


@dataclass(frozen=True, slots=True)
class LeaksChecked(Event):
    """One leak check ended. ``is_complete`` False means the listing failed part-way: the state is *unknown*, and
    ``leaked_ids`` are only those seen. Leaks no longer in ``leaked_ids`` or ``unowned_ids`` are gone."""

    is_complete: bool
    leaked_ids: tuple[int, ...]
    unowned_ids: tuple[int, ...]
    burn_usd_per_h: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Notice(Event):
    """A line of text for the operator (warnings, degraded data)."""

    campaign_id: str | None
    level: str
    text: str
