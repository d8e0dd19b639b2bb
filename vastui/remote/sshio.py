"""What the SSH edge's parts share: asyncssh and OS errors translated into ``RemoteError``, atomic SFTP writes, a
finished command's result."""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

import asyncssh

from vastui.errors import HostKeyMismatch, RemoteError, RemoteTimeout


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A finished one-shot command; ``exit_status`` is None when it ended by a signal."""

    exit_status: int | None
    stdout: str
    stderr: str


def translate(exc: BaseException, where: str) -> RemoteError:
    if isinstance(exc, RemoteError):
        return exc
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return HostKeyMismatch(f"{where} presented a host key that differs from the one recorded on first "
                               f"contact; refusing to connect ({exc})", title="Host key changed")
    if isinstance(exc, asyncssh.PermissionDenied):
        return RemoteError(f"{where} refused our SSH key ({exc.reason}); only keys registered on the account (or "
                           f"attached to the instance) are accepted, and they reach a new instance late",
                           title="SSH key refused")
    if isinstance(exc, TimeoutError):
        return RemoteTimeout(f"{where} did not answer in time", title="SSH timeout")
    if isinstance(exc, asyncssh.Error):
        return RemoteError(f"SSH to {where} failed: {exc.reason}", title="SSH failed")
    return RemoteError(f"cannot reach {where}: {exc}", title="SSH failed")


SSH_ERRORS = (OSError, asyncssh.Error, TimeoutError)


async def sftp_write(sftp: asyncssh.SFTPClient, remote_path: str, chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` via a temporary name and rename, so a reader never sees half a file.

    The chunks are written as they come (memory stays at one chunk); when the source fails part way (an input that
    changed under its reader) the temporary file is removed and nothing appears under ``remote_path``."""
    parent = posixpath.dirname(remote_path)
    if parent and not await sftp.exists(parent):
        await sftp.makedirs(parent)
    part = remote_path + ".part"
    try:
        async with sftp.open(part, "wb") as handle:
            for chunk in chunks:
                await handle.write(chunk)
    except SSH_ERRORS:
        raise
    except Exception:
        with contextlib.suppress(*SSH_ERRORS):
            await sftp.remove(part)
        raise
    await sftp.posix_rename(part, remote_path)


def text_of(value: object) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
