"""A manifest's input files: pinned by their bytes, kept inside the manifest's folder, and the identity digest
that covers them (the key under which every measurement of a workload is kept)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn


@dataclass(frozen=True, slots=True)
class InputFile:
    """One pinned input file: ``path`` as written in the manifest (relative to it), its bytes' sha256 and size."""

    path: str
    resolved: Path
    sha256: str
    size_bytes: int


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


def hash_input(rel: str, *, base: Path, fail: Callable[[str], NoReturn]) -> InputFile:
    """Hash the input ``rel`` (relative to ``base``); ``fail(reason)`` for one outside ``base`` or unreadable."""
    # Inputs are uploaded to every host: one that leads out of the manifest's folder (``..``, an absolute path or a
    # symlink) could ship a key file or anything else readable to a stranger's machine.
    folder = base.resolve()
    resolved = (base / rel).resolve()
    if not resolved.is_relative_to(folder):
        fail(f"input file {rel!r} is outside the manifest's folder ({folder}); inputs are uploaded to every host, "
             "so they must stay inside it (symlinks are followed)")
    digest = hashlib.sha256()
    size = 0
    try:
        with resolved.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        fail(f"cannot read input file {rel!r} (paths are relative to the manifest): {exc.strerror}")
    return InputFile(path=rel, resolved=resolved, sha256=digest.hexdigest(), size_bytes=size)
