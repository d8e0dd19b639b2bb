"""Time, injected: a Clock says what time it is and how to wait, so tests and the simulator can bend it."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Protocol


class Clock(Protocol):
    """Epoch seconds and a way to wait; everything that measures or waits takes one."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class WallClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ScaledClock:
    """A clock that runs ``scale`` times faster than the wall clock, starting at ``origin`` (epoch seconds).

    The simulator and its hosts share one, so a two-hour campaign can take two minutes. Code that talks to a
    separate simulator must take durations from the simulator's records, never from its own wall clock.
    """

    def __init__(self, *, scale: float = 1.0, origin: float | None = None) -> None:
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError("scale must be a positive finite number")
        self.scale = scale
        self._origin = time.time() if origin is None else origin
        self._start = time.monotonic()

    def now(self) -> float:
        return self._origin + (time.monotonic() - self._start) * self.scale

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.scale)


def clock_scale(clock: Clock) -> float:
    """Clock seconds per real second: the scale of a ``ScaledClock``, 1 for any other clock.

    For waits that are about the real world (how long an API outage may last), never for measuring work."""
    return clock.scale if isinstance(clock, ScaledClock) else 1.0
