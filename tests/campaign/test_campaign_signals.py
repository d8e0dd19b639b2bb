"""SIGTERM and SIGHUP stop a running campaign the way Ctrl-C does: work stops, every instance is destroyed and
proven gone, the receipt is written, and the exit status says which signal (before, the process died on the spot
with its instances billing)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vastui.store import SqliteStore


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_a_signal_tears_the_campaign_down_before_the_process_ends(tmp_path: Path, signum: int) -> None:
    env = {**os.environ, "VASTUI_DATA_DIR": str(tmp_path / "data")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vastui", "demo", "--headless", "--seed", "3", "--time-scale", "300",
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    assert process.stdout is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(240):   # a guard against a hang, not a speed check
            while not any(": measuring" in line for line in seen):   # instances rented and working
                line = (await process.stdout.readline()).decode()
                assert line, "the demo ended before any candidate was measuring:\n" + "".join(seen)
                seen.append(line)
            process.send_signal(signum)
            rest = (await process.stdout.read()).decode()
            status = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    output = "".join(seen) + rest
    assert status == 128 + signum, output[-2000:]
    assert f"stopped by {signal.Signals(signum).name}" in output
    (db,) = (tmp_path / "data" / "demo").glob("*.sqlite3")
    store = await SqliteStore.open(db)
    try:
        (campaign,) = await store.campaigns()
        receipt = await store.latest_receipt(campaign.campaign_id)
    finally:
        await store.close()
    assert receipt is not None
    data = json.loads(receipt.json_text)
    assert data["teardown_passed"] is True and data["leaked_instance_ids"] == []
    assert data["destroyed"] and all(len(d["absent_in_listings_at"]) >= 2 for d in data["destroyed"])
