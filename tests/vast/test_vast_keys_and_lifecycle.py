"""Keys and the instance lifecycle as the real Vast.ai has them, against the simulator with those rules on
(``Realism`` group "keys and the instance lifecycle"), each test citing its public source; docs/api-notes.md,
"Keys and the instance lifecycle", cites them too.

A revoked key is an ``AuthError`` naming where the key came from, whatever status carries it; the documented
destroy 404 counts as gone; the simulator's rentals take the real turns (scheduling, a null first show, a
transient ``unknown``, a runtime error in ``status_msg``) and honour ``cancel_unavail``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.approval import Action, Approval, ApprovalRequest, instance_target
from vastui.campaign.approvers import PlanApprover, PlanTerms
from vastui.campaign.cleanup import PATIENCE_S, destroy_with_approval, teardown
from vastui.config import Secret
from vastui.errors import AuthError, NotFound
from vastui.events import EventBus, Notice
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest, InstanceStatus
from vastui.sim.market import Market
from vastui.sim.market_error import MarketError
from vastui.sim.realism import Realism
from vastui.sim.server import SimServer
from vastui.sim.turns import OCI_FAILURE, LifecycleOdds
from vastui.vast.client import HttpVastClient
from vastui.vast.reconcile import says_no_such_instance

KEY = "lifecycle-key-0077"
REVOKED = "revoked-key-0078"
CAMPAIGN = "clife"
NEVER = LifecycleOdds(scheduling=0.0, scheduling_failure=0.0, transient_unknown=0.0, null_first_show=0.0,
                      runtime_failure=0.0)


def _market(clock: FakeClock, realism: Realism, odds: LifecycleOdds = NEVER) -> Market:
    market = build_market(21, clock=clock, api_key=KEY, n_machines=40, realism=realism)
    market.lifecycle_odds = odds
    return market


def _client(market: Market, clock: FakeClock, *, key: str = KEY, source: str | None = None,
            max_attempts: int = 4) -> HttpVastClient:
    return HttpVastClient(base_url="http://sim.test", api_key=Secret(key), clock=clock, key_source=source,
                          max_attempts=max_attempts, transport=httpx.ASGITransport(app=create_app(market)))


async def _rent(market: Market, *, cancel_unavail: bool = True) -> int:
    machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
    body = {"image": "pytorch/pytorch", "disk": 10, "label": f"vastui-{CAMPAIGN}-c1-{machine.offer_id}",
            "runtype": "ssh", "cancel_unavail": cancel_unavail}
    return (await market.create_instance(machine.offer_id, CreateRequest.from_body(body))).id


def _approval(instance_id: int) -> Approval:
    return Approval(ApprovalRequest(action=Action.DESTROY_INSTANCE, target=instance_target(instance_id),
                                    summary="test"), granted_by="test", granted_at=0.0)


# --- keys ---------------------------------------------------------------------------------------------------------

async def test_a_revoked_key_answered_404_is_an_auth_error_naming_its_source() -> None:
    # vast-cli PR#378 and vast-ai/docs OpenAPI search_offers.yaml: a bad key is often 404 {"error": "auth_error"}
    clock = FakeClock()
    market = _market(clock, Realism(auth_error_404=True))
    async with _client(market, clock, key=REVOKED, source="VAST_API_KEY") as client:
        for read in (client.list_instances(), client.show_instance(30_000_001), client.search_offers("")):
            with pytest.raises(AuthError) as caught:
                await read
            error = caught.value
            assert error.status == 404 and error.code == "auth_error"
            assert error.title == "API key rejected (from VAST_API_KEY)"
            assert "the API key was rejected (from VAST_API_KEY)" in error.message and REVOKED not in error.message


async def test_a_rejected_key_still_reads_as_rejected_when_answered_401() -> None:
    # vast-ai/docs OpenAPI: some endpoints document 401 for a bad key (the kind simulator answers 401 always)
    clock = FakeClock()
    market = _market(clock, Realism())
    async with _client(market, clock, key=REVOKED, source="--api-key") as client:
        with pytest.raises(AuthError) as caught:
            await client.list_instances()
    assert caught.value.status == 401 and "(from --api-key)" in caught.value.title


def _env(tmp_path: Path, url: str, key: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VAST", "VASTUI_"))}
    env.update(HOME=str(home), VAST_URL=url, VAST_API_KEY=key, VASTUI_CONFIG_DIR=str(home / "cfg"),
               VASTUI_DATA_DIR=str(home / "data"))
    return env


async def test_vastui_instances_with_a_revoked_key_says_the_key_was_rejected(tmp_path: Path) -> None:
    # vast-cli PR#378: the revoked key's 404 must not read as an incomplete listing or a missing instance
    market = _market(FakeClock(), Realism(auth_error_404=True))
    async with SimServer(market, poll=False) as server:
        for command, *rest in (["instances"], ["ssh-run", "30000001", "--", "true"]):  # ssh-run shows it first
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "vastui", command, "--url", server.url, *rest,
                env=_env(tmp_path, server.url, REVOKED),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = (part.decode() for part in await asyncio.wait_for(process.communicate(), timeout=60))
            assert process.returncode not in (0, None), out
            assert "API key rejected (from VAST_API_KEY)" in err, err
            assert "INCOMPLETE" not in out + err and "not found" not in (out + err).lower()
            assert REVOKED not in out + err


async def test_teardown_stops_at_once_on_a_rejected_key_and_says_so() -> None:
    # vast-cli PR#378: a revoked key is answered 404 auth_error on every call; retrying for the outage patience
    # (30 minutes) cannot help, so the teardown stops and reports what may still bill
    clock = FakeClock()
    market = _market(clock, Realism(auth_error_404=True))
    instance_id = await _rent(market)
    approver = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset(), max_spend_usd=0.0), clock=clock)
    approver.mark_owned(instance_id)
    notices: list[Notice] = []
    bus = EventBus()
    bus.listen(lambda e: notices.append(e) if isinstance(e, Notice) else None)
    started = clock.now()
    async with _client(market, clock, key=REVOKED, source="VAST_API_KEY") as client:
        report = await teardown(client=client, approver=approver, clock=clock, bus=bus, instance_ids=[instance_id],
                                campaign_id=CAMPAIGN, reason="test", poll_s=5.0)
    assert clock.now() - started < PATIENCE_S / 10, "the teardown kept retrying a rejected key"
    assert report.key_rejected is not None and report.still_alive == [instance_id] and not report.is_clean
    assert any("API key rejected (from VAST_API_KEY): teardown stopped" in e for e in report.errors), report.errors
    assert any(n.level == "error" and "teardown stopped" in n.text for n in notices)
    assert market.instance_ids() == [instance_id]


# --- destroy --------------------------------------------------------------------------------------------------------

async def test_the_documented_destroy_404_counts_as_gone() -> None:
    # docs/api-notes.md (keys and lifecycle) (destroy's 404 as other Vast clients record it): {"error": "not_found", "msg": "Instance not
    # found"}, with no id in it; the vast-ai/docs OpenAPI shape "no_such_instance" is tested in test_vast_destroy_404
    clock = FakeClock()
    market = _market(clock, Realism(destroy_404_documented=True))
    instance_id = await _rent(market)
    async with _client(market, clock) as client:
        await client.destroy_instance(instance_id, approval=_approval(instance_id))
        with pytest.raises(NotFound) as caught:
            await client.destroy_instance(instance_id, approval=_approval(instance_id))
        assert caught.value.code == "not_found" and caught.value.server_message == "Instance not found"
        assert says_no_such_instance(caught.value, instance_id)
        approver = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=frozenset(), max_spend_usd=0.0),
                                clock=clock)
        approver.mark_owned(instance_id)
        assert await destroy_with_approval(client=client, approver=approver, instance_id=instance_id,
                                           campaign_id=CAMPAIGN, reason="test")


# --- cancel_unavail ------------------------------------------------------------------------------------------------

async def test_a_scheduling_failure_is_an_error_when_cancel_unavail_is_true() -> None:
    # vast-ai/docs create-instance reference: cancel_unavail (true by default for on-demand) cancels a rental
    # that cannot be scheduled, so nothing is created and nothing bills
    clock = FakeClock()
    market = _market(clock, Realism(cancel_unavail=True), LifecycleOdds(scheduling_failure=1.0))
    with pytest.raises(MarketError) as caught:
        await _rent(market, cancel_unavail=True)
    assert caught.value.status == 400 and "could not be scheduled" in caught.value.msg
    assert market.instance_ids() == [] and market.account.credit_usd == 500.0


async def test_a_scheduling_failure_creates_a_stopped_instance_when_cancel_unavail_is_false() -> None:
    # the official CLI's help (create instance --cancel-unavail): without it a scheduling failure creates a
    # *stopped* instance, whose storage bills until it is destroyed
    clock = FakeClock()
    market = _market(clock, Realism(cancel_unavail=True), LifecycleOdds(scheduling_failure=1.0))
    instance_id = await _rent(market, cancel_unavail=False)
    clock.advance(3600.0)
    row = await market.show_instance(instance_id)
    assert row is not None and row["actual_status"] == "stopped" and "Scheduling failed" in row["status_msg"]
    charges = market.charges_of(instance_id)
    assert charges.storage_usd > 0 and charges.gpu_usd == 0.0


async def test_an_offer_asked_again_after_a_refused_create_draws_its_scheduling_afresh() -> None:
    # api-notes (cancel_unavail): the refusal is about the machine's resources at that moment, and each ask draws
    # afresh. A refused create creates nothing, so asked again with no create between it has the same next
    # instance id: its draw must not be the first one's replayed (every refused offer was refused again).
    clock = FakeClock()
    market = _market(clock, Realism(cancel_unavail=True), LifecycleOdds(scheduling_failure=0.5))
    body = {"image": "pytorch/pytorch", "disk": 10, "runtype": "ssh", "cancel_unavail": True}
    refused, placed_later = 0, 0
    for machine in [m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10]:
        request = CreateRequest.from_body({**body, "label": f"vastui-{CAMPAIGN}-c1-{machine.offer_id}"})
        for ask in range(2):
            try:
                instance = await market.create_instance(machine.offer_id, request)
            except MarketError as error:
                assert ask == 0 or "could not be scheduled" in error.msg
                refused += ask == 0
                continue
            placed_later += ask == 1 and instance.id > 0
            break
    assert refused >= 5, "the odds of a half refuse some first asks"
    assert placed_later >= 1, "a second ask must be able to succeed where the first was refused"
    assert placed_later < refused, "...and be refused again sometimes: the same odds, drawn afresh"


async def test_the_client_asks_for_cancel_unavail_so_a_failed_schedule_rents_nothing() -> None:
    # vast-ai/docs create-instance reference and the CLI's help: vastui sends cancel_unavail true (api-notes §3.4)
    clock = FakeClock()
    market = _market(clock, Realism(cancel_unavail=True), LifecycleOdds(scheduling_failure=1.0))
    offer = next(m for m in market.world.machines if not market.is_rented(m)).offer_id
    approval = Approval(ApprovalRequest(action=Action.CREATE_INSTANCE, target=f"offer:{offer}", summary="test"),
                        granted_by="test", granted_at=0.0)
    async with _client(market, clock) as client:
        with pytest.raises(Exception) as caught:
            await client.create_instance(offer_id=offer, image="pytorch/pytorch", disk_gib=10, label="x-1",
                                         approval=approval)
    assert "could not be scheduled" in str(caught.value)
    assert market.instance_ids() == []


# --- the lifecycle's turns -----------------------------------------------------------------------------------------

async def test_a_rental_may_be_scheduling_before_it_loads() -> None:
    # the official CLI's help (start instance): an instance may sit in "scheduling" for a while
    clock = FakeClock()
    odds = LifecycleOdds(**{**_never(), "scheduling": 1.0, "scheduling_s": (30.0, 30.0)})
    market = _market(clock, Realism(lifecycle_turns=True), odds)
    instance_id = await _rent(market)
    assert _status(await market.show_instance(instance_id)) == "scheduling"
    clock.advance(31.0)
    assert _status(await market.show_instance(instance_id)) == "loading"
    clock.advance(3600.0)
    assert _status(await market.show_instance(instance_id)) == "running"


async def test_the_first_show_after_a_create_may_be_null() -> None:
    # docs/api-notes.md (keys and lifecycle) (the official self-test, wait_for_instance, keeps waiting on empty answers)
    clock = FakeClock()
    market = _market(clock, Realism(lifecycle_turns=True), LifecycleOdds(**{**_never(), "null_first_show": 1.0}))
    instance_id = await _rent(market)
    async with _client(market, clock) as client:
        assert await client.show_instance(instance_id) is None
        shown = await client.show_instance(instance_id)
    assert shown is not None and shown.id == instance_id


async def test_an_instance_may_read_unknown_for_a_while_and_come_back() -> None:
    # docs/api-notes.md (keys and lifecycle): "unknown" is "no recent heartbeat", often transient (the official self-test waits on it)
    clock = FakeClock()
    odds = LifecycleOdds(**{**_never(), "transient_unknown": 1.0, "unknown_after_s": (5.0, 5.0),
                            "unknown_s": (20.0, 20.0)})
    market = _market(clock, Realism(lifecycle_turns=True), odds)
    instance_id = await _rent(market)
    seen = []
    for _ in range(12):
        seen.append(_status(await market.show_instance(instance_id)))
        clock.advance(10.0)
    clock.advance(3600.0)
    seen.append(_status(await market.show_instance(instance_id)))
    assert "unknown" in seen and seen[0] != "unknown" and seen[-1] == "running"


async def test_a_container_the_runtime_cannot_start_says_so_in_status_msg_and_never_runs() -> None:
    # docs/api-notes.md (keys and lifecycle): status_msg carries runtime errors ("OCI runtime ... failed"); such an instance never runs
    clock = FakeClock()
    market = _market(clock, Realism(lifecycle_turns=True), LifecycleOdds(**{**_never(), "runtime_failure": 1.0}))
    instance_id = await _rent(market)
    clock.advance(7200.0)
    row = await market.show_instance(instance_id)
    assert row is not None and row["actual_status"] == "loading" and row["status_msg"] == OCI_FAILURE
    state = market.instance_state(instance_id)
    assert state is not None and state.status is InstanceStatus.LOADING


async def test_a_broken_runtime_is_the_machines_own_and_fails_every_rental_on_it() -> None:
    # docs/api-notes.md (keys and lifecycle): the "nvidia-container-cli ... driver rpc error" is the host's driver,
    # not the rental's: destroyed and rented again, the same machine fails the same way; others are unaffected
    clock = FakeClock()
    market = _market(clock, Realism(lifecycle_turns=True), LifecycleOdds(**{**_never(), "runtime_failure": 0.5}))
    free = [m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10]
    broken = [m for m in free if market.runtime_broken(m.machine_id)]
    sound = [m for m in free if not market.runtime_broken(m.machine_id)]
    assert broken and sound   # 40 machines at even odds: both kinds exist (seeded)
    for machine in (broken[0], sound[0]):
        messages = []
        for _ in range(2):
            body = {"image": "pytorch/pytorch", "disk": 10, "label": f"vastui-{CAMPAIGN}-c1-{machine.offer_id}",
                    "runtype": "ssh", "cancel_unavail": True}
            instance_id = (await market.create_instance(machine.offer_id, CreateRequest.from_body(body))).id
            clock.advance(7200.0)
            row = await market.show_instance(instance_id)
            assert row is not None
            messages.append((row["actual_status"], row["status_msg"] == OCI_FAILURE))
            await market.destroy([instance_id])
        expected = ("loading", True) if machine in broken else ("running", False)
        assert messages == [expected, expected], (machine.machine_id, messages)


async def test_the_kind_simulator_takes_none_of_these_turns() -> None:
    # the default (kind) realism keeps the older behaviour: 401 for a bad key, straight to loading
    clock = FakeClock()
    market = build_market(21, clock=clock, api_key=KEY, n_machines=40, realism=Realism.kind())
    market.lifecycle_odds = LifecycleOdds(scheduling=1.0, scheduling_failure=1.0, transient_unknown=1.0,
                                          null_first_show=1.0, runtime_failure=1.0)
    instance_id = await _rent(market, cancel_unavail=False)
    assert _status(await market.show_instance(instance_id)) == "loading"


def _never() -> dict[str, Any]:
    return {"scheduling": 0.0, "scheduling_failure": 0.0, "transient_unknown": 0.0, "null_first_show": 0.0,
            "runtime_failure": 0.0}


def _status(row: dict[str, object] | None) -> object:
    assert row is not None
    return row["actual_status"]
