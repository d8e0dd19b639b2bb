"""A manifest's input files: pinned by their bytes, kept inside the manifest's folder, read again only as the very
file that was digested; and the identity digest that covers them (the key under which every measurement of a
workload is kept).

An input is content, not a path: at load it is read once, in chunks, and its sha256, size and file identity
(device, inode, modification time) are kept. Every later read (``pinned_chunks``, the upload to a host) first checks
that the path still leads, inside the manifest's folder, to that same file, and hashes what it streams; anything
else is ``InputChanged``, so a symlink swapped in after loading can never carry another file to a stranger's host.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from vastui.errors import InputChanged

# Inputs are read in chunks of this size, at load and at every upload: memory stays bounded whatever their size.
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class InputFile:
    """One pinned input file: ``path`` as written in the manifest (relative to it), its bytes' sha256 and size,
    and the identity of the file they were read from (``folder`` is the manifest's folder, resolved)."""

    path: str
    resolved: Path
    sha256: str
    size_bytes: int
    folder: Path
    device: int
    inode: int
    mtime_ns: int


def identity_digest(*, name: str, image: str, command: tuple[str, ...], inputs: tuple[InputFile, ...]) -> str:
    """sha256 over a canonical JSON form of the workload identity, which includes each input file's sha256."""
    canonical = {
        "version": 1,
        "name": name,
        "image": image,
        "command": list(command),
        "inputs": [{"path": f.path, "sha256": f.sha256, "size": f.size_bytes} for f in inputs],
    }
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _inside(rel: str, folder: Path) -> Path | None:
    """Where ``rel`` leads (symlinks followed), or None when that is outside ``folder``."""
    resolved = (folder / rel).resolve()
    return resolved if resolved.is_relative_to(folder) else None


def hash_input(rel: str, *, base: Path, fail: Callable[[str], NoReturn]) -> InputFile:
    """Hash the input ``rel`` (relative to ``base``); ``fail(reason)`` for one outside ``base`` or unreadable."""
    # Inputs are uploaded to every host: one that leads out of the manifest's folder (``..``, an absolute path or a
    # symlink) could ship a key file or anything else readable to a stranger's machine.
    folder = base.resolve()
    try:
        resolved = _inside(rel, folder)
    except (OSError, ValueError) as exc:   # a loop of symlinks, a name the OS cannot take
        fail(f"cannot follow input file path {rel!r}: {exc}")
    if resolved is None:
        fail(f"input file {rel!r} is outside the manifest's folder ({folder}); inputs are uploaded to every host, "
             "so they must stay inside it (symlinks are followed)")
    digest = hashlib.sha256()
    size = 0
    try:
        with resolved.open("rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                fail(f"input file {rel!r} is not a regular file")
            while chunk := handle.read(CHUNK_BYTES):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        fail(f"cannot read input file {rel!r} (paths are relative to the manifest): {exc.strerror}")
    return InputFile(path=rel, resolved=resolved, sha256=digest.hexdigest(), size_bytes=size, folder=folder,
                     device=info.st_dev, inode=info.st_ino, mtime_ns=info.st_mtime_ns)


def _open_pinned(item: InputFile) -> int:
    """Open the very file that was digested at load, or raise ``InputChanged`` saying what differs."""
    try:
        now_leads_to = _inside(item.path, item.folder)
    except (OSError, ValueError) as exc:
        raise InputChanged(item.path, f"its path no longer resolves: {exc}") from exc
    if now_leads_to is None:
        raise InputChanged(item.path, "it now leads outside the manifest's folder")
    if now_leads_to != item.resolved:
        raise InputChanged(item.path, f"it now leads to {now_leads_to.name!r}, not {item.resolved.name!r}")
    try:
        # O_NOFOLLOW: a symlink put in place of the file since the check above is refused, not followed
        fd = os.open(item.resolved, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise InputChanged(item.path, f"it cannot be opened: {exc.strerror}") from exc
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != (item.device, item.inode):
        os.close(fd)
        raise InputChanged(item.path, "another file has taken its place")
    if info.st_size != item.size_bytes or info.st_mtime_ns != item.mtime_ns:
        os.close(fd)
        raise InputChanged(item.path, f"its size or modification time differs ({info.st_size} bytes now, "
                                      f"{item.size_bytes} then)")
    return fd


def check_pinned(item: InputFile) -> None:
    """Raise ``InputChanged`` when the path no longer leads to the very file digested at load (replaced, resized,
    a symlink put in place): the cheap look before money is spent on a rent; the bytes are checked at upload."""
    os.close(_open_pinned(item))


def pinned_chunks(item: InputFile, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The input's bytes, in chunks, read from the file digested at load; raises ``InputChanged`` before the first
    chunk when the path now leads elsewhere or the file was replaced or resized, and after the last one when the
    bytes streamed do not hash to the pinned sha256 (a consumer that commits only at the end never keeps them)."""
    fd = _open_pinned(item)
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
            size += len(chunk)
            if size > item.size_bytes:
                raise InputChanged(item.path, "it grew while it was read")
            yield chunk
    if size != item.size_bytes or digest.hexdigest() != item.sha256:
        raise InputChanged(item.path, "its bytes no longer match the sha256 taken at load")
