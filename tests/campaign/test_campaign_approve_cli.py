"""`vastui campaign approve` / `refuse`, run as the operator runs them (a separate process on the store's file)
against a broker keeping a detached campaign's requests: it lists them with their facts, approves with --yes (the
broker grants it, audited as given by that process), refuses to approve without a terminal and without --yes,
refuses with --all, and says clearly when a campaign is unknown, has nothing pending, or a request is not pending
(already answered, or expired on the broker's wall clock)."""

from __future__ import annotations

import asyncio
import os
import pty
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.campaign.campaign_support import ManualClock
from tests.campaign.test_campaign_kept_requests import rent
from tests.fakes import FakeClock
from tests.waiting import until
from vastui.approval import Approval, ApprovalRequest, AuditKind
from vastui.campaign.approvers import PlanTerms
from vastui.campaign.broker import ApprovalBroker
from vastui.events import EventBus
from vastui.store import RequestState, SqliteStore

CAMPAIGN = "ckept"   # the campaign of test_campaign_kept_requests's requests
EXPIRY_S = 600.0
CLI_WAIT_S = 120.0   # a Python process starting on a busy machine


@dataclass
class Cli:
    rc: int
    out: str
    err: str
    pid: int


@dataclass
class Rig:
    db: Path
    broker: ApprovalBroker
    store: SqliteStore
    wall: ManualClock

    async def cli(self, *argv: str) -> Cli:
        """The command in its own process, stdin not a terminal (as in a script or CI)."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vastui", "campaign", *argv, "--db", str(self.db),
            env={**os.environ, "VASTUI_OPERATOR": "bo"}, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), CLI_WAIT_S)
        assert proc.returncode is not None
        return Cli(proc.returncode, out.decode(), err.decode(), proc.pid)

    def ask(self, request: ApprovalRequest) -> asyncio.Task[Approval | None]:
        return asyncio.create_task(self.broker.request(request))

    def kept(self, count: int, state: RequestState = RequestState.PENDING) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return len(await self.store.kept_requests(CAMPAIGN, state=state)) == count
        return check


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    db = tmp_path / "vastui.sqlite3"
    wall = ManualClock()
    async with await SqliteStore.open(db) as store:
        await store.save_manifest(digest="d1", name="resnet", toml_text='name = "resnet"', stored_at=1.0)
        await store.create_campaign(campaign_id=CAMPAIGN, manifest_digest="d1", created_at=1.0, phase="measure")
        terms = PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset(), max_spend_usd=4.0)
        broker = ApprovalBroker(clock=FakeClock(), bus=EventBus(), audit=store, terms=terms, expiry_s=EXPIRY_S,
                                wall=wall)
        broker.keep_for_command(store, campaign_id=CAMPAIGN)   # epoch: the real clock, as the command's
        yield Rig(db, broker, store, wall)
        await broker.stop_keeping("the test ended")


async def test_lists_then_approves_with_yes_and_refuses_without_a_terminal(rig: Rig) -> None:
    first, second = rig.ask(rent(777, cap=2.5)), rig.ask(rent(778))
    await until(rig.kept(2), "two requests kept")
    [r1, r2] = [k.request_id for k in await rig.store.kept_requests(CAMPAIGN)]

    listed = await rig.cli("approve", CAMPAIGN)
    assert listed.rc == 0, listed.err
    row = next(line for line in listed.out.splitlines() if line.strip().startswith(r1))
    for fact in ("create_instance", "offer:777", "rent 777", "2.50", "RTX_4090", "0.550", "9m"):
        assert fact in row, (fact, row)
    assert any(line.strip().startswith(r2) for line in listed.out.splitlines())

    unconfirmed = await rig.cli("approve", CAMPAIGN, r1)
    assert unconfirmed.rc == 1 and "stdin is not a terminal" in unconfirmed.err and "--yes" in unconfirmed.err
    assert len(await rig.store.kept_requests(CAMPAIGN, state=RequestState.PENDING)) == 2, "nothing answered"

    approved = await rig.cli("approve", CAMPAIGN, r1, "--yes")
    assert approved.rc == 0, approved.err
    assert f"approved: {r1}" in approved.out
    await until(lambda: first.done(), "the broker to grant it", between=lambda: rig.wall.advance(1.0))
    approval = first.result()
    assert isinstance(approval, Approval) and approval.request.target == "offer:777"
    assert approval.granted_by == f"bo@{socket.gethostname()}: vastui campaign approve (pid {approved.pid})"
    [audit] = await rig.store.audit_records(campaign_id=CAMPAIGN)
    assert audit.kind is AuditKind.APPROVAL and audit.granted_by == approval.granted_by
    assert not second.done()

    again = await rig.cli("approve", CAMPAIGN, r1, "--yes")
    assert again.rc == 1 and f"{r1}: not pending, already granted" in again.err

    refused = await rig.cli("refuse", CAMPAIGN, "--all")
    assert refused.rc == 0, refused.err
    await until(lambda: second.done(), "the broker to refuse it", between=lambda: rig.wall.advance(1.0))
    assert second.result() is None
    nothing = await rig.cli("approve", CAMPAIGN)
    assert nothing.rc == 3 and "no pending request" in nothing.err


async def test_on_a_terminal_approving_waits_for_a_typed_yes(rig: Rig) -> None:
    waiting = rig.ask(rent(777))
    await until(rig.kept(1), "the request kept")
    [kept] = await rig.store.kept_requests(CAMPAIGN)
    master, slave = pty.openpty()
    try:
        for typed, rc in ((b"n\n", 1), (b"yes\n", 0)):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "vastui", "campaign", "approve", CAMPAIGN, kept.request_id, "--db", str(rig.db),
                stdin=slave, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            assert proc.stderr is not None
            asked = b""
            while b"[y/N]" not in asked:   # answer only once the question is on the screen
                chunk = await asyncio.wait_for(proc.stderr.read(4096), CLI_WAIT_S)
                assert chunk, f"the command ended without asking: {asked.decode()}"
                asked += chunk
            assert b"Approve these 1 request(s), spending at most $1.00 in all?" in asked
            os.write(master, typed)
            out, err = await asyncio.wait_for(proc.communicate(), CLI_WAIT_S)
            assert proc.returncode == rc, (out.decode(), err.decode())
            if rc:
                assert b"not approved; nothing changed" in err
                [row] = await rig.store.kept_requests(CAMPAIGN)
                assert row.state is RequestState.PENDING and not waiting.done()
    finally:
        os.close(master)
        os.close(slave)
    await until(lambda: waiting.done(), "the broker to grant it", between=lambda: rig.wall.advance(1.0))
    approval = waiting.result()
    assert isinstance(approval, Approval) and " vastui campaign approve (pid " in approval.granted_by


async def test_an_expired_request_cannot_be_approved_and_errors_are_clear(rig: Rig) -> None:
    waiting = rig.ask(rent(777))
    await until(rig.kept(1), "the request kept")
    [kept] = await rig.store.kept_requests(CAMPAIGN)
    rig.wall.advance(EXPIRY_S)   # the operator's time is up
    assert await asyncio.wait_for(waiting, CLI_WAIT_S) is None
    await until(rig.kept(1, RequestState.EXPIRED), "the row marked expired")

    late = await rig.cli("approve", CAMPAIGN, kept.request_id, "--yes")
    assert late.rc == 1 and f"{kept.request_id}: not pending, already expired" in late.err
    [row] = await rig.store.kept_requests(CAMPAIGN)
    assert row.state is RequestState.EXPIRED

    # a row its broker never settled (its process died): past its expiry, the command does not grant it either
    await rig.store.keep_request(campaign_id=CAMPAIGN, request_id="r50", action="create_instance", target="offer:9",
                                 summary="rent 9", cost_cap_usd=1.0, gpu_name=None, num_gpus=None, dph_usd=None,
                                 deadline_at=None, asked_at=time.time() - 1000.0, expires_at=time.time() - 100.0)
    stale = await rig.cli("approve", CAMPAIGN, "r50", "--yes")
    assert stale.rc == 1 and "r50: expired 1m4" in stale.err, stale.err
    assert [k.state for k in await rig.store.kept_requests(CAMPAIGN)][-1] is RequestState.PENDING

    unknown_request = await rig.cli("refuse", CAMPAIGN, "r99")
    assert unknown_request.rc == 1 and f"r99: no such request in campaign {CAMPAIGN}" in unknown_request.err
    none_left = await rig.cli("refuse", CAMPAIGN, "--all")
    assert none_left.rc == 3 and "no pending request" in none_left.err
    unknown = await rig.cli("approve", "cnosuch")
    assert unknown.rc == 1 and "Unknown campaign" in unknown.err and "cnosuch" in unknown.err
    both = await rig.cli("approve", CAMPAIGN, kept.request_id, "--all")
    assert both.rc == 2

    await rig.store.finish_campaign(campaign_id=CAMPAIGN, phase="finished", at=2.0)
    finished = await rig.cli("approve", CAMPAIGN)
    assert finished.rc == 1 and f"campaign {CAMPAIGN} has finished: its requests can no longer be answered" in (
        finished.err)


async def test_help_teaches_with_an_example_and_the_exit_codes(rig: Rig) -> None:
    shown = await rig.cli("approve", "--help")
    assert shown.rc == 0
    assert "vastui campaign approve c1a2b3c4 r3 r5" in shown.out and "exit status:" in shown.out
    assert "3 the campaign has no pending request" in " ".join(shown.out.split())
