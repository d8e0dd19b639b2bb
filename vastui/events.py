"""Campaign and watch events (frozen, past tense) and the fan-out bus that numbers them.

The TUI and the headless CLI are two views over the same stream. The bus gives every event a sequence number
(``seq``, from 1, no gaps); a subscriber whose queue overflowed first receives an ``EventsLost`` marker saying how
many it missed, and can re-read the campaign's snapshot (``CampaignHandle.snapshot()``; its ``seq`` says which
events it already holds). The events a live view needs beyond these are in ``vastui.events_live``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every event; ``at`` is epoch seconds on the clock of whoever emitted it. ``seq`` is given by the
    bus when it publishes (0 on an event never published, and on a subscription's ``EventsLost`` marker)."""

    at: float
    seq: int = field(default=0, kw_only=True)


@dataclass(frozen=True, slots=True)
class EventsLost(Event):
    """Made by a subscription, not the bus: ``count`` events (``first_seq``..``last_seq``) were dropped because
    this subscriber fell behind. Re-read the snapshot to catch up."""

    count: int
    first_seq: int
    last_seq: int


class Subscription:
    """One subscriber's bounded queue. When it is full the oldest event is dropped and counted; the next ``get``
    returns an ``EventsLost`` marker before the events that are left (which follow it without a gap)."""

    def __init__(self, *, queue_size: int) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self._items: deque[Event] = deque()
        self._queue_size = queue_size
        self._ready = asyncio.Event()
        self._lost_count = 0
        self._lost_first_seq = 0
        self._lost_last: Event | None = None
        self.lost_total = 0   # every event this subscription ever dropped

    def put(self, event: Event) -> None:
        """Called by the bus: queue ``event``, dropping (and counting) the oldest when full."""
        if len(self._items) >= self._queue_size:
            dropped = self._items.popleft()
            if self._lost_count == 0:
                self._lost_first_seq = dropped.seq
            self._lost_count += 1
            self._lost_last = dropped
            self.lost_total += 1
        self._items.append(event)
        self._ready.set()

    def get_nowait(self) -> Event:
        """The next event (or loss marker); raises ``asyncio.QueueEmpty`` when there is none."""
        if self._lost_count and self._lost_last is not None:
            marker = EventsLost(at=self._lost_last.at, count=self._lost_count, first_seq=self._lost_first_seq,
                                last_seq=self._lost_last.seq)
            self._lost_count, self._lost_last = 0, None
            return marker
        if not self._items:
            self._ready.clear()
            raise asyncio.QueueEmpty
        return self._items.popleft()

    async def get(self) -> Event:
        """Wait for the next event (or loss marker)."""
        while True:
            try:
                return self.get_nowait()
            except asyncio.QueueEmpty:
                await self._ready.wait()

    def empty(self) -> bool:
        return not self._items and not self._lost_count


class EventBus:
    """Numbers each event and fans it out: to listeners (called at once, in order, never dropped — for state that
    must stay exact, such as a campaign's snapshot) and to subscriptions (bounded queues for views).

    A slow subscriber loses its oldest events rather than blocking the campaign, and is told how many.
    """

    def __init__(self, *, queue_size: int = 10_000) -> None:
        self._subscriptions: list[Subscription] = []
        self._listeners: list[Callable[[Event], None]] = []
        self._queue_size = queue_size
        self._seq = 0

    @property
    def last_seq(self) -> int:
        """The sequence number of the last event published (0 before the first)."""
        return self._seq

    def subscribe(self, *, queue_size: int | None = None) -> Subscription:
        subscription = Subscription(queue_size=queue_size or self._queue_size)
        self._subscriptions.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    def listen(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``listener`` synchronously with every event from now on; returns the function that stops it.
        A listener must be quick and must not publish; an exception in it is logged, never passed on."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)
        return stop

    def publish(self, event: Event) -> Event:
        """Number ``event`` and deliver it; returns the numbered event."""
        self._seq += 1
        numbered = replace(event, seq=self._seq)
        for listener in tuple(self._listeners):
            try:
                listener(numbered)
            except Exception:  # a view's bug must not stop the campaign that publishes
                log.exception("event listener failed on %s", type(numbered).__name__)
        for subscription in self._subscriptions:
            subscription.put(numbered)
        return numbered


@dataclass(frozen=True, slots=True)
class Band:
    """An estimate with its interval (e.g. cost per accepted unit, USD): ``low <= point <= high``."""

    point: float
    low: float
    high: float


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
class InstanceRented(Event):
    campaign_id: str
    candidate: str
    offer_id: int
    instance_id: int
    dph_total: float
    deadline_at: float | None = None    # campaign clock: destroyed by then, as approved


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
    # a candidate done measuring while the knobs are screened: "helping" (playing the screening's pairs) or
    # "waiting" (held for its verdict) — ``campaign.candidate.ScreeningPart``; None otherwise
    screening: str | None = None


@dataclass(frozen=True, slots=True)
class SampleTaken(Event):
    """One GPU reading from the agent (``at`` on the agent's clock). ``purpose`` says which work it belongs to:
    ``canary``, ``race`` or ``tuning`` (``events_live.WorkPurpose``); None outside a candidate's work."""

    campaign_id: str
    candidate: str
    gpu_index: int
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None = None
    power_w: float | None = None
    instance_id: int | None = None
    purpose: str | None = None


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
    missed_listing_at: tuple[float, ...] = ()   # when each complete listing that missed it was taken


@dataclass(frozen=True, slots=True)
class DecisionMade(Event):
    campaign_id: str
    chosen: str | None
    runner_up: str | None
    summary: str
    provisional: bool
    units: int | None = None                    # the production N the costs are for
    margin: float | None = None                 # runner-up's upper bound over the chosen's, minus one
    break_even_units: float | None = None       # N where the two swap places; None: the chosen wins at every N
    chosen_cost_usd: Band | None = None         # cost per accepted unit
    runner_up_cost_usd: Band | None = None
    slo_met: bool | None = None


@dataclass(frozen=True, slots=True)
class CampaignFinished(Event):
    campaign_id: str
    status: str
    spend_usd: float


@dataclass(frozen=True, slots=True)
class Notice(Event):
    """A line of text for the operator (warnings, degraded data)."""

    campaign_id: str | None
    level: str
    text: str
