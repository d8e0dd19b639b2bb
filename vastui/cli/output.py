"""Output that can vanish without taking the campaign with it.

An operator's ordinary habits close vastui's output under it: ``| head -25`` or ``| tee log`` and Ctrl-C (the
reader dies first: EPIPE), a closed terminal or a killed tmux session (EIO), a redirect onto a full disk (ENOSPC).
Before, the first progress line written after that raised out of an event listener — rich's console even turns a
broken pipe into ``SystemExit`` — and the store closed under the teardown with instances still billing.

``guarded_output`` puts ``sys.stdout`` and ``sys.stderr`` behind ``DroppingStream`` for the length of a command: a
write that fails marks the stream gone, points its file descriptor at ``/dev/null`` (so the interpreter's last
flush has nowhere to fail) and every later write is dropped. The work — measuring, teardown, the store — never
sees an output error; what could not be shown is in the store and the receipt.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import IO, Any


class DroppingStream:
    """A text stream that drops output once its reader is gone, instead of raising.

    Delegates every other attribute to the stream it wraps (``isatty``, ``fileno``, ``encoding``, ``buffer``).
    """

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.gone_because: str | None = None

    def write(self, text: str) -> int:
        if self.gone_because is None:
            try:
                self._stream.write(text)
            except (OSError, ValueError) as exc:   # EPIPE, EIO, ENOSPC; ValueError: written after close
                self._lose(exc)
        return len(text)

    def flush(self) -> None:
        if self.gone_because is None:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self._lose(exc)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def isatty(self) -> bool:
        if self.gone_because is not None:
            return False
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _lose(self, exc: BaseException) -> None:
        self.gone_because = type(exc).__name__ + (f" ({exc.strerror})" if isinstance(exc, OSError) and
                                                  exc.strerror else "")
        # Whatever is still buffered would fail again at the interpreter's last flush ("Exception ignored ...
        # BrokenPipeError"): the descriptor now leads nowhere, so that flush succeeds and says nothing.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)


@contextlib.contextmanager
def guarded_output() -> Iterator[tuple[DroppingStream, DroppingStream]]:
    """``sys.stdout`` and ``sys.stderr`` as ``DroppingStream``s while the block runs; restored afterwards."""
    saved = sys.stdout, sys.stderr
    out = saved[0] if isinstance(saved[0], DroppingStream) else DroppingStream(saved[0])
    err = saved[1] if isinstance(saved[1], DroppingStream) else DroppingStream(saved[1])
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = saved
