"""A workload that never finishes its canary cannot keep an instance billing past the deadline it was approved for;
one that exits while a child it started holds its output open ends its canary when it exits."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.campaign.campaign_support import destroys_past_deadline, fast_manifest, first_destroys
from vastui.sim.demo import run_demo
from vastui.sim.market import Market


def _with_command(path: Path, command: str) -> Path:
    text, count = re.subn(r"(?m)^command = .*$", f"command = {command}", path.read_text(encoding="utf-8"))
    assert count == 1
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize(("name", "command", "why"), [
    # prints its output, then ignores VASTUI_STEPS and never ends: only the deadline stops the canary
    ("hangs", '["sh", "-c", "echo ok; exec sleep 100000"]', "did not finish before the instance's deadline"),
    # exits at once, leaving a child that holds stdout: the canary ends when the workload does (wrong output)
    ("leaves a child", '["sh", "-c", "echo ok; sleep 100000 & exit 0"]', "wrong output"),
])
async def test_a_canary_that_never_ends_is_stopped_by_the_deadline(tmp_path: Path, name: str, command: str,
                                                                   why: str) -> None:
    destroyed_at: dict[int, float] = {}

    async def capture(market: Market) -> None:
        destroyed_at.update(first_destroys(market.request_log))

    manifest = _with_command(fast_manifest(tmp_path / "m", max_candidates=2, max_lifetime_s=1800), command)
    # (a guard, not a speed check: before the fix this campaign never ended)
    result = await asyncio.wait_for(run_demo(seed=3, time_scale=300.0, data_dir=tmp_path / "data",
                                             manifest_path=manifest, on_market=capture), timeout=600)
    rented = [r for r in result.outcome.runs if r.instance_id is not None]
    assert rented, "the campaign rented nothing to test"
    assert all(r.phase == "failed" and why in r.detail for r in rented), [(r.phase, r.detail) for r in rented]
    assert result.receipt.decision.chosen is None
    assert result.instances_left == 0 and result.receipt.teardown_passed
    assert await destroys_past_deadline(result.db_path, result.receipt.campaign_id, destroyed_at) == []
