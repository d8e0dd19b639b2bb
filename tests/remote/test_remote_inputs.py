"""Staging inputs on a real (simulated) host over SFTP: the bytes digested at load, streamed in chunks, or nothing.

A swapped path (a symlink to a secret), another file put in its place, or bytes changed in place after loading
stop the upload with ``InputChanged`` (typed ``FailureKind.INPUT_CHANGED``) and leave nothing on the host; a large
input goes up with bounded memory (measured with tracemalloc, not a clock)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from tests.remote.remote_support import ClientKey, make_machine
from vastui.bench.manifest import Manifest, load_manifest
from vastui.campaign.blame import FailureKind
from vastui.campaign.candidate import CandidateContext, CandidateFailed, stage_inputs
from vastui.remote.runner import SshRunner
from vastui.sim.hosts import SshHostPool

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "resnet.toml"
SECRET = b"operator's private key: never leaves this machine\n"
INPUT = "resnet-canary.jsonl"


@dataclass
class _Ctx:
    """What ``stage_inputs`` reads of a candidate's context: the manifest."""

    manifest: Manifest


def _manifest(tmp_path: Path, *, input_bytes: bytes | None = None) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "resnet.toml")
    if input_bytes is None:
        shutil.copy(EXAMPLE.with_name(INPUT), folder / INPUT)
    else:
        (folder / INPUT).write_bytes(input_bytes)
    (tmp_path / "secret.txt").write_bytes(SECRET)
    return folder / "resnet.toml"


async def _stage(manifest: Manifest, runner: SshRunner, host: str, port: int) -> None:
    async with runner.connect(host, port, deadline_s=30) as conn:
        await stage_inputs(cast(CandidateContext, cast(Any, _Ctx(manifest))), conn)


def _files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _swap_for_symlink(path: Path) -> None:
    path.unlink()
    path.symlink_to("../secret.txt")


def _replace_file(path: Path) -> None:
    other = path.with_name("other")
    other.write_bytes(SECRET)
    os.replace(other, path)


def _change_in_place(path: Path) -> None:
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    with path.open("r+b") as handle:    # same file, same size
        handle.write(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))   # and the old time: only the bytes tell


@pytest.mark.parametrize("change", [_swap_for_symlink, _replace_file, _change_in_place],
                         ids=["symlink to ../secret.txt", "another file in its place", "bytes changed in place"])
async def test_an_input_changed_after_loading_uploads_nothing(
        tmp_path: Path, pool: SshHostPool, runner: SshRunner, client_key: ClientKey, change: Any) -> None:
    manifest = load_manifest(_manifest(tmp_path))
    host, port = await pool.start_host(instance_id=21, machine=make_machine(), authorized_keys=[client_key.public])
    change(tmp_path / "m" / INPUT)
    with pytest.raises(CandidateFailed) as caught:
        await _stage(manifest, runner, host, port)
    assert caught.value.failure.kind is FailureKind.INPUT_CHANGED and not caught.value.bad_host
    assert str(caught.value).startswith(f"input {INPUT!r} changed since the manifest was loaded (")
    staged = _files_under(pool.root_dir(instance_id=21))
    assert not any(name.startswith(INPUT) for name in staged), sorted(staged)   # neither the file nor a .part
    assert not any(SECRET in data for data in staged.values())


async def test_the_pinned_input_is_staged_byte_for_byte(
        tmp_path: Path, pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    manifest = load_manifest(_manifest(tmp_path))
    host, port = await pool.start_host(instance_id=22, machine=make_machine(), authorized_keys=[client_key.public])
    await _stage(manifest, runner, host, port)
    assert (pool.root_dir(instance_id=22) / INPUT).read_bytes() == EXAMPLE.with_name(INPUT).read_bytes()


async def test_a_large_input_is_loaded_and_staged_with_bounded_memory(
        tmp_path: Path, pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    size = 50 * 1024 * 1024
    data = os.urandom(1 << 20) * 50          # 50 MiB, written to disk and dropped before measuring
    path = _manifest(tmp_path, input_bytes=data)
    digest = hashlib.sha256(data).hexdigest()
    del data
    host, port = await pool.start_host(instance_id=23, machine=make_machine(), authorized_keys=[client_key.public])
    async with runner.connect(host, port, deadline_s=30) as conn:   # the host key recorded outside the measurement
        await conn.run_command(["true"])
    tracemalloc.start()
    try:
        manifest = load_manifest(path)
        load_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        await _stage(manifest, runner, host, port)
        stage_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert manifest.workload.inputs[0].size_bytes == size and manifest.workload.inputs[0].sha256 == digest
    staged = pool.root_dir(instance_id=23) / INPUT
    assert staged.stat().st_size == size
    with staged.open("rb") as handle:
        assert hashlib.file_digest(handle, "sha256").hexdigest() == digest
    # (a whole-file read would hold 50 MiB at least; a chunked stream holds a few chunks, client and server side)
    assert load_peak < 8 * 1024 * 1024, load_peak
    assert stage_peak < 16 * 1024 * 1024, stage_peak
