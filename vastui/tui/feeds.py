"""The polling loop behind every source: fetch, hand over, wait an interval (longer when the API pushes back).

One loop per source runs as an exclusive Textual worker; the loop itself is plain asyncio so it can be tested
without a screen. A failure never ends the loop: it is reported and retried after a growing pause, so the console
recovers by itself when the API comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from vastui.clock import Clock
from vastui.errors import QuotaExceeded, RateLimited, VastuiError

T = TypeVar("T")
MAX_BACKOFF_FACTOR = 4.0
MAX_PUSHBACK_S = 3600.0


class Wake:
    """Lets a view ask for a refresh now (after a filter change or an action) instead of at the next tick."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, clock: Clock, seconds: float | None) -> None:
        """Until woken, or ``seconds`` on ``clock`` pass (None: only when woken)."""
        waiter = asyncio.ensure_future(self._event.wait())
        sleeper = None if seconds is None else asyncio.ensure_future(clock.sleep(seconds))
        try:
            await asyncio.wait([t for t in (waiter, sleeper) if t is not None], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiter, sleeper):
                if task is not None and not task.done():
                    task.cancel()
        self._event.clear()


def pause_after_failure(exc: VastuiError, *, interval_s: float, failures_in_row: int) -> float:
    """How long to wait after a failed fetch: the server's Retry-After or quota reset if it gave one, else the
    interval doubled per failure in a row (capped), so a struggling API is not hammered."""
    if isinstance(exc, QuotaExceeded | RateLimited) and exc.retry_after_s:
        return min(max(interval_s, exc.retry_after_s), MAX_PUSHBACK_S)
    return interval_s * min(MAX_BACKOFF_FACTOR, 2.0 ** max(0, failures_in_row - 1))


async def poll(*, fetch: Callable[[], Awaitable[T]], deliver: Callable[[T], None],
               fail: Callable[[VastuiError], None], clock: Clock, interval_s: float, wake: Wake,
               live: bool = True) -> None:
    """Fetch forever (or once per wake when not ``live``); never raises a VastuiError."""
    failures = 0
    while True:
        try:
            result = await fetch()
        except VastuiError as exc:  # the worker boundary: report it, keep polling
            failures += 1
            fail(exc)
            pause = pause_after_failure(exc, interval_s=interval_s, failures_in_row=failures)
        else:
            failures = 0
            deliver(result)
            pause = interval_s
        await wake.wait(clock, pause if live else None)
