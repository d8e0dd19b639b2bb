"""A `vastui sim` process that outlives the console under test, as Vast.ai would, and what tests ask of it."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh

from vastui.approval import Action, Approval, ApprovalRequest
from vastui.clock import WallClock
from vastui.config import Secret
from vastui.vast.client import HttpVastClient, ssh_key_target

VASTUI = [sys.executable, "-m", "vastui"]


@contextlib.asynccontextmanager
async def sim_process(*, key: str, seed: int = 11, time_scale: str = "300") -> AsyncIterator[str]:
    """Serve a simulated marketplace from its own process; yields its URL, stops it (SIGTERM) afterwards."""
    proc = await asyncio.create_subprocess_exec(
        # the console's handling of the operator's habits is under test, at the moment a signal lands: the kind
        # simulator, by name (the realistic one's turns move those moments; whole realistic campaigns run elsewhere)
        *VASTUI, "sim", "--port", "0", "--seed", str(seed), "--api-key", key, "--time-scale", time_scale,
        "--realism", "kind",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    url = None
    async with asyncio.timeout(60):
        while url is None:
            line = (await proc.stdout.readline()).decode()
            assert line, "the simulator exited before serving"
            if m := re.search(r"serving (http://\S+)", line):
                url = m.group(1)
    try:
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await proc.wait()


def operator_key(directory: Path) -> Path:
    """A fresh ed25519 key pair in ``directory`` (the private key's path)."""
    path = directory / "id_ed25519"
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(path))
    key.write_public_key(str(path) + ".pub")
    return path


async def register_key(url: str, api_key: str, key_path: Path) -> None:
    """Register the key's public half on the simulated account, as `vastui ssh-key add` would (approved)."""
    public = Path(str(key_path) + ".pub").read_text().strip()
    request = ApprovalRequest(action=Action.CREATE_SSH_KEY, target=ssh_key_target(public), summary="test key")
    async with HttpVastClient(base_url=url, api_key=Secret(api_key), clock=WallClock()) as client:
        await client.create_ssh_key(public, approval=Approval(request, granted_by="test", granted_at=0.0))


async def alive(url: str, api_key: str) -> list[tuple[int, str | None]]:
    """Every instance the marketplace lists now (id, label); the listing must be complete."""
    async with HttpVastClient(base_url=url, api_key=Secret(api_key), clock=WallClock()) as client:
        listing = await client.list_instances()
    assert listing.is_complete
    return [(i.id, i.label) for i in listing.instances]
