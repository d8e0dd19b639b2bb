"""The operator's SSH public keys on this machine: the ones ``SshRunner`` will offer to a rented host.

A campaign checks them against the keys registered on the account before it rents anything (a host accepts only
the account's keys), and ``vastui ssh-key add`` registers one. Only public halves are read: a private key is never
opened here, and a file that holds one is refused without echoing a byte of it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import asyncssh
from asyncssh.public_key import decode_ssh_public_key

from vastui.errors import ConfigError

MAX_PUBLIC_KEY_BYTES = 64 * 1024    # an OpenSSH public key line is well under 16 KiB even for RSA-16384
# What asyncssh tries when the runner is given no key file (after the agent), in its own order.
DEFAULT_KEY_NAMES = ("id_ed25519_sk", "id_ecdsa_sk", "id_ed448", "id_ed25519", "id_ecdsa", "id_rsa", "id_dsa")
AGENT = "ssh-agent"


@dataclass(frozen=True, slots=True)
class LocalPublicKey:
    """One public key the runner can authenticate with."""

    text: str                  # "ssh-ed25519 AAAA... comment", one line
    source: str                # the .pub file it was read from, or "ssh-agent"
    fingerprint: str           # "SHA256:..."
    comment: str | None
    path: Path | None = None   # the .pub file; None for a key held by the agent


def _parse(data: bytes, *, source: str, path: Path | None) -> LocalPublicKey:
    if b"PRIVATE KEY" in data:
        shown = f"{path}.pub" if path is not None else "its .pub file"
        raise ConfigError(f"{source} is a private key: give its public half ({shown}); a private key never "
                          "leaves this machine", title="Private key refused")
    try:
        key = asyncssh.import_public_key(data)
    except (asyncssh.KeyImportError, ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source} is not an SSH public key ({exc}); expected one line like "
                          "'ssh-ed25519 AAAA... you@host'", title="Not a public key") from exc
    comment = key.get_comment()
    text = key.export_public_key().decode("ascii").strip()
    return LocalPublicKey(text=text, source=source, fingerprint=key.get_fingerprint("sha256"),
                          comment=comment or None, path=path)


def read_public_key_file(path: Path) -> LocalPublicKey:
    """The public key in ``path`` (an OpenSSH ``.pub`` file); ConfigError naming the file when it cannot be read,
    holds a private key, or is not a public key."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_PUBLIC_KEY_BYTES + 1)
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not a public key file", title="Not a public key") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", title="Not a public key") from exc
    if len(data) > MAX_PUBLIC_KEY_BYTES:
        raise ConfigError(f"{path} is larger than any SSH public key ({MAX_PUBLIC_KEY_BYTES} bytes at most)",
                          title="Not a public key")
    return _parse(data, source=str(path), path=path)


def public_half(private_key: Path) -> Path:
    """Where ssh-keygen writes the public half of ``private_key``."""
    return private_key.with_name(private_key.name + ".pub")


async def agent_keys() -> list[LocalPublicKey]:
    """The keys a running ssh-agent holds (the runner offers them when it is given no key file); none without one."""
    try:
        async with asyncssh.connect_agent() as agent:
            pairs = await agent.get_keys()
    except (OSError, asyncssh.Error, ValueError):
        return []
    keys: list[LocalPublicKey] = []
    for pair in pairs:
        with contextlib.suppress(asyncssh.KeyImportError, ValueError):   # a key type asyncssh cannot read: skipped
            key = decode_ssh_public_key(pair.public_data)   # the agent hands out wire-format blobs
            comment = pair.get_comment()
            if comment:
                key.set_comment(comment)
            keys.append(LocalPublicKey(text=key.export_public_key().decode("ascii").strip(), source=AGENT,
                                       fingerprint=key.get_fingerprint("sha256"), comment=comment or None))
    return keys


async def runner_public_keys(*, key_path: Path | None, home: Path) -> list[LocalPublicKey]:
    """The public keys ``SshRunner`` would offer, as ``campaign run`` builds it: with a key file, that file's
    ``.pub`` alone (the agent is not used then); without one, the agent's keys, then the ``.pub`` of each default
    identity in ``home/.ssh`` that exists. Empty when there are none (a missing ``.pub`` counts as none)."""
    if key_path is not None:
        pub = public_half(key_path)
        return [read_public_key_file(pub)] if pub.is_file() else []
    keys = await agent_keys()
    for name in DEFAULT_KEY_NAMES:
        private, pub = home / ".ssh" / name, home / ".ssh" / f"{name}.pub"
        if private.is_file() and pub.is_file():
            with contextlib.suppress(ConfigError):
                keys.append(read_public_key_file(pub))
    return keys
