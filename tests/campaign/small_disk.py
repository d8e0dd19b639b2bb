"""A small filesystem that tests can fill: a store whose disk runs out mid-campaign (a tmpfs, mounted as root)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

SIZE = "16m"


class CannotMount(Exception):
    """This machine does not let the tests mount a tmpfs (not root); CI runs as root."""


@contextlib.contextmanager
def small_disk(folder: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs at ``folder``; unmounted afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise CannotMount(done.stderr.strip())
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill_disk(folder: Path) -> None:
    """Fill the filesystem under ``folder`` to the last byte (unbuffered: nothing is left to fail at close)."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
