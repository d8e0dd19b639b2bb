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


class MonotonicClock:
    """The operator's time: monotonic wall seconds (not epoch), never scaled, never moved by an NTP step.

    What a human is given to answer in (an approval's expiry) is measured on it, whatever the marketplace's clock.
    """

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ScaledClock:
    """A clock that runs ``scale`` times faster than the wall clock, starting at ``origin`` (epoch seconds).

    The simulator and its hosts share one, so a two-hour campaign can take two minutes. Code that talks to a
    separate simulator measures money on a ``MarketClock`` at the same scale, never on a clock of its own.
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

    def advance(self, seconds: float) -> None:
        """Jump forward by ``seconds`` of this clock at once (a simulated market that skips ahead)."""
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError("a clock only jumps forward, by a finite number of seconds")
        self._origin += seconds


# The simulator's own reading of its clock, with sub-second digits, on every answer: a bridge for the test rig (a
# simulator run at x120 moves two minutes within one second of ``Date``), not something the Vast.ai API sends.
SIM_CLOCK_HEADER = "X-Vastui-Sim-Clock"
# ... and how fast that clock runs (simulated seconds per real second), so a console can say its durations are
# simulated. Telling, not steering: a ``MarketClock`` keeps the scale it was built with (its waits stay as asked).
SIM_SCALE_HEADER = "X-Vastui-Sim-Scale"


class MarketClock:
    """The marketplace's clock as this process knows it: money is measured on it (docs/architecture.md).

    A local clock (monotonic, ``scale`` times the wall clock's speed: 1 against Vast.ai, the simulator's own scale
    against ``vastui sim --time-scale``) moved by an offset that the marketplace's answers show. Each answer says
    what its clock read when the answer was sent (``Date``, to the second), which happened between the request going
    out and the answer coming back: so it bounds the offset. Successive bounds are intersected; one that does not
    fit (the marketplace's clock jumped, or runs at another speed than ``scale``) replaces them. Before the first
    answer the offset is 0 and the clock reads the wall clock's time.
    """

    def __init__(self, *, scale: float = 1.0) -> None:
        self._local = ScaledClock(scale=scale)
        self.scale = scale
        self._low = -math.inf
        self._high = math.inf
        self._offset = 0.0
        self.answers_seen = 0
        self.announced_scale: float | None = None   # what the simulator's answers say its clock's scale is

    def local_now(self) -> float:
        """The local clock alone (no offset): what ``observe`` takes its send and receive moments on."""
        return self._local.now()

    def now(self) -> float:
        return self._local.now() + self._offset

    async def sleep(self, seconds: float) -> None:
        await self._local.sleep(seconds)

    def observe(self, *, market_time: float, resolution_s: float, sent_local: float, received_local: float) -> None:
        """One answer: the marketplace's clock read ``market_time`` (truncated to ``resolution_s``) when it sent the
        answer, between ``sent_local`` and ``received_local`` (from ``local_now``). Nonsense is ignored."""
        if not (math.isfinite(market_time) and math.isfinite(resolution_s) and resolution_s >= 0
                and sent_local <= received_local):
            return
        low, high = market_time - received_local, market_time + resolution_s - sent_local
        if self.answers_seen and low <= self._high and high >= self._low:
            low, high = max(low, self._low), min(high, self._high)
        self._low, self._high = low, high
        self._offset = (low + high) / 2.0
        self.answers_seen += 1


def market_scale(clock: Clock) -> float:
    """How fast the marketplace's clock runs against the real one, as far as this process knows: what a simulator
    announced, else the clock's own scale (``clock_scale``). For labelling durations, never for waiting."""
    if isinstance(clock, MarketClock) and clock.announced_scale is not None:
        return clock.announced_scale
    return clock_scale(clock)


def clock_scale(clock: Clock) -> float:
    """Clock seconds per real second: the scale of a ``ScaledClock`` or ``MarketClock``, 1 for any other clock.

    For waits that are about the real world (how long an API outage may last), never for measuring work."""
    return clock.scale if isinstance(clock, ScaledClock | MarketClock) else 1.0
