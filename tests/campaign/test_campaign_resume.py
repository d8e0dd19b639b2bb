"""A console killed with SIGKILL at random points, then `vastui campaign resume`: zero leaked instances and every
measurement kept. The marketplace is a separate `vastui sim` process that outlives the console, as Vast.ai would."""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.campaign.sim_process import alive, operator_key, register_key, sim_process

KEY = "resume-test-key"
TIME_SCALE = "300"
KILLS = 10
VASTUI = [sys.executable, "-m", "vastui"]


@pytest.fixture
async def sim_url() -> AsyncIterator[str]:
    async with sim_process(key=KEY, time_scale=TIME_SCALE) as url:
        yield url


def _counts(db: Path) -> tuple[int, int, int]:
    if not db.exists():
        return (0, 0, 0)
    with sqlite3.connect(db) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                     for table in ("runs", "progress", "gpu_samples"))


def _common(url: str, db: Path, key: Path) -> list[str]:
    return ["--url", url, "--api-key", KEY, "--db", str(db), "--ssh-key", str(key), "--time-scale", TIME_SCALE]


async def _run_and_kill(args: list[str], *, kill_after_lines: int) -> tuple[str | None, int]:
    """Start a campaign and SIGKILL it after ``kill_after_lines`` lines of progress (or let it finish)."""
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    assert proc.stdout is not None
    campaign_id, seen = None, 0
    async with asyncio.timeout(240):
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                break
            if campaign_id is None and (m := re.match(r"campaign (c[0-9a-f]+) ", line)):
                campaign_id = m.group(1)
            seen += 1
            if seen >= kill_after_lines:
                proc.send_signal(signal.SIGKILL)
                break
        await proc.wait()
    return campaign_id, seen


@pytest.mark.slow
async def test_sigkill_at_random_points_then_resume_leaks_nothing(sim_url: str, tmp_path: Path) -> None:
    key = operator_key(tmp_path)
    await register_key(sim_url, KEY, key)
    manifest = fast_manifest(tmp_path / "m")
    rng = random.Random(20261130)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    os.environ.update(env)
    resumed = cleaned = 0
    for attempt in range(KILLS):
        db = tmp_path / f"store-{attempt}.sqlite3"
        args = [*VASTUI, "campaign", "run", str(manifest), "--approve-plan", *_common(sim_url, db, key)]
        campaign_id, seen = await _run_and_kill(args, kill_after_lines=rng.randint(2, 45))
        before = _counts(db)
        if campaign_id is None:
            assert await alive(sim_url, KEY) == [], "killed before the plan: nothing may have been rented"
            continue
        cleaned += bool(await alive(sim_url, KEY))
        resume = subprocess.run([*VASTUI, "campaign", "resume", campaign_id, "--approve-plan",
                                 *_common(sim_url, db, key)], capture_output=True, text=True, timeout=180,
                                stdin=subprocess.DEVNULL)
        if "no campaign" in resume.stderr:
            # killed after the plan was printed but before the campaign was recorded: nothing was rented either
            assert await alive(sim_url, KEY) == []
            continue
        assert resume.returncode == 0, resume.stdout + resume.stderr
        resumed += 1
        assert await alive(sim_url, KEY) == [], f"attempt {attempt}: instances left after resume"
        after = _counts(db)
        assert after == before, "resume must keep every measurement (and add none)"
    assert resumed >= KILLS // 2
    assert cleaned >= 3, "too few kills left instances behind for resume to prove anything"
