"""A whole campaign against the realistic simulator (every rule on, its rate limits among them), on an account
holding 100 other instances: the campaign proves its own instances gone, ``vastui leaks`` reads the whole listing (five pages), no 429
reaches the user, and the simulator's request log shows every endpoint's interval kept.

Source of the limits (docs/api-notes.md §1.4): vast-ai/docs ``api-reference/rate-limits-and-errors.mdx`` (a
minimum interval per endpoint and identity, 429 without ``Retry-After``) and the ``x-rate-limit`` thresholds of the
OpenAPI files under ``api-reference/openapi/yaml/`` (create 4.5 s, destroy 3.0 s, show instance 2.0 s, the v1
listing 1.0 s a page, search 10 a minute).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from vastui.campaign.candidate import CandidatePhase, NotRented
from vastui.events import Event, Notice
from vastui.sim import middleware
from vastui.sim.demo import open_demo
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.sim.rate_limits import Limit, interval_violations, limit_of
from vastui.sim.realism import Realism
from vastui.sim.turns import LifecycleOdds

KEY = "rate-limited-campaign-key-91e0"
TIME_SCALE = 60.0
OTHERS = 100


async def hundred_others(market: Market) -> None:
    """The account already holds 100 instances that are not the campaign's (rented by hand; stopped, so no hosts)."""
    free = [m.offer_id for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10]
    body = {"image": "pytorch/pytorch", "disk": 10, "label": "team-notebook", "runtype": "ssh"}
    odds, market.lifecycle_odds = market.lifecycle_odds, LifecycleOdds.never()   # set-up: every one of them rents
    try:
        ids, failed = await market.create_many(free[-OTHERS:], CreateRequest.from_body(body))
    finally:
        market.lifecycle_odds = odds                  # the campaign's own rentals take the realistic turns
    assert len(ids) == OTHERS, failed
    await market.set_state(ids, "stopped")


@pytest.mark.slow
async def test_a_rate_limited_campaign_on_a_crowded_account_proves_its_instances_gone(tmp_path: Path) -> None:
    events: list[Event] = []
    async with open_demo(seed=3, time_scale=TIME_SCALE, data_dir=tmp_path / "data", api_key=KEY,
                         manifest_path=fast_manifest(tmp_path / "m"), realism=Realism.vast(),
                         prepare=hundred_others) as demo:
        market = demo.market
        others = set(market.instance_ids())
        assert len(others) == OTHERS and market.realism == Realism.vast()   # every rule on, not the limits alone
        stop = demo.services.bus.listen(events.append)
        try:
            async with asyncio.timeout(900):    # a guard against a hang, not a speed check
                result = await demo.start(plan_approved=True).result(abort_if_cancelled="the test was interrupted")
        finally:
            stop()
        receipt = result.receipt
        leaks = await _vastui_leaks(demo.client.base_url, tmp_path)
        await market.refresh()
        alive = set(market.instance_ids())
        log = list(market.request_log)
        assert market.request_log.dropped == 0

    # the campaign rented, and proved every instance it rented gone, among 100 others that stay
    rented = {r.instance_id for r in result.outcome.runs if r.instance_id is not None}
    assert rented and {d.instance_id for d in receipt.destroyed} == rented
    assert all(d.is_proven_gone for d in receipt.destroyed), receipt.destroyed
    assert receipt.teardown_passed and alive == others

    # `vastui leaks` read the whole listing: the 100 others, no more, no fewer
    code, report, stderr = leaks
    assert code == 0 and report["is_complete"] and report["verdict"] == "clean", (report.get("summary"), stderr)
    listed = report["leaks"]
    assert isinstance(listed, list)
    assert {leak["instance_id"] for leak in listed} == others and report["listed_count"] == OTHERS

    # no 429 anywhere: not from the simulator, not in what the user saw
    assert [(r.method, r.path) for r in log if r.status == 429] == []
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert not [text for text in notices if "429" in text or "too frequent" in text.lower()], notices
    # ...nor its effects: a listing cut short by 429s, a create refused by one taken for an offer gone
    assert not [text for text in notices if "listing incomplete" in text or "trying reserve" in text], notices
    assert not [r.cid for r in result.outcome.runs if r.instance_id is None], "every candidate was rented"
    assert "429" not in stderr and "too frequent" not in stderr.lower()

    # every endpoint's interval kept, by the simulator's own record of arrivals
    assert interval_violations(log) == []
    listing_pages = [r for r in log if r.path == "/api/v1/instances/"]
    assert len(listing_pages) >= 2 * 5, "listings of 100+ instances take five pages each"


async def _vastui_leaks(url: str, tmp_path: Path) -> tuple[int, dict[str, object], str]:
    """``vastui leaks --json`` as an operator runs it: its own process, on the marketplace's clock."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), "VASTUI_DATA_DIR": str(tmp_path / "data"),
           "VASTUI_CONFIG_DIR": str(tmp_path / "config"), "VAST_API_KEY": KEY}
    argv = [sys.executable, "-m", "vastui", "leaks", "--url", url, "--db", str(tmp_path / "leaks.sqlite3"), "--json"]
    process = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, env=env)
    try:
        async with asyncio.timeout(300):     # a guard against a hang, not a speed check
            stdout, stderr = await process.communicate()
    except TimeoutError:
        process.kill()
        raise
    assert process.returncode is not None
    return process.returncode, json.loads(stdout), stderr.decode()


@pytest.mark.slow
async def test_creates_refused_by_rate_limits_burn_no_reserve_and_blame_no_offer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a 429 means the marketplace did nothing (rate-limits-and-errors.mdx): a create it keeps refusing is no sign
    # that the offer is gone, so no reserve is rented in its place. Here the create endpoint's interval is made an
    # hour long, and an arrival a moment before the campaign starts it: every create is refused.
    create = limit_of("PUT", "/api/v0/asks/1/")
    assert create is not None
    hour = Limit(create.name, create.method, create.pattern, 1, 3600.0)
    monkeypatch.setattr(middleware, "limit_of", lambda method, path: hour if hour.pattern.match(path)
                        and method == "PUT" else limit_of(method, path))

    async def creates_just_came(market: Market) -> None:
        market.rate_limits.check(limit=hour, key=KEY, client="127.0.0.1", now=market.clock.now())

    events: list[Event] = []
    async with open_demo(seed=3, time_scale=TIME_SCALE, data_dir=tmp_path / "data", api_key=KEY,
                         manifest_path=fast_manifest(tmp_path / "m", max_candidates=2),
                         realism=Realism(rate_limits=True), prepare=creates_just_came) as demo:
        stop = demo.services.bus.listen(events.append)
        try:
            async with asyncio.timeout(900):    # a guard against a hang, not a speed check
                result = await demo.start(plan_approved=True).result(abort_if_cancelled="the test was interrupted")
        finally:
            stop()
        instances = demo.market.instance_ids()
        creates = [r.status for r in demo.market.request_log if r.method == "PUT" and "/asks/" in r.path]

    assert instances == [] and creates and set(creates) == {429}
    assert result.outcome.runs and all(r.phase is CandidatePhase.SKIPPED and r.not_rented is NotRented.RATE_LIMITED
                                       for r in result.outcome.runs), [r.detail for r in result.outcome.runs]
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert not [text for text in notices if "trying reserve" in text or "vanished" in text], notices
