"""Whole campaigns on the embedded simulator: decisions never rest on wrong outputs, nothing is left billing,
every mutating request was approved, and the budget holds — judged by the simulator's own truth and billing."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.campaign.campaign_support import destroys_past_deadline, fast_manifest, first_destroys
from vastui.approval import AuditKind
from vastui.bench.manifest import load_manifest
from vastui.campaign.candidate import NotRented
from vastui.sim.demo import run_demo
from vastui.sim.market import Market
from vastui.sim.truth import Fault
from vastui.store import SqliteStore

SEEDS = range(1, 21)
TIME_SCALE = 300.0
INITIAL_CREDIT_USD = 500.0
READINESS_HEADROOM_S = 1800
_CREATE = re.compile(r"^/api/v0/asks/(\d+)/$")
_DESTROY = re.compile(r"^/api/v0/instances/(\d+)/$")
_LOGS = re.compile(r"^/api/v0/instances/request_logs/(\d+)/$")  # a PUT that only asks for the log: a read


@dataclass
class MarketFacts:
    instances_alive: list[int] = field(default_factory=list)
    billed_usd: float = 0.0
    wrong_output_machines: set[int] = field(default_factory=set)
    mutations: list[tuple[str, str]] = field(default_factory=list)
    first_destroy_at: dict[int, float] = field(default_factory=dict)


def _facts_into(facts: MarketFacts):  # type: ignore[no-untyped-def]
    async def capture(market: Market) -> None:
        await market.refresh()
        facts.instances_alive = list(market.instance_ids())
        facts.billed_usd = INITIAL_CREDIT_USD - market.account.credit_usd
        facts.wrong_output_machines = {m.machine_id for m in market.world.machines
                                       if market.truth_of(m.machine_id).fault is Fault.WRONG_OUTPUT}
        facts.first_destroy_at = first_destroys(market.request_log)
        for request in market.request_log:
            if request.method == "PUT" and (m := _CREATE.match(request.path)):
                facts.mutations.append(("create_instance", f"offer:{m.group(1)}"))
            elif request.method == "DELETE" and (m := _DESTROY.match(request.path)):
                facts.mutations.append(("destroy_instance", f"instance:{m.group(1)}"))
            elif request.method == "POST" and request.path == "/api/v0/ssh/":
                facts.mutations.append(("create_ssh_key", "*"))
            elif request.method in ("PUT", "DELETE", "POST") and request.path not in (
                    "/api/v0/bundles/", "/api/v0/search/asks/") and not _LOGS.match(request.path):
                facts.mutations.append((request.method, request.path))  # anything else is unexpected
    return capture


async def _audit(db_path: Path) -> list[tuple[str, str, str]]:
    store = await SqliteStore.open(db_path)
    try:
        return [(r.kind, str(r.action), r.target) for r in await store.audit_records()]
    finally:
        await store.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
async def test_demo_campaign_is_correct_clean_and_approved(seed: int, tmp_path: Path) -> None:
    # An instance's deadline is its readiness deadline plus the plan's allowance. At x300 a stall of the machine
    # running the suite (each agent start is a Python process) eats that allowance 300 times over: seed 8 got no
    # block before its deadline on a CI machine more than twice as slow as an idle one, and at x900 three seeds in
    # twenty failed so. A longer readiness deadline gives the deadline that headroom (all twenty pass at x900)
    # without slowing a campaign that needs none of it.
    manifest_path = fast_manifest(tmp_path / "m", readiness_min_s=READINESS_HEADROOM_S)
    facts = MarketFacts()
    result = await run_demo(seed=seed, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                            manifest_path=manifest_path, on_market=_facts_into(facts))
    receipt = result.receipt
    decision = receipt.decision

    # a decision is named, with its runner-up, margin and the destroyed ids
    assert decision.chosen is not None, decision.reason
    chosen = next(c for c in receipt.candidates if c.candidate_id == decision.chosen)
    assert chosen.machine_id not in facts.wrong_output_machines
    chosen_run = next(r for r in result.outcome.runs if r.cid == decision.chosen)
    assert chosen_run.passed_gate is True
    if decision.runner_up is not None:
        assert decision.margin is not None
        # a runner-up that could have been chosen instead is dearer at worst; an uncertified or earlier-eliminated
        # one may be cheaper, and the receipt says by how much
        assert decision.margin >= 0 or not decision.runner_up_comparable
    rented = {r.instance_id for r in result.outcome.runs if r.instance_id is not None}
    assert rented and {d.instance_id for d in receipt.destroyed} == rented
    assert all(d.is_proven_gone for d in receipt.destroyed)
    assert all(d.destroyed_at is not None and d.destroyed_at <= d.absent_in_listings_at[0] for d in receipt.destroyed)

    # nothing left billing, by the simulator's own listing; each instance destroyed by the deadline it was rented for
    assert facts.instances_alive == []
    assert result.instances_left == 0 and receipt.teardown_passed
    assert await destroys_past_deadline(result.db_path, receipt.campaign_id, facts.first_destroy_at) == []

    # every mutating request the simulator received maps to an approval in the store's audit log
    audit = await _audit(result.db_path)
    approved = {(action, target) for kind, action, target in audit if kind is AuditKind.APPROVAL}
    called = {(action, target) for kind, action, target in audit if kind is AuditKind.CALL}
    # one destroy per instance: the simulator's destroys land, so the final teardown only proves them gone
    destroys = Counter(target for action, target in facts.mutations if action == "destroy_instance")
    assert set(destroys.values()) == {1}, destroys
    for action, target in facts.mutations:
        if action == "create_ssh_key":
            assert any(a == "create_ssh_key" for a, _ in approved)
            continue
        assert (action, target) in approved, (action, target)
        assert (action, target) in called, (action, target)

    # the benchmark budget holds by the simulator's billing
    budget = load_manifest(manifest_path).budget.max_usd
    assert 0 < facts.billed_usd <= budget


@pytest.mark.slow
async def test_campaign_stops_renting_when_the_next_rental_could_exceed_the_budget(tmp_path: Path) -> None:
    budget = 0.06      # one rental at 32 GiB of disk fits, two do not
    manifest_path = fast_manifest(tmp_path / "m", budget_usd=budget)
    facts = MarketFacts()
    result = await run_demo(seed=3, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                            manifest_path=manifest_path, on_market=_facts_into(facts))
    skipped = [r for r in result.outcome.runs if r.instance_id is None]
    assert skipped and all(r.not_rented is NotRented.OVER_BUDGET for r in skipped), [r.detail for r in skipped]
    assert len(skipped) < len(result.outcome.runs), "the budget fits one rental: it must be made"
    assert sum(r.candidate.max_spend_usd for r in result.outcome.runs if r.instance_id is not None) <= budget
    assert facts.billed_usd <= budget
    assert facts.instances_alive == []
