"""``stopping_on_signals``: SIGTERM/SIGHUP cancel the work like SIGINT, and the command always ends as ``Stopped`` —
whether the work let the cancellation through or took it and returned (as the Textual console does)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from vastui.cli.signals import ExitReport, Stopped, signals_restored, stopping_on_signals


async def _until_cancelled(*, swallow: bool, ready: asyncio.Event) -> str:
    ready.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        if not swallow:
            raise
    return "cleaned up"


@pytest.mark.parametrize("swallow", [False, True])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_work_and_is_reported(signum: int, swallow: bool) -> None:
    async def main() -> str:
        ready = asyncio.Event()

        async def send() -> None:
            await ready.wait()
            os.kill(os.getpid(), signum)

        sender = asyncio.get_running_loop().create_task(send())
        try:
            return await stopping_on_signals(_until_cancelled(swallow=swallow, ready=ready))
        finally:
            await sender

    with pytest.raises(Stopped) as caught:
        asyncio.run(main())
    assert caught.value.signum == signum and caught.value.name == signal.Signals(signum).name
    # the handlers are gone afterwards: the default disposition is back
    assert signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler)


def test_without_a_signal_the_work_returns_its_result() -> None:
    async def work() -> int:
        return 42

    assert asyncio.run(stopping_on_signals(work())) == 42


def test_a_signal_after_the_work_is_quiet_until_the_command_restores_its_handlers() -> None:
    """Ctrl-C twice where the second lands after the event loop ended (the command printing its last lines): no
    KeyboardInterrupt out of nowhere; the process's handlers come back when the command is done."""
    async def main() -> str:
        ready = asyncio.Event()

        async def send() -> None:
            await ready.wait()
            os.kill(os.getpid(), signal.SIGINT)

        sender = asyncio.get_running_loop().create_task(send())
        try:
            return await stopping_on_signals(_until_cancelled(swallow=False, ready=ready), quiet_after=True)
        finally:
            await sender

    before = signal.getsignal(signal.SIGINT)
    report = ExitReport()
    with signals_restored(report):
        with pytest.raises(Stopped):
            asyncio.run(main())
        os.kill(os.getpid(), signal.SIGINT)   # the second Ctrl-C, late: noted, not raised
        signal.raise_signal(signal.SIGTERM)   # and a late SIGTERM does not end the process
        report.signals.clear()                # (a stopped command keeps its quiet handlers to the exit)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_command_stopped_by_a_signal_keeps_late_signals_quiet_to_the_exit() -> None:
    """After `main` returns from a stopped command, the process only exits: a repeat of the signal landing then
    must not kill it by the signal (exit -2 / -15 instead of 130 / 143)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    report = ExitReport(signals=[signal.SIGINT])
    try:
        with signals_restored(report):
            signal.signal(signal.SIGINT, signal.SIG_IGN)   # what the command's last moments left in place
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
