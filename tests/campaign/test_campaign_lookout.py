"""The leak watch as a service (``vastui watch``) against the simulated marketplace, a real SQLite store and a
webhook receiver on loopback: each condition alerts once, alerts survive a webhook that is down, a standing
approval destroys exactly what it covers, and a chaotic API loses no alert and gets no unapproved call."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.campaign.leak_world import new_campaign, rent, rent_owned
from tests.fakes import FakeClock
from tests.webhook_receiver import WebhookReceiver
from vastui.approval import AuditKind
from vastui.campaign.lookout import Lookout, RoundResult
from vastui.cli import main
from vastui.cli.webhook import WebhookSink
from vastui.config import Secret, StandingDestroy, WatchSettings, load_settings
from vastui.errors import StoreError
from vastui.sim.app import create_app
from vastui.sim.chaos import Chaos
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer
from vastui.sim.turns import LifecycleOdds
from vastui.store import SqliteStore
from vastui.vast.client import HttpVastClient

KEY = "lookout-sim-key-8080"
HOUR = 3600.0
ROUND_S = 300.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def market(clock: FakeClock) -> Market:
    # the market and the client share one clock that moves when someone sleeps on it (a backoff, a destroy's
    # proof) or a test advances it between rounds: so every realism rule can stay on, rate limits included
    market = build_market(23, clock=clock, api_key=KEY, n_machines=80, realism=Realism.vast())
    market.lifecycle_odds = LifecycleOdds.never()   # the rentals are set-up here; the watch is under test
    return market


@pytest.fixture
async def client(market: Market, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    async with HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                              transport=httpx.ASGITransport(app=create_app(market))) as c:
        yield c


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with await SqliteStore.open(tmp_path / "watch.sqlite3") as s:
        yield s


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver() as running:
        yield running


@pytest.fixture
async def sink(receiver: WebhookReceiver) -> AsyncIterator[WebhookSink]:
    async with WebhookSink(Secret(receiver.url)) as s:
        yield s


POLICY = StandingDestroy(older_than_s=HOUR, max_usd_per_h=50.0, labels=("scratch-*", "vastui-*"),
                         include_unowned=True, source="config.toml [watch.destroy]")


def lookout(client: HttpVastClient, store: SqliteStore, clock: FakeClock, sink: WebhookSink | None,
            log: list[str], *, policy: StandingDestroy | None = None, quiet_s: float = 24 * HOUR,
            runway_h: float = 0.0) -> Lookout:
    settings = WatchSettings(interval_s=ROUND_S, quiet_s=quiet_s, runway_h=runway_h, destroy=policy)
    return Lookout(market=client, store=store, clock=clock, settings=settings, sink=sink, log=log.append,
                   poll_s=5.0)


async def rounds(watch: Lookout, clock: FakeClock, count: int) -> list[RoundResult]:
    results = []
    for _ in range(count):
        results.append(await watch.round())
        clock.advance(ROUND_S)
    return results


async def approvals(store: SqliteStore) -> dict[str, str | None]:
    return {r.target: r.granted_by for r in await store.audit_records() if r.kind is AuditKind.APPROVAL}


def deletes(market: Market) -> set[int]:
    return {i for r in market.request_log if r.method == "DELETE" for i in r.target_ids}


# --- a standing approval, and what it may destroy ---------------------------------------------------------------


@pytest.mark.parametrize(("policy", "destroyed"), [
    pytest.param(POLICY, {"old_scratch"}, id="the-approval-covers-it"),
    pytest.param(None, set(), id="no-approval"),
    pytest.param(dataclasses.replace(POLICY, include_unowned=False), set(), id="approval-for-vastuis-own-only"),
    pytest.param(dataclasses.replace(POLICY, max_usd_per_h=0.01), set(), id="dearer-than-the-approval"),
])
async def test_a_hand_rented_instance_past_the_policys_age_is_reported_once_and_destroyed_only_when_approved(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock, sink: WebhookSink,
        receiver: WebhookReceiver, policy: StandingDestroy | None, destroyed: set[str]) -> None:
    ids = {"old_scratch": (await rent(market, "scratch-1"))[0],
           "old_notebook": (await rent(market, "notebook-ana"))[0]}   # no label of the approval's
    clock.advance(2 * HOUR)
    ids["young_scratch"] = (await rent(market, "scratch-2"))[0]       # under the approval's hour throughout
    log: list[str] = []
    watch = lookout(client, store, clock, sink, log, policy=policy)
    await rounds(watch, clock, 4)

    gone = {name for name, iid in ids.items() if iid not in market.instance_ids()}
    assert gone == destroyed
    assert deletes(market) == {ids[name] for name in destroyed}
    reported = [key for key in receiver.keys() if key.startswith("unowned:")]
    assert sorted(reported) == sorted(f"unowned:{iid}" for iid in ids.values())   # each once, in four rounds
    assert [key for key in receiver.keys() if key.startswith("destroyed:")] == [
        f"destroyed:{ids[name]}" for name in destroyed]
    granted = await approvals(store)
    assert granted == {f"instance:{ids[name]}": "standing approval: config.toml [watch.destroy]"
                       for name in destroyed}
    text = next(body["text"] for body in receiver.bodies if body["vastui"]["key"] == f"unowned:{ids['old_scratch']}")
    assert "not vastui's" in text and "scratch-1" in text and "up 2.0 h" in text


async def test_a_leak_is_destroyed_only_once_two_complete_listings_agree_on_it(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    await new_campaign(store, "cdone", at=clock.now(), finished=True)
    leaked = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None)
    clock.advance(2 * HOUR)
    log: list[str] = []
    watch = lookout(client, store, clock, None, log, policy=POLICY)
    first = await watch.round()
    assert [leak.instance_id for leak in first.report.leaked] == [leaked] and first.destroyed is None
    assert leaked in market.instance_ids() and any("first seen" in line for line in log)
    clock.advance(ROUND_S)
    second = await watch.round()
    assert second.destroyed is not None and [g.instance_id for g in second.destroyed.gone] == [leaked]
    assert leaked not in market.instance_ids()
    assert [e.instance_id for e in await store.destroy_evidence()] == [leaked]   # proven gone, recorded


async def test_no_destroy_reports_what_the_approval_would_destroy_and_destroys_nothing(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    scratch = (await rent(market, "scratch-1"))[0]
    clock.advance(2 * HOUR)
    log: list[str] = []
    watch = Lookout(market=client, store=store, clock=clock, settings=WatchSettings(destroy=POLICY), sink=None,
                    log=log.append, destroy=False)
    await rounds(watch, clock, 3)
    assert scratch in market.instance_ids() and deletes(market) == set()
    assert any(f"would destroy {scratch}" in line and "--no-destroy" in line for line in log)
    assert await approvals(store) == {}


# --- alerts: once per condition, kept until delivered -----------------------------------------------------------


async def test_one_leak_alerts_once_per_quiet_period_even_from_two_watches_on_one_store(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock, sink: WebhookSink,
        receiver: WebhookReceiver) -> None:
    await new_campaign(store, "cdone", at=clock.now(), finished=True)
    leaked = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None)
    log_a: list[str] = []
    log_b: list[str] = []
    ours = lookout(client, store, clock, sink, log_a, quiet_s=2 * HOUR)
    theirs = lookout(client, store, clock, sink, log_b, quiet_s=2 * HOUR)
    for _ in range(4):
        await ours.round()
        await theirs.round()
        clock.advance(ROUND_S)
    assert receiver.keys() == [f"leak:{leaked}"]
    assert "its campaign has finished" in receiver.bodies[0]["text"]
    assert sum("ALERT" in line for line in log_a + log_b) == 1
    clock.advance(2 * HOUR)   # the quiet period is over and the leak is still there: told again, once
    await ours.round()
    await theirs.round()
    assert receiver.keys() == [f"leak:{leaked}"] * 2


async def test_alerts_wait_for_a_webhook_that_is_down_and_arrive_in_order_once_it_is_back(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock, sink: WebhookSink,
        receiver: WebhookReceiver) -> None:
    await new_campaign(store, "cdone", at=clock.now(), finished=True)
    first = await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None)
    receiver.refusing = True
    log: list[str] = []
    watch = lookout(client, store, clock, sink, log)
    down = await rounds(watch, clock, 2)
    second = (await rent(market, "notebook"))[0]
    down.append(await watch.round())
    assert receiver.bodies == [] and receiver.refused == 3 and down[-1].undelivered == 2
    assert [line.startswith("ALERT") for line in log].count(True) == 2   # the log told each at once
    assert all(receiver.token not in line for line in log)               # the webhook's URL never shown
    receiver.refusing = False
    clock.advance(ROUND_S)
    back = await watch.round()
    assert receiver.keys() == [f"leak:{first}", f"unowned:{second}"] and back.undelivered == 0
    assert await store.undelivered_alerts() == []


async def test_a_revoked_key_alerts_once_and_its_text_holds_no_key(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock, sink: WebhookSink,
        receiver: WebhookReceiver) -> None:
    log: list[str] = []
    watch = lookout(client, store, clock, sink, log)
    clean = await watch.round()
    assert clean.report.is_complete and receiver.bodies == []
    market.revoke_key(replacement="a-new-key-nobody-gave-the-watch")
    clock.advance(ROUND_S)
    blind = await rounds(watch, clock, 3)
    assert all(not r.report.is_complete and r.key_error is not None for r in blind)
    assert receiver.keys() == ["api-key"]
    assert "API key stopped working" in receiver.bodies[0]["text"] and KEY not in receiver.bodies[0]["text"]
    assert [r.verdict for r in await store.watch_rounds()] == ["clean", "unknown", "unknown", "unknown"]


async def test_low_runway_and_a_listing_failing_round_after_round_alert(
        market: Market, client: HttpVastClient, store: SqliteStore, clock: FakeClock, sink: WebhookSink,
        receiver: WebhookReceiver) -> None:
    iid = (await rent(market, "notebook"))[0]
    state = market.instance_state(iid)
    assert state is not None
    market.account.credit_usd = 3 * state.dph_total   # three hours left at this burn
    log: list[str] = []
    watch = lookout(client, store, clock, sink, log, runway_h=24.0)
    await watch.round()
    assert receiver.keys() == [f"unowned:{iid}", "runway"]
    assert "lasts 3.0 h" in receiver.bodies[1]["text"]
    market.chaos.error_5xx_rate = 1.0   # the listing fails every round from now on
    clock.advance(ROUND_S)
    failing = await rounds(watch, clock, 3)
    market.chaos.error_5xx_rate = 0.0
    await watch.round()   # delivers what the failing rounds raised (the webhook is fine; the API is not)
    assert [r.report.is_complete for r in failing] == [False] * 3
    assert receiver.keys() == [f"unowned:{iid}", "runway", "blind"]
    assert "failed 3 rounds in a row" in receiver.bodies[2]["text"]


async def test_a_watch_whose_store_keeps_failing_stops_after_a_few_rounds_to_be_restarted(
        client: HttpVastClient, store: SqliteStore, clock: FakeClock) -> None:
    log: list[str] = []
    watch = lookout(client, store, clock, None, log)
    await store.close()   # as a team store whose server went away under the watch
    with pytest.raises(StoreError, match="closed"):
        await watch.run(stop=asyncio.Event())
    assert sum("round failed:" in line for line in log) == 2 and "failed 3 times in a row" in log[-1]


# --- chaos ------------------------------------------------------------------------------------------------------


@pytest.fixture
async def socket_client(market: Market, clock: FakeClock) -> AsyncIterator[HttpVastClient]:
    """A client of the market over a real loopback socket (a dropped connection needs one to drop)."""
    async with SimServer(market, poll=False) as server, \
            HttpVastClient(base_url=server.url, api_key=Secret(KEY), clock=clock) as c:
        yield c


async def test_a_chaotic_api_and_a_flaky_webhook_lose_no_alert_and_get_no_unapproved_call(
        market: Market, socket_client: HttpVastClient, store: SqliteStore, clock: FakeClock, sink: WebhookSink,
        receiver: WebhookReceiver) -> None:
    client = socket_client
    await new_campaign(store, "cdone", at=clock.now(), finished=True)
    await new_campaign(store, "clive", at=clock.now(), deadline_at=clock.now() + 100 * HOUR)
    ours = [await rent_owned(market, store, "cdone", at=clock.now(), deadline_at=None, candidate=f"c{i}")
            for i in range(2)]
    live = await rent_owned(market, store, "clive", at=clock.now(), deadline_at=clock.now() + 100 * HOUR)
    scratch = (await rent(market, "scratch-1"))[0]
    notebook = (await rent(market, "notebook-ana"))[0]
    clock.advance(2 * HOUR)
    # 429 storms on top of the documented rate limits (which never send Retry-After), 5xx bursts, replies lost
    # after the work was done (destroys included), and an outage of every endpoint part-way through
    market.chaos = Chaos(rate_limit_every_n=5, rate_limit_storm_len=3, retry_after_s=2.0, error_5xx_rate=0.15,
                         error_5xx_burst_len=3, drop_connection_rate=0.05, drop_mutation_rate=0.5,
                         outage_after_n=40, outage_s=0.3, seed=5)
    receiver.refuse_next = 4
    log: list[str] = []
    watch = lookout(client, store, clock, sink, log, policy=POLICY)
    covered = {*ours, scratch}
    expected = [*(f"leak:{i}" for i in ours), f"unowned:{scratch}", f"unowned:{notebook}",
                *(f"destroyed:{i}" for i in covered)]
    for _ in range(40):   # until every alert is in (a lost one never comes: the test then fails below)
        await watch.round()
        clock.advance(ROUND_S)
        if set(expected) <= set(receiver.keys()):
            break
    met = market.chaos.injected   # the run did meet the chaos it was meant to
    assert met["rate_limited"] and met["server_error"] and met["outage"], market.chaos.summary()
    market.chaos.calm()
    receiver.refuse_next = 0
    await watch.round()   # calm: whatever is still undelivered goes now

    assert set(market.instance_ids()) == {live, notebook}
    keys = receiver.keys()
    told = [k for k in keys if not k.startswith(("destroy-failed:", "blind"))]
    assert sorted(told) == sorted(expected)   # each once: none lost, none twice
    assert await store.undelivered_alerts() == []
    # every DELETE the API saw was for an instance the approval covers, each approved before it went out
    assert deletes(market) == covered
    granted = await approvals(store)
    assert set(granted) == {f"instance:{i}" for i in covered}
    assert set(granted.values()) == {"standing approval: config.toml [watch.destroy]"}
    mutations = {r.method for r in market.request_log} - {"GET", "DELETE"}
    assert mutations == set()


# --- vastui watch ------------------------------------------------------------------------------------------------


@pytest.fixture
def wall_market() -> Market:
    """A market whose clock reads two hours before the wall clock until ``advance`` brings it to the wall's time."""
    realism = dataclasses.replace(Realism.vast(), rate_limits=False)   # this clock stands still between rounds
    market = build_market(7, clock=FakeClock(start=time.time() - 2 * HOUR), api_key=KEY, n_machines=60,
                          realism=realism)
    market.lifecycle_odds = LifecycleOdds.never()
    return market


