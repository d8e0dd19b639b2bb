"""Waiting for a condition in a test, never for a fixed time: one home for the polling helper."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

# Wall-clock bound on a condition: generous for a loaded machine, reached only when something is broken.
WAIT_S = 150.0


async def until(condition: Callable[[], object], what: str, *, within_s: float = WAIT_S,
                poll_s: float = 0.01) -> None:
    """Poll ``condition()`` until it is true; fail naming ``what`` once ``within_s`` seconds of wall time pass."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(poll_s)
