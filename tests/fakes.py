"""Fakes for the parts that cannot be real here. Every fake is named Fake*."""

from __future__ import annotations

import asyncio


class FakeClock:
    """A clock that only moves when someone sleeps on it (or ``advance`` is called); records every sleep."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now += max(0.0, seconds)
        await asyncio.sleep(0)
