"""SIGTERM and SIGHUP stop a command the way Ctrl-C does.

``asyncio.run`` turns SIGINT into a cancellation of the main task, which a campaign answers by aborting, tearing
down and writing its receipt. Without this, SIGTERM (``kill``, a service manager) or SIGHUP (a closed terminal)
ended the process on the spot with instances billing. Every command that runs an event loop goes through
``run_async``; ``vastui.cli.main`` reports ``Stopped`` and exits 128 + the signal's number.
"""

from __future__ import annotations

import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Stopped(Exception):
    """SIGTERM or SIGHUP arrived: the command was cancelled (and a campaign torn down) like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


async def stopping_on_signals(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``; SIGTERM and SIGHUP cancel it as SIGINT does, so what cleans up after Ctrl-C (a campaign's
    abort, teardown and receipt) runs for them too, instead of the process dying with instances billing."""
    import asyncio  # here: `vastui --help` and the market commands load no event loop (tests/test_cli_startup.py)

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    got: list[int] = []

    def stop(signum: int) -> None:
        got.append(signum)
        if task is not None:
            task.cancel()

    installed = []
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(signum, stop, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no such signal here
            pass
    try:
        result = await work
        if got:   # the work took the cancellation and ended on its own terms (a Textual app quits cleanly)
            raise Stopped(got[0])
        return result
    except asyncio.CancelledError:
        if got:
            raise Stopped(got[0]) from None
        raise
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)



def run_async(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` with SIGTERM and SIGHUP handled like SIGINT (see the module's docstring)."""
    import asyncio

    return asyncio.run(stopping_on_signals(work))
