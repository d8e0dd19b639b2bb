"""Trust on first use: the host keys vastui has seen, in a known_hosts file that vastui owns.

The first contact with ``host:port`` records its key; every later contact must present the same key, or the
runner refuses it (``HostKeyMismatch``). Rented hosts come and go and their SSH ports are reused, so the campaign
forgets an instance's entry once the instance is destroyed. Lines use OpenSSH's format (``[host]:port type key``),
so ``ssh -o UserKnownHostsFile=...`` can share the file.

One instance can be reached at two addresses (Vast's proxy and a direct port, docs/api-notes.md §3.12); both lead to
the container's own sshd, so both present its one host key. Entries stay keyed by address (what is reused, and
what ``forget`` must drop exactly), but a first contact at one address of an instance trusts the key already
recorded at its other address (``also``): a proxy that shows another key than the direct path did is refused as a
changed key, not recorded as a new host.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import asyncssh

from vastui.errors import RemoteError

DEFAULT_SSH_PORT = 22


def host_pattern(host: str, port: int) -> str:
    return host if port == DEFAULT_SSH_PORT else f"[{host}]:{port}"


class KnownHosts:
    """Reads and appends the known_hosts file at ``path`` (created on first record, mode 0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lookup(self, host: str, port: int) -> list[str]:
        """The recorded key lines (``type base64``) for ``host:port``; empty when never seen."""
        pattern = host_pattern(host, port)
        keys = []
        for line in self._lines():
            fields = line.split()
            if len(fields) >= 3 and pattern in fields[0].split(","):
                keys.append(f"{fields[1]} {fields[2]}")
        return keys

    def trusted(self, host: str, port: int, *,
                also: Sequence[tuple[str, int]] = ()) -> asyncssh.SSHKnownHosts | None:
        """The recorded keys as asyncssh trusts them, or None when ``host:port`` was never seen. A never-seen
        address trusts the keys recorded for the first of ``also`` (the same instance's other addresses) seen."""
        keys = self.lookup(host, port)
        for other in also:
            if keys:
                break
            keys = self.lookup(*other)
        if not keys:
            return None
        pattern = host_pattern(host, port)
        try:
            return asyncssh.import_known_hosts("".join(f"{pattern} {key}\n" for key in keys))
        except (ValueError, asyncssh.KeyImportError) as exc:
            raise RemoteError(f"{self.path}: unreadable key for {pattern}: {exc}") from exc

    def record(self, host: str, port: int, key: asyncssh.SSHKey) -> None:
        """Remember ``key`` for ``host:port`` (first contact)."""
        kind, data = key.export_public_key().decode().split()[:2]
        line = f"{host_pattern(host, port)} {kind} {data}\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(line)

    def forget(self, host: str, port: int) -> int:
        """Drop every entry for ``host:port`` (its instance is gone); returns how many were dropped."""
        pattern = host_pattern(host, port)
        lines = self._lines()
        kept = [line for line in lines if not (line.split() and pattern in line.split()[0].split(","))]
        if len(kept) != len(lines):
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
            tmp.chmod(0o600)
            tmp.replace(self.path)
        return len(lines) - len(kept)

    def _lines(self) -> list[str]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise RemoteError(f"cannot read known hosts file {self.path}: {exc}") from exc
        return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
