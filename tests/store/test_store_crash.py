"""kill -9 of a writer mid-campaign loses at most the transaction in flight, and host knowledge keeps every run."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.store.store_support import integrity
from vastui.store import RunStatus, SqliteStore

WRITER = Path(__file__).with_name("store_writer.py")
ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:crash-workload"
LINE_TIMEOUT_S = 30.0


@dataclass
class Acknowledged:
    """Transactions the writer said were committed: run ids started, sampled and finished (with throughput)."""

    batch: int
    started: set[int] = field(default_factory=set)
    sampled: set[int] = field(default_factory=set)
    finished: dict[int, float] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.started) + len(self.sampled) + len(self.finished)

    def take(self, line: str) -> str:
        """Note one line of the writer's output; return its kind."""
        kind, run_id, *rest = line.split()
        if kind == "run":
            self.started.add(int(run_id))
        elif kind == "samples":
            assert int(rest[0]) == self.batch
            self.sampled.add(int(run_id))
        elif kind == "finished":
            self.finished[int(run_id)] = float(rest[0])
        return kind


async def _write_then_kill(db: Path, campaign_id: str, commits: int, *, batch: int = 50,
                           mid_batch: bool = False) -> Acknowledged:
    """Run the writer until it acknowledged ``commits`` transactions (and, with ``mid_batch``, has just begun a
    sample batch), then SIGKILL it. Returns every acknowledgement, including lines flushed before the kill."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WRITER), str(db), campaign_id, str(batch), cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    acked = Acknowledged(batch)
    try:
        first = await asyncio.wait_for(proc.stdout.readline(), LINE_TIMEOUT_S)
        assert first == b"ready\n", first + await proc.stderr.read()
        kind = ""
        while acked.count < commits or (mid_batch and kind != "begin"):
            line = await asyncio.wait_for(proc.stdout.readline(), LINE_TIMEOUT_S)
            assert line, await proc.stderr.read()
            kind = acked.take(line.decode())
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
    assert await proc.wait() == -signal.SIGKILL
    for rest in (await proc.stdout.read()).decode().splitlines():  # written before the kill: acknowledged too
        acked.take(rest)
    return acked


@pytest.mark.parametrize(("commits", "batch", "mid_batch"), [
    (1, 50, False), (17, 50, False), (90, 50, False),
    # a 20,000-sample batch takes long enough that the kill lands inside its transaction
    (1, 20_000, True), (7, 20_000, True),
])
async def test_kill_9_mid_campaign_loses_at_most_the_transaction_in_flight(
    tmp_path: Path, commits: int, batch: int, mid_batch: bool
) -> None:
    db = tmp_path / "crash.sqlite3"
    acked = await _write_then_kill(db, "c1", commits, batch=batch, mid_batch=mid_batch)
    assert acked.count >= commits

    async with await SqliteStore.open(db) as store:
        assert integrity(db) == ["ok"]
        runs = {run.run_id: run for run in await store.runs(campaign_id="c1")}
        sampled = {run_id: len(await store.gpu_samples(run_id=run_id)) for run_id in runs}
        # every acknowledged transaction is there
        assert acked.started <= set(runs)
        assert all(sampled[run_id] == batch for run_id in acked.sampled)
        for run_id, throughput in acked.finished.items():
            assert runs[run_id].status is RunStatus.OK and runs[run_id].throughput_units_per_s == throughput
        # a batch is whole or absent, and at most one committed transaction went unacknowledged
        assert set(sampled.values()) <= {0, batch}
        present = len(runs) + sum(1 for n in sampled.values() if n) + sum(
            1 for run in runs.values() if run.status is RunStatus.OK)
        assert acked.count <= present <= acked.count + 1
        # the store is usable after the crash: resume closes what was left running
        for run in await store.open_runs(campaign_id="c1"):
            await store.finish_run(run_id=run.run_id, status=RunStatus.INTERRUPTED, at=1e6, error="killed")
        assert await store.open_runs(campaign_id="c1") == []


async def test_host_knowledge_survives_two_killed_campaigns(tmp_path: Path) -> None:
    db = tmp_path / "crash.sqlite3"
    first = await _write_then_kill(db, "c1", 12)
    second = await _write_then_kill(db, "c2", 12)
    async with await SqliteStore.open(db) as store:
        [host] = await store.host_knowledge(workload_digest=DIGEST)   # one host key: machine 7, 1x RTX 4090
        assert (host.machine_id, host.gpu_name, host.num_gpus) == (7, "RTX 4090", 1)
        ok_runs = [run for run in host.runs if run.status is RunStatus.OK]
        measured = {run.run_id: run.throughput_units_per_s or 0.0 for run in ok_runs}
        assert {**first.finished, **second.finished}.items() <= measured.items()
        spread = await store.throughputs(machine_id=7, gpu_name="RTX 4090", num_gpus=1, workload_digest=DIGEST)
        assert sorted(spread) == sorted(measured.values())
        assert host.best is not None and host.best.throughput_units_per_s == max(measured.values())
        assert {run.campaign_id for run in ok_runs} == {"c1", "c2"}
