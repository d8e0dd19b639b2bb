"""The console's terminal closing under it: writes fail with EIO from then on, and the console must still get out
(its campaign's teardown waits behind its exit). A real pty whose master is closed stands for the gone terminal."""

from __future__ import annotations

import os
import pty
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest
from textual.drivers._writer_thread import MAX_QUEUED_WRITES, WriterThread
from textual.drivers.headless_driver import HeadlessDriver
from textual.drivers.linux_driver import LinuxDriver

from tests.tui.console_support import sim_console
from vastui.tui.terminal import TerminalOut, terminal_driver

GUARD_S = 60.0   # a hang guard, never a speed check


@contextmanager
def closed_terminal() -> Iterator[IO[str]]:
    """The slave side of a pty whose master has closed: every write to it fails with EIO."""
    master, slave = pty.openpty()
    os.close(master)
    stream = os.fdopen(slave, "w", buffering=1)
    try:
        yield stream
    finally:
        try:
            stream.close()
        except OSError:
            pass


def stopped_within_guard(writer: WriterThread) -> bool:
    """Feed the writer three queues' worth of frames and stop it, as the console does on its way out; whether that
    returned (it blocks for ever once the writer thread has died and the queue is full)."""
    def feed_and_stop() -> None:
        for frame in range(3 * MAX_QUEUED_WRITES):
            writer.write(f"\x1b[H frame {frame}\n")
        writer.stop()

    feeder = threading.Thread(target=feed_and_stop, daemon=True)
    feeder.start()
    feeder.join(GUARD_S)
    return not feeder.is_alive()


def test_a_write_to_a_closed_terminal_fails_with_eio() -> None:
    """The premise: without TerminalOut the first write after the terminal is gone raises (and would end
    Textual's writer thread)."""
    with closed_terminal() as stream, pytest.raises(OSError):
        stream.write("x\n")
        stream.flush()


def test_the_writer_outlives_its_terminal_closing() -> None:
    with closed_terminal() as stream:
        out = TerminalOut(stream)
        writer = WriterThread(out)   # type: ignore[arg-type]
        writer.start()
        assert stopped_within_guard(writer), "the console's writer blocked on a closed terminal"
        assert out.gone and not writer.is_alive()


def test_terminal_out_writes_through_while_the_terminal_is_there(tmp_path: Path) -> None:
    with (tmp_path / "screen").open("w") as stream:
        out = TerminalOut(stream)
        assert out.write("frame") == len("frame")
        out.flush()
        assert not out.gone
    assert (tmp_path / "screen").read_text() == "frame"


def test_only_textuals_terminal_driver_is_replaced() -> None:
    assert issubclass(terminal_driver(LinuxDriver), LinuxDriver)
    assert terminal_driver(LinuxDriver) is not LinuxDriver
    assert terminal_driver(HeadlessDriver) is HeadlessDriver


async def test_the_console_runs_on_the_driver_that_survives_a_closed_terminal(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    async with sim_console(tmp_path) as console:
        driver_class = console.app.get_driver_class()
        assert issubclass(driver_class, LinuxDriver) and driver_class is not LinuxDriver
        driver = driver_class(console.app)
        assert isinstance(driver._file, TerminalOut)
