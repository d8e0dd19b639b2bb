"""The leak watcher against the simulated marketplace (in-process ASGI and a loopback SimServer) and a real SQLite
store: which instances are leaked and why, what they cost, "unknown" for an incomplete listing, and
``vastui leaks --destroy`` with its approvals and audit log."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.campaign.leak_world import new_campaign, rent, rent_owned
from tests.fakes import FakeAudit, FakeClock
from vastui.approval import AuditKind, AuditRecord
from vastui.campaign.approvers import AuditedApprover
from vastui.campaign.owner import current_owner
from vastui.campaign.watch import (
    LeakReason,
    LeakVerdict,
    ListedDestroyApprover,
    campaign_of_label,
    destroy_leaks,
    find_leaks,
)
from vastui.cli import main
from vastui.config import Secret, load_settings
from vastui.events import EventBus
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer
from vastui.sim.turns import LifecycleOdds
from vastui.store import SqliteStore
from vastui.vast.client import HttpVastClient

KEY = "watch-sim-key-5555"
# Every realism rule but the rate limits: this market's clock stands still (the tests move it by hand), and a
# minimum interval measured on a clock that never moves would refuse every second request for ever.
FROZEN_CLOCK_REALISM = dataclasses.replace(Realism.vast(), rate_limits=False)
HOUR = 3600.0


class FailingPagesTransport(httpx.AsyncBaseTransport):
    """Forwards to the simulator, but every instance-listing page after the first fails in transit."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.fail_later_pages = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.fail_later_pages and "/instances/" in request.url.path and b"after_token" in request.url.query:
            raise httpx.ConnectError("connection reset on page 2", request=request)
        return await self.inner.handle_async_request(request)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    market = build_market(7, clock=clock, api_key=KEY, n_machines=120,
                          realism=FROZEN_CLOCK_REALISM)
    market.lifecycle_odds = LifecycleOdds.never()   # the rentals are set-up here; the watcher is under test
    return market


@pytest.fixture
def transport(market: Market) -> FailingPagesTransport:
    return FailingPagesTransport(httpx.ASGITransport(app=create_app(market)))


@pytest.fixture
async def client(transport: FailingPagesTransport, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=transport) as c:
        yield c


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with await SqliteStore.open(tmp_path / "watch.sqlite3") as s:
        yield s


# --- what is a leak -----------------------------------------------------------------------------------------


async def test_a_finished_campaigns_instance_is_leaked_with_its_cost(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    await new_campaign(store, "cdone", at=clock.now(), finished=True)
    bound = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    by_label_only = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None, candidate="c1",
                                     bind=False)
    clock.advance(2 * HOUR)
    report = await find_leaks(market=client, store=store, clock=clock)

    assert report.is_complete and report.verdict is LeakVerdict.LEAKING
    leaks = {leak.instance_id: leak for leak in report.leaks}
    assert set(leaks) == {bound, by_label_only}
    leak = leaks[bound]
    assert leak.reason is LeakReason.CAMPAIGN_FINISHED and leak.campaign_id == "cdone"
    assert leak.label is not None and campaign_of_label(leak.label) == "cdone"
    state = market.instance_state(bound)
    assert state is not None and leak.accrued_usd is not None
    dph = state.dph_total
    assert leak.dph_total == pytest.approx(dph, rel=1e-5) and leak.burn_usd_per_h == leak.dph_total
    assert leak.accrued_usd == pytest.approx(2 * dph, rel=1e-4)
    # list price for the whole time bounds what the simulator billed for time (no GPU while loading); traffic
    # (the image pull) is billed per GB on top and is not in the listing
    charges = market.charges_of(bound)
    assert 0 < charges.gpu_usd + charges.storage_usd <= leak.accrued_usd + 1e-9
    assert charges.total_usd > charges.gpu_usd + charges.storage_usd
    assert report.burn_usd_per_h == pytest.approx(sum(lk.dph_total or 0 for lk in report.leaks))
    assert "2 leaked instance(s)" in report.summary()