async def test_vastui_watch_reports_a_hand_rented_instance_once_and_destroys_it_under_the_config_approval(
        wall_market: Market, receiver: WebhookReceiver, capsys: pytest.CaptureFixture[str]) -> None:
    scratch = (await rent(wall_market, "scratch-7"))[0]
    assert isinstance(wall_market.clock, FakeClock)
    wall_market.clock.advance(2 * HOUR)
    young = (await rent(wall_market, "scratch-8"))[0]   # rented a moment ago: under the approval's hour
    settings = load_settings()
    settings.config_dir.mkdir(parents=True, exist_ok=True)
    (settings.config_dir / "config.toml").write_text(
        f'[watch]\nwebhook_url = "{receiver.url}"\n\n'
        '[watch.destroy]\nolder_than_min = 60\nmax_usd_per_h = 50\nlabels = ["scratch-*"]\ninclude_unowned = true\n')
    async with SimServer(wall_market, poll=False) as server:
        code = await asyncio.to_thread(main, ["watch", "--url", server.url, "--api-key", KEY, "--rounds", "3",
                                              "--interval", "0.001", "--poll-interval", "0.02"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert scratch not in wall_market.instance_ids() and young in wall_market.instance_ids()
    assert receiver.keys().count(f"unowned:{scratch}") == 1 and f"destroyed:{scratch}" in receiver.keys()
    assert "standing approval: destroys leaked or not vastui's instances running 60 min or more" in err
    assert "the webhook at http://127.0.0.1" in err and receiver.token not in err and KEY not in err
    async with await SqliteStore.open(settings.db_path) as store:
        assert len(await store.watch_rounds()) == 3
        assert await approvals(store) == {f"instance:{scratch}": f"standing approval: "
                                          f"{settings.config_dir / 'config.toml'} [watch.destroy]"}
        assert all(receiver.token not in a.text for a in await store.watch_alerts())
