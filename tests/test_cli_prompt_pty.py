"""Terminal prompts on a real pseudo-terminal: input typed before a question appears is discarded, and prompts
for concurrent requests come one at a time, so a ``y`` meant for one never approves another."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import select
import sys
from collections.abc import Iterator

import pytest

from tests.fakes import FakeAudit
from tests.waiting import until
from vastui.approval import Action, ApprovalRequest, AuditKind, offer_target
from vastui.campaign.approvers import PromptApprover
from vastui.campaign.broker import ApprovalBroker
from vastui.cli.terminal import ask_on_terminal
from vastui.clock import WallClock
from vastui.events import EventBus

WAIT_S = 10.0


@pytest.fixture
def pty_pair() -> Iterator[tuple[int, int]]:
    master, slave = pty.openpty()
    try:
        yield master, slave
    finally:
        os.close(master)
        os.close(slave)


def on_terminal(monkeypatch: pytest.MonkeyPatch, slave: int) -> io.StringIO:
    """Make the pty's slave side stdin (called in the test body: pytest's own capture swaps streams before it)."""
    monkeypatch.setattr(sys, "stdin", os.fdopen(slave, "r", encoding="utf-8", closefd=False))
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    return stderr


def typed_ahead(master: int, text: bytes) -> None:
    """Type ``text`` and wait until the terminal holds it as unread input."""
    os.write(master, text)
    ready, _, _ = select.select([sys.stdin.fileno()], [], [], WAIT_S)
    assert ready, "the typed line never reached the terminal's input queue"


async def test_a_yes_typed_before_the_question_appears_is_discarded(pty_pair: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty_pair
    stderr = on_terminal(monkeypatch, slave)
    typed_ahead(master, b"y\n")
    answer = asyncio.create_task(ask_on_terminal("rent offer 501?"))
    await until(lambda: "[y/N]" in stderr.getvalue(), "the prompt")
    os.write(master, b"n\n")
    assert await asyncio.wait_for(answer, WAIT_S) is False


async def test_a_yes_typed_after_the_question_approves(pty_pair: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty_pair
    stderr = on_terminal(monkeypatch, slave)
    answer = asyncio.create_task(ask_on_terminal("rent offer 501?"))
    await until(lambda: "[y/N]" in stderr.getvalue(), "the prompt")
    os.write(master, b"yes\n")
    assert await asyncio.wait_for(answer, WAIT_S) is True


async def test_concurrent_requests_prompt_one_at_a_time_and_a_second_y_is_not_carried_over(
        pty_pair: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty_pair
    stderr = on_terminal(monkeypatch, slave)
    clock = WallClock()
    audit = FakeAudit()
    broker = ApprovalBroker(clock=clock, bus=EventBus(), audit=audit,
                            operator=PromptApprover(ask_on_terminal, clock=clock))
    requests = [ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(offer),
                                summary=f"rent offer {offer}", cost_cap_usd=1.0) for offer in (501, 502)]
    asks = [asyncio.create_task(broker.request(r)) for r in requests]
    await until(lambda: "[y/N]" in stderr.getvalue(), "the first prompt")
    await until(lambda: len(broker.pending()) == 2, "both requests pending")
    assert stderr.getvalue().count("[y/N]") == 1, "only one prompt on screen"
    first_offer = "501" if "offer 501" in stderr.getvalue() else "502"
    os.write(master, b"y\ny\n")   # one y for the question on screen, one typed ahead of the next question
    await until(lambda: stderr.getvalue().count("[y/N]") == 2, "the second prompt")
    os.write(master, b"n\n")
    results = [await asyncio.wait_for(task, WAIT_S) for task in asks]
    granted = [r.request.target for r in results if r is not None]
    assert granted == [offer_target(int(first_offer))], "the typed-ahead y must not approve the second rent"
    assert [r.kind for r in audit.records] == [AuditKind.APPROVAL, AuditKind.DECLINED]
