"""Signals stop a command the way Ctrl-C does, once; what follows cannot interrupt a teardown.

The first SIGINT, SIGTERM or SIGHUP cancels the command's main task; a running campaign answers by aborting,
destroying its instances, proving them gone and writing its receipt. That teardown is a critical section: the
operator's second Ctrl-C, a service manager's repeated SIGTERM or the SIGHUP of a terminal closing behind the first
signal never cancel it again (before, each signal cancelled the main task anew, and the second one cut the teardown
short with every instance still billing). A later signal is noted and answered with what is left to do; only
SIGINT given again within ``FORCE_WINDOW_S`` of that answer force-quits, and then the last lines say exactly which
instances were left alive and how to remove them.

Every command that runs an event loop goes through ``stopping_on_signals``; ``vastui.cli.main`` reports ``Stopped``
with the campaign's ``ExitReport`` as the last line and exits 128 + the signal's number.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

# A force-quit needs SIGINT again this soon (wall seconds) after the "teardown in progress" answer.
FORCE_WINDOW_S = 3.0
FORCE_QUIT_STATUS = 130


@dataclass(frozen=True, slots=True)
class Leftover:
    """A campaign's instances at this moment: ``alive`` were rented and are not yet proven gone."""

    campaign_id: str
    alive: tuple[int, ...]
    proven_gone: int
    resume_command: tuple[str, ...]

    def resume(self) -> str:
        return shlex.join(self.resume_command)


@dataclass(slots=True)
class ExitReport:
    """What a command leaves behind, for its last line: the campaign it runs registers here how to describe its
    instances (``watch``); ``main`` asks after the event loop ended, whichever way it ended."""

    describe: Callable[[], Leftover | None] | None = None
    signals: list[int] = field(default_factory=list)   # the stop signals this command received


    def watch(self, describe: Callable[[], Leftover | None]) -> None:
        self.describe = describe

    def leftover(self) -> Leftover | None:
        if self.describe is None:
            return None
        try:
            return self.describe()
        except Exception:  # describing must never hide the exit itself
            return None

    def last_line(self) -> str | None:
        """One line naming every instance left alive, with the command that removes them; None when the command
        ran no campaign. A campaign whose instances are all proven gone says so."""
        left = self.leftover()
        if left is None:
            return None
        if not left.alive:
            return (f"campaign {left.campaign_id}: every instance it rented ({left.proven_gone}) was destroyed and "
                    f"proven gone")
        ids = ", ".join(str(i) for i in left.alive)
        if not left.resume_command:   # the demo: its marketplace lives and dies with this process
            return (f"campaign {left.campaign_id}: {len(left.alive)} instance(s) not proven gone: {ids} — on the "
                    f"demo's embedded simulator, which ends with this process")
        return (f"campaign {left.campaign_id}: {len(left.alive)} instance(s) LEFT ALIVE and possibly billing: {ids}"
                f" — run: {left.resume()}")


_REPORT: contextvars.ContextVar[ExitReport | None] = contextvars.ContextVar("vastui_exit_report", default=None)


def exit_report() -> ExitReport:
    """The running command's report (a throwaway one outside ``main``, e.g. in a test that calls a command's
    coroutine directly)."""
    report = _REPORT.get()
    if report is None:
        report = ExitReport()
        _REPORT.set(report)
    return report


class _Watched(Protocol):
    @property
    def campaign_id(self) -> str: ...

    def instances(self) -> tuple[tuple[int, ...], int]: ...


def watch_for_exit(handle: _Watched, command: tuple[str, ...]) -> None:
    """Let the process's last line name what this campaign (a ``CampaignHandle``) left alive, however it ends;
    ``command`` removes them (empty for the demo, whose simulator ends with the process)."""
    def describe() -> Leftover:
        alive, gone = handle.instances()
        return Leftover(campaign_id=handle.campaign_id, alive=alive, proven_gone=gone, resume_command=command)

    exit_report().watch(describe)


def install_exit_report() -> tuple[ExitReport, contextvars.Token[ExitReport | None]]:
    report = ExitReport()
    return report, _REPORT.set(report)


def reset_exit_report(token: contextvars.Token[ExitReport | None]) -> None:
    _REPORT.reset(token)


