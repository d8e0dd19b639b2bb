"""A whole demo campaign approved at a real terminal (a pty), as an operator at ``vastui campaign run`` would: keys
typed before any question are thrown away, the rent questions come one at a time, and no destroy ever waits for
an answer — the campaign ends with nothing left running."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import select
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from vastui.campaign.approvers import PromptApprover
from vastui.cli.terminal import ask_on_terminal
from vastui.events import Event, InstanceRented
from vastui.events_live import ApprovalAnswered
from vastui.sim.demo import open_demo

TIME_SCALE = 100.0
WAIT_S = 120.0


@pytest.fixture
def pty_pair() -> Iterator[tuple[int, int]]:
    master, slave = pty.openpty()
    try:
        yield master, slave
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.slow
async def test_a_campaign_approved_at_a_terminal_asks_one_rent_at_a_time_and_never_a_destroy(
        tmp_path: Path, pty_pair: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty_pair
    monkeypatch.setattr(sys, "stdin", os.fdopen(slave, "r", encoding="utf-8", closefd=False))
    screen = io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)
    os.write(master, b"y\ny\ny\n")   # typed before anything was asked
    assert select.select([slave], [], [], 5)[0]
    async with open_demo(seed=2, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=fast_manifest(tmp_path / "m")) as demo:
        events: list[Event] = []
        demo.services.bus.listen(events.append)
        clock = demo.services.clock
        handle = demo.start(operator=PromptApprover(ask_on_terminal, clock=clock))
        answered = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while not handle.is_done:
            assert loop.time() < deadline, "the campaign did not finish"
            shown = screen.getvalue().count("[y/N]")
            assert shown <= answered + 1, "a second question appeared before the first was answered"
            if shown == answered + 1:
                os.write(master, b"y\n")
                answered += 1
            await asyncio.sleep(0.02)
        result = await handle.result()
        await demo.market.refresh()
        alive = list(demo.market.instance_ids())
    questions = [line for line in screen.getvalue().split("[y/N]") if line.strip()]
    assert questions and all("create_instance" in q and "destroy" not in q for q in questions)
    granted_rents = [e for e in events if isinstance(e, ApprovalAnswered) and e.granted
                     and e.action == "create_instance"]
    assert all(e.answered_by == "interactive prompt" for e in granted_rents)
    assert len(granted_rents) == answered == len(questions), "one question per rent; none answered by typed-ahead y"
    assert [e for e in events if isinstance(e, InstanceRented)], "the approved rents happened"
    destroys = [e for e in events if isinstance(e, ApprovalAnswered) and e.action == "destroy_instance"]
    assert destroys and all(e.granted and e.answered_by.startswith("own-instance rule") for e in destroys)
    assert result.receipt.teardown_passed and alive == []
