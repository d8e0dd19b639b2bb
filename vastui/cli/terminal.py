"""What the CLI commands share: connection flags, the marketplace client they build, tables, and the
operator's yes/no prompt. Part of the composition root (only vastui/cli/ prints)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import select
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from rich.table import Table

    from vastui.approval import AuditSink
    from vastui.clock import Clock
    from vastui.vast.client import HttpVastClient


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="marketplace base URL (default: $VAST_URL or https://console.vast.ai)")
    parser.add_argument("--api-key", help="Vast API key (default: $VAST_API_KEY or the official CLI's key file)")


def positive_number(text: str) -> float:
    """argparse type: a positive finite float (a time scale of 0, -5, nan or inf makes no clock)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError("must be a positive finite number")
    return value


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be a port number, 0 to 65535")
    return value


def make_table(title: str, *columns: str) -> Table:
    """A plain table; a column name ending in ``<`` is left-aligned, the others (numbers) right-aligned.

    A name ending in ``~`` (after any ``<``) marks a column that may wrap: on a narrow terminal those shrink and
    wrap first, and the others (ids, states, money) keep their whole values.
    """
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in columns:
        may_wrap = name.endswith("~")
        name = name.removesuffix("~")
        table.add_column(name.rstrip("<"), justify="left" if name.endswith("<") else "right", no_wrap=not may_wrap,
                         overflow="fold" if may_wrap else "ellipsis")
    return table


def print_table(table: Table) -> None:
    print_first_fitting([table])


def print_first_fitting(tables: Sequence[Table]) -> Table:
    """Print the first of ``tables`` (widest first) whose natural width fits the terminal, else the last; return
    it. Piped output is never narrowed: the first is printed whole."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # piped: never truncate
        chosen = tables[0]
    else:
        unbounded = console.options.update_width(100_000)  # a table's measure is capped at the width it is given
        chosen = next((t for t in tables if console.measure(t, options=unbounded).maximum <= console.width),
                      tables[-1])
    console.print(chosen)
    return chosen


def fmt_num(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def vast_client(args: argparse.Namespace, *, audit: AuditSink | None = None,
                clock: Clock | None = None) -> HttpVastClient:
    """The marketplace client for ``--url``/``--api-key`` (or the environment and the official CLI's key file).

    Its clock (a fresh ``MarketClock`` unless given) keeps the marketplace's time from its answers: pass the same one
    to whatever measures money against the listings (accrued cost, deadlines)."""
    from vastui.clock import MarketClock
    from vastui.config import load_settings
    from vastui.errors import ConfigError
    from vastui.vast.client import HttpVastClient

    settings = load_settings(url=args.url, api_key=args.api_key)
    if settings.api_key.key is None:
        raise ConfigError("no Vast API key: pass --api-key, set VAST_API_KEY, or write it to "
                          "~/.config/vastai/vast_api_key (the simulator prints its key when it starts)",
                          title="No API key")
    return HttpVastClient(base_url=settings.url, api_key=settings.api_key.key, clock=clock or MarketClock(), audit=audit,
                         key_source=settings.api_key.source)


class _HeldLines:
    """The terminal's one question at a time, seen from the progress lines: while a question waits for its answer,
    lines are kept here and shown, in order, once it is answered (or withdrawn) — a line printed after
    ``[y/N] `` would leave the operator answering a prompt that has scrolled away."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asking = 0
        self._held: list[Callable[[], None]] = []

    def show(self, emit: Callable[[], None]) -> None:
        with self._lock:
            if self._asking:
                self._held.append(emit)
                return
        emit()

    def question_asked(self) -> None:
        with self._lock:
            self._asking += 1

    def question_answered(self) -> None:
        with self._lock:
            self._asking -= 1
            due, self._held = (self._held, []) if not self._asking else ([], self._held)
        for emit in due:
            emit()


T = TypeVar("T")

# One per process: there is one terminal, and every question and progress line of this process shares it.
_HELD = _HeldLines()


def held_while_asking(show: Callable[[T], None]) -> Callable[[T], None]:
    """``show``, except that while ``ask_on_terminal`` waits for an answer its calls are kept and made, in order,
    after the answer (progress lines never land behind a pending ``[y/N]``)."""
    def held(item: T) -> None:
        _HELD.show(functools.partial(show, item))
    return held


async def ask_on_terminal(text: str) -> bool:
    """Ask on stderr, read one line from stdin: only an explicit y/yes approves.

    On a terminal, whatever was typed before the question appeared is discarded first (a ``y`` typed ahead must
    not approve what the operator has not seen yet), and the answer is read straight from the terminal, one line,
    so nothing typed for this question is left over for the next. Cancelling the wait (the request expired or
    was withdrawn) stops the reading.
    """
    stop = threading.Event()

    def ask() -> str:
        tty_fd = _tty_fd()
        if tty_fd is not None:
            _discard_typed_ahead(tty_fd)
        print(f"{text} [y/N] ", end="", file=sys.stderr, flush=True)
        return sys.stdin.readline() if tty_fd is None else _read_tty_line(tty_fd, stop)

    import asyncio

    _HELD.question_asked()
    answered = False
    try:
        answer = await asyncio.to_thread(ask)
        answered = True
        return answer.strip().lower() in ("y", "yes")
    finally:
        stop.set()
        if not answered:
            print(" (withdrawn)", file=sys.stderr, flush=True)  # end the prompt's line before the held ones
        _HELD.question_answered()


def _tty_fd() -> int | None:
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return None  # replaced by something that is not a file (a test's StringIO)
    return fd if os.isatty(fd) else None


def _discard_typed_ahead(fd: int) -> None:
    if sys.platform == "win32":
        return
    import termios

    with contextlib.suppress(termios.error):
        termios.tcflush(fd, termios.TCIFLUSH)


def _read_tty_line(fd: int, stop: threading.Event) -> str:
    """One line from the terminal (canonical mode hands over a line at a time); "" when stopped or at EOF."""
    chunks: list[bytes] = []
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready or stop.is_set():
            continue
        data = os.read(fd, 4096)
        if not data:
            break
        chunks.append(data)
        if b"\n" in data:
            break
    if stop.is_set():
        return ""
    return b"".join(chunks).decode("utf-8", errors="replace").split("\n", 1)[0]