class Stopped(Exception):
    """A signal arrived: the command was cancelled (and a campaign torn down) like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class _Interrupts:
    """The handlers: the first signal cancels the work, later ones are answered (and SIGINT may force-quit)."""

    def __init__(self, task: Any, report: ExitReport, write: Callable[[str], None]) -> None:
        self._task = task
        self._report = report
        self._write = write
        self.got: list[int] = []
        self._warned_at: float | None = None

    def __call__(self, signum: int) -> None:
        self.got.append(signum)
        self._report.signals.append(signum)
        if len(self.got) == 1:
            if self._task is not None:
                self._task.cancel()
            return
        now = time.monotonic()
        if (signum == signal.SIGINT and self._warned_at is not None
                and now - self._warned_at <= FORCE_WINDOW_S):
            self._force_quit()
            return
        self._warned_at = now
        self._write(self._in_progress(signal.Signals(signum).name))

    def _in_progress(self, name: str) -> str:
        left = self._report.leftover()
        if left is None:
            what = "stopping"
            consequence = "which may leave work unfinished"
        else:
            what = f"teardown in progress: {len(left.alive)} instance(s) left to prove gone"
            consequence = f"which leaves them billing — `{left.resume()}` cleans up"
        return (f"vastui: {name} noted; {what}. Press Ctrl+C again within {FORCE_WINDOW_S:.0f} s only to "
                f"force-quit, {consequence}")

    def _force_quit(self) -> None:
        line = self._report.last_line() or "force-quit"
        self._write(f"vastui: FORCE-QUIT at the operator's request. {line}")
        sys.stdout.flush()
        os._exit(FORCE_QUIT_STATUS)   # no cleanup may run now: the operator chose to leave at once


def _stderr_line(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):   # the terminal is gone: the store and the receipt still say it
        pass


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_restored(report: ExitReport) -> Iterator[None]:
    """The process's own handlers for the stop signals, as they were before the block (``main`` wraps a command
    in it: ``stopping_on_signals(..., quiet_after=True)`` leaves them ignored) — unless the
    command was stopped by a signal: then the process is on its way out, and a repeat of that signal arriving
    after ``main`` returned must not kill it with the wrong exit status."""
    import threading

    if threading.current_thread() is not threading.main_thread():   # only the main thread has handlers to set
        yield
        return
    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        if not report.signals:
            for signum, handler in saved.items():
                if handler is not None:
                    signal.signal(signum, handler)


async def stopping_on_signals(work: Coroutine[Any, Any, T], *, quiet_after: bool = False) -> T:
    """Run ``work``; SIGINT, SIGTERM and SIGHUP cancel it once, so what cleans up after a cancellation (a
    campaign's abort, teardown and receipt) runs to its end whatever signals follow (see the module's docstring).

    ``quiet_after``: once the work is over, these signals are ignored rather than restored to their
    defaults — the command is only printing its last lines (a second Ctrl-C must not turn them into a
    KeyboardInterrupt). The caller restores them (``signals_restored``)."""
    import asyncio  # here: `vastui --help` and the market commands load no event loop (tests/test_cli_startup.py)

    loop = asyncio.get_running_loop()
    interrupts = _Interrupts(asyncio.current_task(), exit_report(), _stderr_line)
    installed = []
    for signum in STOP_SIGNALS:
        try:
            loop.add_signal_handler(signum, interrupts, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no such signal here
            pass
    try:
        result = await work
        if interrupts.got:   # the work took the cancellation and ended on its own terms (a Textual app quits cleanly)
            raise Stopped(interrupts.got[0])
        return result
    except asyncio.CancelledError:
        if interrupts.got:
            raise Stopped(interrupts.got[0]) from None
        raise
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)   # SIGINT goes back to KeyboardInterrupt...
            if quiet_after:
                # ...unless the command is only finishing. Ignored by the kernel, not by a Python handler: the
                # interpreter resets its own handlers to the default while it finalizes, and a repeat of the
                # signal landing then would still kill the process (exit -2 instead of 130).
                signal.signal(signum, signal.SIG_IGN)


def run_async(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` with SIGINT, SIGTERM and SIGHUP handled as the module's docstring says (for a command run
    by ``vastui.cli.main``, which restores the handlers afterwards)."""
    import asyncio

    return asyncio.run(stopping_on_signals(work, quiet_after=True))