async def test_an_active_campaigns_instance_leaks_only_past_its_deadline(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    await new_campaign(store, "clive", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    soon = await rent_owned(market, store, "clive", at=clock.now(), deadline_at=clock.now() + 0.5 * HOUR)
    later = await rent_owned(market, store, "clive", at=clock.now(), deadline_at=clock.now() + 4 * HOUR,
                             candidate="c1")
    first = await find_leaks(market=client, store=store, clock=clock)
    assert first.verdict is LeakVerdict.CLEAN and first.leaks == () and first.listed_count == 2

    clock.advance(HOUR)
    second = await find_leaks(market=client, store=store, clock=clock)
    assert [(leak.instance_id, leak.reason) for leak in second.leaks] == [(soon, LeakReason.PAST_DEADLINE)]
    assert "30.0 min past its deadline" in second.leaks[0].detail
    assert later not in {leak.instance_id for leak in second.leaks}


async def test_a_crashed_campaigns_instance_is_leaked_even_before_its_deadline(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    await new_campaign(store, "ccrash", at=clock.now())
    await store.set_campaign_phase(campaign_id="ccrash", phase="crashed", at=clock.now())
    iid = await rent_owned(market, store, "ccrash", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    report = await find_leaks(market=client, store=store, clock=clock)
    assert [(leak.instance_id, leak.reason) for leak in report.leaks] == [(iid, LeakReason.CAMPAIGN_CRASHED)]


async def test_an_active_campaign_whose_console_is_gone_is_leaked_even_before_its_deadline(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    # The phase still says "measuring" (a console killed with SIGKILL writes nothing more); the claim's process
    # has ended, so the instance is nobody's to clean up but resume's.
    await new_campaign(store, "cdead", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    await new_campaign(store, "clive", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    await store.claim_campaign(replace(current_owner("cdead", at=clock.now()), pid=dead.pid))
    await store.claim_campaign(current_owner("clive", at=clock.now()))   # this test's own process: alive
    orphan = await rent_owned(market, store, "cdead", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    await rent_owned(market, store, "clive", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    report = await find_leaks(market=client, store=store, clock=clock)
    assert [(leak.instance_id, leak.reason) for leak in report.leaks] == [(orphan, LeakReason.CAMPAIGN_CRASHED)]
    assert "console is gone" in report.leaks[0].detail and "campaign resume cdead" in report.leaks[0].detail


async def test_a_stopped_instance_still_bills_storage_and_is_leaked(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    await new_campaign(store, "clive", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    iid = await rent_owned(market, store, "clive", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    await market.set_state([iid], "stopped")
    storage_before = market.charges_of(iid).storage_usd
    clock.advance(HOUR)
    report = await find_leaks(market=client, store=store, clock=clock)
    assert market.charges_of(iid).storage_usd > storage_before  # the premise: stopped still costs money
    assert [(leak.instance_id, leak.reason, leak.status) for leak in report.leaks] == [
        (iid, LeakReason.STOPPED_BILLING, "stopped")]


async def test_an_instance_vastui_never_made_is_unowned_not_leaked(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    mine, _ = await rent(market, "operator-notebook")
    unlabelled, _ = await rent(market, None)
    ghost, _ = await rent(market, "vastui-cghost-c0-1")  # vastui's label, but no such campaign in this store
    report = await find_leaks(market=client, store=store, clock=clock)
    reasons = {leak.instance_id: leak.reason for leak in report.leaks}
    assert reasons == {mine: LeakReason.UNOWNED, unlabelled: LeakReason.UNOWNED,
                       ghost: LeakReason.CAMPAIGN_UNKNOWN}
    assert {leak.instance_id for leak in report.unowned} == {mine, unlabelled}
    assert [leak.instance_id for leak in report.leaked] == [ghost]


async def test_owned_instances_the_listing_no_longer_shows_are_reported(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    await new_campaign(store, "clive", at=clock.now(), deadline_at=clock.now() + 10 * HOUR)
    gone = await rent_owned(market, store, "clive", at=clock.now(), deadline_at=clock.now() + HOUR)
    await market.destroy([gone])
    pending = await store.record_intent(campaign_id="clive", offer_id=1, label="vastui-clive-c9-1", at=clock.now())
    report = await find_leaks(market=client, store=store, clock=clock)
    assert report.verdict is LeakVerdict.CLEAN
    assert {(u.instance_id, u.intent_status) for u in report.unlisted} == {(gone, "bound"), (None, "pending")}
    assert pending.label in {u.label for u in report.unlisted}


# --- incomplete is unknown ------------------------------------------------------------------------------------


async def test_a_failed_second_page_makes_the_report_unknown_not_clean(
        market: Market, client: HttpVastClient, transport: FailingPagesTransport, store: SqliteStore,
        clock: FakeClock) -> None:
    await new_campaign(store, "cdone", at=clock.now(), finished=True)
    for _ in range(26):  # a full first page (25) of the operator's own instances
        await rent(market, "operator-batch")
    hidden = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None)  # on page 2
    owned_elsewhere = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None, candidate="c1")
    await market.destroy([owned_elsewhere])  # absent, but an incomplete listing must not say so

    transport.fail_later_pages = True
    report = await find_leaks(market=client, store=store, clock=clock)
    assert not report.is_complete and report.verdict is LeakVerdict.UNKNOWN
    assert report.error and "page 2" in report.error
    assert report.listed_count == 25 and report.leaked == () and report.unlisted == ()
    assert "UNKNOWN" in report.summary() and "no leaks" not in report.summary()

    transport.fail_later_pages = False
    complete = await find_leaks(market=client, store=store, clock=clock)
    assert complete.verdict is LeakVerdict.LEAKING and [leak.instance_id for leak in complete.leaked] == [hidden]
    assert [u.instance_id for u in complete.unlisted] == [owned_elsewhere]


async def test_a_listing_the_marketplace_refuses_is_unknown(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    await rent(market, "operator")
    market.chaos.error_5xx_rate = 1.0
    report = await find_leaks(market=client, store=store, clock=clock)
    assert report.verdict is LeakVerdict.UNKNOWN and report.listed_count == 0 and report.error


# --- destroying -----------------------------------------------------------------------------------------------


async def test_destroy_leaks_takes_exactly_the_approved_ids_and_proves_them_gone(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    await new_campaign(store, "cdone", at=clock.now(), finished=True)
    approved = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None)
    not_approved = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None, candidate="c1")
    report = await find_leaks(market=client, store=store, clock=clock)
    audit = FakeAudit()
    approver = AuditedApprover(ListedDestroyApprover([approved], clock=clock),
                               audit=audit, clock=clock)
    result = await destroy_leaks(market=client, store=store, approver=approver, clock=clock, bus=EventBus(),
                                 leaks=report.leaked, poll_s=1.0)
    assert [g.instance_id for g in result.gone] == [approved] and result.refused == [not_approved]
    assert market.instance_ids() == [not_approved]
    assert [(r.kind, r.target) for r in audit.records] == [(AuditKind.APPROVAL, f"instance:{approved}"),
                                                           (AuditKind.DECLINED, f"instance:{not_approved}")]
    evidence = await store.destroy_evidence()
    assert [(e.instance_id, e.campaign_id, len(e.missed_listing_at)) for e in evidence] == [(approved, "cdone", 2)]


# --- vastui leaks ------------------------------------------------------------------------------------------------


@pytest.fixture
def wall_market() -> Market:
    """A market on a clock two hours behind the wall clock: ``cli_world`` rents, then moves it to the wall time."""
    market = build_market(7, clock=FakeClock(start=time.time() - 2 * HOUR), api_key=KEY, n_machines=120,
                          realism=FROZEN_CLOCK_REALISM)
    market.lifecycle_odds = LifecycleOdds.never()
    return market


@pytest.fixture
async def server(wall_market: Market) -> AsyncIterator[SimServer]:
    async with SimServer(wall_market, poll=False) as running:
        yield running


async def cli_world(market: Market) -> dict[str, int]:
    """A store at the CLI's own path: a finished campaign's instance, one past its deadline, one in time, one
    unowned; all rented two hours ago by the market's clock, which now reads the wall clock's time."""
    now = time.time()
    async with await SqliteStore.open(load_settings().db_path) as store:
        await new_campaign(store, "cdone", at=now - 3 * HOUR, finished=True)
        await new_campaign(store, "clive", at=now - 3 * HOUR, deadline_at=now + HOUR)
        ids = {
            "finished": await rent_owned(market, store, "cdone", at=now, deadline_at=None),
            "late": await rent_owned(market, store, "clive", at=now, deadline_at=now - 60),
            "in_time": await rent_owned(market, store, "clive", at=now, deadline_at=now + HOUR, candidate="c1"),
        }
    ids["unowned"] = (await rent(market, "operator-notebook"))[0]
    assert isinstance(market.clock, FakeClock)
    market.clock.advance(2 * HOUR)
    return ids


async def audit_log() -> list[AuditRecord]:
    async with await SqliteStore.open(load_settings().db_path) as store:
        return await store.audit_records()


def cli_args(server: SimServer, *extra: str) -> list[str]:
    return ["leaks", "--url", server.url, "--api-key", KEY, "--poll-interval", "0.02", *extra]


async def test_leaks_destroy_yes_destroys_exactly_the_leaked_and_audits_it(
        server: SimServer, wall_market: Market, capsys: pytest.CaptureFixture[str]) -> None:
    ids = await cli_world(wall_market)
    code = await asyncio.to_thread(main, cli_args(server, "--destroy", "--yes", "--json"))
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert wall_market.instance_ids() == sorted([ids["in_time"], ids["unowned"]])
    assert {leak["instance_id"]: leak["reason"] for leak in out["leaks"]} == {
        ids["finished"]: "campaign_finished", ids["late"]: "past_deadline", ids["unowned"]: "unowned"}
    finished = next(leak for leak in out["leaks"] if leak["instance_id"] == ids["finished"])
    assert finished["accrued_usd"] == pytest.approx(2 * finished["dph_total"], rel=0.01)
    assert sorted(g["instance_id"] for g in out["destroy"]["gone"]) == sorted([ids["finished"], ids["late"]])
    records = await audit_log()
    approvals = {(r.target, r.campaign_id) for r in records if r.kind is AuditKind.APPROVAL}
    assert approvals == {(f"instance:{ids['finished']}", "cdone"), (f"instance:{ids['late']}", "clive")}
    assert all(r.granted_by == "vastui leaks --destroy --yes" for r in records if r.kind is AuditKind.APPROVAL)
    calls = {r.target: r.outcome for r in records if r.kind is AuditKind.CALL}
    assert calls == {f"instance:{ids['finished']}": "ok", f"instance:{ids['late']}": "ok"}
    async with await SqliteStore.open(load_settings().db_path) as store:
        assert {e.instance_id for e in await store.destroy_evidence()} == {ids["finished"], ids["late"]}

    again = await asyncio.to_thread(main, cli_args(server))
    assert again == 0 and "no leaks among 2 listed" in capsys.readouterr().out


async def test_leaks_destroy_without_a_terminal_or_yes_refuses_and_destroys_nothing(
        server: SimServer, wall_market: Market, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ids = await cli_world(wall_market)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\ny\ny\n"))  # a "yes" on a pipe is nobody's approval
    code = await asyncio.to_thread(main, cli_args(server, "--destroy"))
    captured = capsys.readouterr()
    assert code == 4
    assert "not a terminal" in captured.err and "--yes" in captured.err
    assert "past_deadline" in captured.out and "campaign_finished" in captured.out
    assert wall_market.instance_ids() == sorted(ids.values())
    assert not [r for r in wall_market.request_log if r.method == "DELETE"]
    records = await audit_log()
    assert {r.kind for r in records} == {AuditKind.DECLINED} and len(records) == 2


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_leaks_destroy_on_a_terminal_asks_for_each(
        server: SimServer, wall_market: Market, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ids = await cli_world(wall_market)
    monkeypatch.setattr("sys.stdin", FakeTerminal("y\nn\n"))  # finished (lower id) first: yes; late: no
    code = await asyncio.to_thread(main, cli_args(server, "--destroy"))
    captured = capsys.readouterr()
    assert code == 4
    assert captured.err.count("[y/N]") == 2
    assert wall_market.instance_ids() == sorted([ids["late"], ids["in_time"], ids["unowned"]])
    kinds = {r.target: (r.kind, r.granted_by) for r in await audit_log()
             if r.kind in (AuditKind.APPROVAL, AuditKind.DECLINED)}
    assert kinds == {f"instance:{ids['finished']}": (AuditKind.APPROVAL, "interactive prompt"),
                     f"instance:{ids['late']}": (AuditKind.DECLINED, None)}


async def test_leaks_with_an_incomplete_listing_exits_unknown(
        server: SimServer, wall_market: Market, capsys: pytest.CaptureFixture[str]) -> None:
    await cli_world(wall_market)
    wall_market.chaos.error_5xx_rate = 1.0
    code = await asyncio.to_thread(main, cli_args(server, "--json"))
    captured = capsys.readouterr()
    assert code == 3
    body = json.loads(captured.out)
    assert body["verdict"] == "unknown" and body["is_complete"] is False
    assert "UNKNOWN" in captured.err
