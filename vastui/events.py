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
