"""Waiting for a condition in a test, never for a fixed time: one home for the polling helper."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

# Wall-clock bound on a condition: generous for a loaded machine, reached only when something is broken.
WAIT_S = 150.0


async def until(condition: Callable[[], object], what: str, *, within_s: float = WAIT_S, poll_s: float = 0.01,
                between: Callable[[], object] | None = None) -> None:
    """Poll ``condition()`` (a plain or an async callable) until it is true; fail naming ``what`` once ``within_s``
    seconds of wall time pass. ``between`` runs between two looks (e.g. moves a manual clock as the wall would)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        holds = condition()
        if inspect.isawaitable(holds):
            holds = await holds
        if holds:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        if between is not None:
            between()
        await asyncio.sleep(poll_s)
