"""The console's terminal driver: Textual's own, made to survive its terminal closing.

A closed window, a killed tmux session or a dropped SSH connection takes the console's terminal away while the
console runs: the kernel sends SIGHUP, and every write after that fails (EIO). Textual's driver writes from a
thread through a queue of at most 30 writes; the first failed write ends that thread, and the event loop's next
writes then wait on the full queue for ever — and with the loop blocked, nothing can abort the campaign and
destroy what it rented. Here the driver writes through ``TerminalOut``, which drops whatever is written after the
terminal is gone, so the writer never dies, the loop never blocks, and the console's exit (and the campaign's
teardown behind it, ``vastui.cli.campaign_console``) runs to its end.
"""

from __future__ import annotations

import functools
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from textual.driver import Driver


class TerminalOut:
    """A text stream as the console's writer thread sees it: writes and flushes that fail (the terminal is gone:
    EIO; the stream closed: ValueError) are dropped, and so is everything after them."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self._stream.write(text)
            except (OSError, ValueError):
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.gone = True

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return True


@functools.cache
def terminal_driver(default: type[Driver]) -> type[Driver]:
    """The driver the console runs on, given the one Textual chose: on Linux and macOS its terminal driver
    writing through ``TerminalOut``; any other (a headless test, a driver named in ``TEXTUAL_DRIVER``) as it is."""
    from textual.drivers.linux_driver import LinuxDriver

    if default is not LinuxDriver:
        return default

    class ClosableTerminalDriver(LinuxDriver):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            if self._file is not None and not isinstance(self._file, TerminalOut):
                self._file = TerminalOut(self._file)  # type: ignore[assignment]

    return ClosableTerminalDriver
