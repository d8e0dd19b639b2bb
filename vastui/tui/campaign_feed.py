"""Following a campaign: its bus subscription drives redraws, its snapshot is what is drawn.

The console holds a ``CampaignSource`` (a ``CampaignHandle``). ``follow_campaign`` reads the snapshot once on
(re)connect, then waits for events; a burst of them (GPU samples at 1 Hz per GPU, progress markers) becomes one
fresh picture at most every ``min_interval_s`` of wall time — high-rate events replace each other instead of piling
up. A subscription that fell behind (``EventsLost``) loses nothing that matters: the next picture is a fresh
snapshot. Plain asyncio, so it is tested and benchmarked without a screen.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from vastui.bench.attribution import Readings
from vastui.bench.hysteresis import VerdictTracker
from vastui.campaign.handle import CampaignResult
from vastui.campaign.snapshot import CampaignSnapshot
from vastui.clock import Clock
from vastui.events import CandidateEliminated, Event, EventBus, EventsLost, SampleTaken, Subscription
from vastui.events_live import ProgressReported
from vastui.tui.campaign_state import CampaignEnd, CampaignPicture, GpuVerdict

if TYPE_CHECKING:
    from vastui.store import Store

DATA_WAIT_WINDOW = 5          # progress markers per candidate behind the "recent data-wait" figure
REDRAW_INTERVAL_S = 0.25      # wall seconds between pictures: what an eye can follow
QUEUE_SIZE = 20_000


class ApprovalAnswers(Protocol):
    """What a view may answer (``ApprovalBroker`` has it); ``wall`` is the clock the requests' expiries are on."""

    @property
    def wall(self) -> Clock: ...

    def approve(self, request_id: str, *, by: str = ...) -> bool: ...

    def refuse(self, request_id: str, *, by: str = ..., reason: str = ...) -> bool: ...

    def approve_plan(self, *, by: str = ...) -> int: ...

    def stop_asking(self, reason: str) -> int: ...

    def keep_for_command(self, store: Store, *, campaign_id: str) -> None: ...


class CampaignSource(Protocol):
    """A running campaign as the console holds it (``vastui.campaign.handle.CampaignHandle``)."""

    @property
    def campaign_id(self) -> str: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def broker(self) -> ApprovalAnswers: ...

    @property
    def is_done(self) -> bool: ...

    def snapshot(self) -> CampaignSnapshot: ...

    def abort(self, reason: str) -> None: ...

    async def result(self, *, abort_if_cancelled: str | None = None) -> CampaignResult: ...


class Derived:
    """What the event stream says that the snapshot does not keep: recent data-wait, elimination moments, and each
    GPU's bottleneck verdict with hysteresis (``bench/hysteresis.py``: idle readings are not judged)."""

    def __init__(self, campaign_id: str) -> None:
        self.campaign_id = campaign_id
        self._windows: dict[str, deque[tuple[float, float]]] = {}
        self.eliminated_at: dict[str, float] = {}
        self._trackers: dict[str, VerdictTracker] = {}
        self.lost = 0
        self.applied = 0

    def apply(self, event: Event) -> None:
        self.applied += 1
        if isinstance(event, EventsLost):
            self.lost += event.count
        elif isinstance(event, ProgressReported) and event.campaign_id == self.campaign_id:
            window = self._windows.get(event.candidate)
            if window is None:
                window = self._windows[event.candidate] = deque(maxlen=DATA_WAIT_WINDOW)
            window.append((event.data_wait_s, event.compute_s))
        elif isinstance(event, CandidateEliminated) and event.campaign_id == self.campaign_id:
            self.eliminated_at.setdefault(event.candidate, event.at)
        elif isinstance(event, SampleTaken) and event.campaign_id == self.campaign_id:
            key = f"{event.candidate}/{event.gpu_index}"
            tracker = self._trackers.get(key)
            if tracker is None:
                tracker = self._trackers[key] = VerdictTracker()
            tracker.observe(Readings(gpu_activity_pct=event.util_pct,
                                     data_wait_share=self._share(self._windows.get(event.candidate))))

    @staticmethod
    def _share(window: deque[tuple[float, float]] | None) -> float | None:
        if not window:
            return None
        wait = sum(w for w, _ in window)
        total = wait + sum(c for _, c in window)
        return wait / total if total > 0 else None

    def data_wait_share(self) -> dict[str, float | None]:
        return {candidate: self._share(window) for candidate, window in self._windows.items()}

    def picture(self, snapshot: CampaignSnapshot) -> CampaignPicture:
        verdicts = {key: GpuVerdict(t.verdict, is_idle=t.is_idle) for key, t in self._trackers.items()}
        return CampaignPicture(snapshot=snapshot, data_wait_share=self.data_wait_share(),
                               eliminated_at=dict(self.eliminated_at), events_lost=self.lost,
                               verdicts=verdicts, verdicts_from_stream=True)


def drain(subscription: Subscription, derived: Derived) -> None:
    """Apply every event already queued."""
    while True:
        try:
            derived.apply(subscription.get_nowait())
        except asyncio.QueueEmpty:
            return


async def follow_campaign(source: CampaignSource, *, deliver: Callable[[CampaignPicture], None],
                          on_end: Callable[[CampaignEnd], None] | None = None,
                          min_interval_s: float = REDRAW_INTERVAL_S, queue_size: int = QUEUE_SIZE) -> None:
    """Deliver a picture now and after every burst of events, at most every ``min_interval_s``; when the campaign
    ends, a last picture and then ``on_end`` (in that order, so the end is never drawn over a stale picture).
    Runs until cancelled; cancelling leaves the campaign running."""
    subscription = source.bus.subscribe(queue_size=queue_size)
    derived = Derived(source.campaign_id)
    loop = asyncio.get_running_loop()
    ending = asyncio.ensure_future(await_end(source)) if on_end is not None else None
    try:
        deliver(derived.picture(source.snapshot()))
        last = loop.time()
        while True:
            getter = asyncio.ensure_future(subscription.get())
            try:
                await asyncio.wait({getter} if ending is None else {getter, ending},
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():   # a task told to cancel is not done until it runs
                derived.apply(getter.result())
            drain(subscription, derived)
            if ending is not None and ending.done() and on_end is not None:
                deliver(derived.picture(source.snapshot()))
                on_end(ending.result())
                ending, last = None, loop.time()
                continue
            wait_s = last + min_interval_s - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)   # a throttle, not a wait for a condition: gather the burst
                drain(subscription, derived)
            deliver(derived.picture(source.snapshot()))
            last = loop.time()
    finally:
        if ending is not None:
            ending.cancel()
        source.bus.unsubscribe(subscription)


async def await_end(source: CampaignSource) -> CampaignEnd:
    """Wait for the campaign's end (its receipt, or what it raised); a cancelled wait leaves it running.

    A campaign whose own task ended cancelled is an end too: raising that on would end the follower without an
    end, and a console told to quit once the campaign ended would wait for ever."""
    try:
        result = await source.result()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if (task is not None and task.cancelling()) or not source.is_done:
            raise   # this wait was cancelled, not the campaign
        return CampaignEnd(receipt=None, aborted=None, error="the campaign's task was cancelled")
    except Exception as exc:  # the campaign's own failure is shown, not raised into the console
        return CampaignEnd(receipt=None, aborted=None, error=str(exc) or type(exc).__name__)
    return CampaignEnd(receipt=result.receipt, aborted=result.aborted, error=None,
                       instances_left=result.receipt.leaked_instance_ids)
