"""``build_plan`` and ``render_plan`` on real offers: rows of a seeded simulated world parsed with ``Offer.from_api``,
the example workload's manifest, and host knowledge and bad hosts read back from a real SQLite store."""

from __future__ import annotations

import functools
import operator
import re
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.campaign.campaign_support import fast_manifest
from vastui.bench.cost import cost_per_accepted_unit
from vastui.bench.manifest import Manifest, load_manifest
from vastui.bench.tuning import Profile
from vastui.campaign.charges import prior_cost_inputs
from vastui.campaign.plan import Plan, build_plan, render_plan
from vastui.campaign.prior import (
    DLPERF_EXPONENT_PRIOR,
    HALF_PRECISION_LIFT_PRIOR,
    SLO_SHORTFALL_PRIOR,
    compressed_dlperf,
    dlperf_pivot,
)
from vastui.sim.offers import offer_row
from vastui.sim.world import generate_world
from vastui.store import SqliteStore
from vastui.store.records import BadHost, HostKnowledge, RunStatus
from vastui.vast.models import Offer
from vastui.vast.query import parse_query
from vastui.vast.query_fields import NUMERIC_FIELDS

NOW = 1_800_000_000.0
DAY = 86_400.0
SEED = 7
CAMPAIGN = "cplan"


def world_rows(seed: int = SEED, *, n_machines: int = 120) -> list[dict[str, Any]]:
    """The offer rows the simulated marketplace would answer for every machine of the world (no filter applied)."""
    world = generate_world(seed, n_machines=n_machines, now=NOW)
    return [offer_row(machine, now=NOW, rented=False) for machine in world.machines]


def offers_of(rows: Sequence[dict[str, Any]]) -> list[Offer]:
    return [Offer.from_api(row, where=f"row {i}") for i, row in enumerate(rows)]


def plan_for(manifest: Manifest, offers: Sequence[Offer], *, knowledge: Sequence[HostKnowledge] = (),
             bad_hosts: Sequence[BadHost] = ()) -> Plan:
    return build_plan(campaign_id=CAMPAIGN, manifest=manifest, offers=offers, knowledge=knowledge,
                      bad_hosts=bad_hosts)


def with_shortlist(manifest: Manifest, *, max_candidates: int, min_hosts: int | None = None,
                   gpu_counts: tuple[int, ...] | None = None) -> Manifest:
    """The manifest with another shortlist size; with ``gpu_counts``, multi-GPU offers allowed by query and tuning."""
    shortlist = replace(manifest.shortlist, max_candidates=max_candidates,
                        min_hosts_per_model=min_hosts if min_hosts is not None
                        else manifest.shortlist.min_hosts_per_model)
    if gpu_counts is None:
        return replace(manifest, shortlist=shortlist)
    shortlist = replace(shortlist, query=shortlist.query.replace("num_gpus=1 ", ""))
    return replace(manifest, shortlist=shortlist, tuning=replace(manifest.tuning, gpu_counts=gpu_counts))


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "eq": operator.eq, "neq": operator.ne, "gt": operator.gt, "gte": operator.ge, "lt": operator.lt,
    "lte": operator.le,
}


def query_violations(offer: Offer, query: str) -> list[str]:
    """The numeric filters of ``query`` (in the API's units, as the official CLI sends them) that ``offer`` breaks."""
    broken = []
    for field, ops in parse_query(query).items():
        if field not in NUMERIC_FIELDS or not hasattr(offer, field):
            continue
        value = getattr(offer, field)
        for op, limit in ops.items():
            if op in _COMPARE and (value is None or not _COMPARE[op](float(value), float(str(limit)))):
                broken.append(f"{field} {value} !{op} {limit}")
    return broken


def eligible_machines_by_model(plan: Plan, offers: Sequence[Offer]) -> dict[str, set[int]]:
    """Distinct machines per GPU model among the offers the plan did not exclude."""
    excluded = {e.offer_id for e in plan.excluded}
    by_model: dict[str, set[int]] = defaultdict(set)
    for offer in offers:
        if offer.id not in excluded:
            by_model[offer.gpu_name].add(offer.machine_id)
    return by_model


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Manifest:
    return load_manifest(fast_manifest(tmp_path_factory.mktemp("plan")))


@pytest.fixture(scope="module")
def offers() -> list[Offer]:
    return offers_of(world_rows())


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with await SqliteStore.open(tmp_path / "plan.sqlite3") as s:
        yield s


# --- coverage and size --------------------------------------------------------------------------------------


def test_the_shortlist_is_capped_covers_each_model_with_two_hosts_and_explains_each_candidate(
        manifest: Manifest, offers: list[Offer]) -> None:
    plan = plan_for(manifest, offers)
    shortlist = manifest.shortlist
    assert shortlist.max_candidates == 4 and shortlist.min_hosts_per_model == 2
    assert 0 < len(plan.candidates) <= shortlist.max_candidates
    per_model: dict[str, set[int]] = defaultdict(set)
    for c in plan.candidates:
        per_model[c.offer.gpu_name].add(c.offer.machine_id)
    available = eligible_machines_by_model(plan, offers)
    for model, machines in per_model.items():
        assert len(machines) >= min(shortlist.min_hosts_per_model, len(available[model])), model
    assert len({c.candidate_id for c in plan.candidates}) == len(plan.candidates)
    for c in plan.candidates:
        assert c.hypothesis.strip(), c.candidate_id
        assert c.offer.gpu_name in c.hypothesis and f"{c.offer.dph_total:.3f}" in c.hypothesis
        assert not c.prior_is_measured and "dlperf prior" in c.hypothesis
        assert 0 < c.expected_spend_usd <= c.max_spend_usd
        assert c.time_cap_s <= manifest.budget.max_instance_lifetime_s
    for r in plan.reserves:
        assert r.hypothesis.strip() and "reserve" in r.hypothesis
    assert plan.offer_ids == {c.offer.id for c in (*plan.candidates, *plan.reserves)}
    assert plan.spend_upper_bound_usd <= plan.budget_usd == manifest.budget.max_usd
    assert plan.expected_spend_usd <= plan.spend_upper_bound_usd


@pytest.mark.parametrize("max_candidates", [4, 5, 7, 8])
def test_every_chosen_model_gets_min_hosts_distinct_machines_where_the_market_has_them(
        manifest: Manifest, offers: list[Offer], max_candidates: int) -> None:
    """Host luck must not pass for GPU quality (docs/method.md, Shortlist): a model is measured on >= 2 hosts when the
    market has 2, whatever max_candidates is — an odd cap must not leave the last model with one host."""
    m = with_shortlist(manifest, max_candidates=max_candidates)
    plan = plan_for(m, offers)
    assert len(plan.candidates) <= max_candidates
    available = eligible_machines_by_model(plan, offers)
    per_model: dict[str, set[int]] = defaultdict(set)
    for c in plan.candidates:
        per_model[c.offer.gpu_name].add(c.offer.machine_id)
    thin = {model: len(machines) for model, machines in per_model.items()
            if len(machines) < min(m.shortlist.min_hosts_per_model, len(available[model]))}
    assert not thin, f"models measured on too few hosts (market has more): {thin}"


def test_a_one_model_market_fills_the_shortlist_by_prior_cost(manifest: Manifest, offers: list[Offer]) -> None:
    """Best models first, min hosts per model, *then the rest by prior cost* (plan.py's ``_pick``; docs/method.md keeps
    6-8 offers): a query for one GPU model must still shortlist max_candidates hosts when that many qualify."""
    shortlist = manifest.shortlist
    qualifying = [o for o in offers if not query_violations(o, shortlist.query) and shortlist.max_dph is not None
                  and o.dph_total <= shortlist.max_dph and (o.reliability or 0.0) >= shortlist.min_reliability]
    model = max({o.gpu_name for o in qualifying}, key=lambda name: sum(o.gpu_name == name for o in qualifying))
    one_model = [o for o in qualifying if o.gpu_name == model]
    assert len({o.machine_id for o in one_model}) > shortlist.max_candidates  # enough qualifying hosts
    plan = plan_for(manifest, one_model)
    assert plan.excluded == ()
    wanted = shortlist.max_candidates
    got = len(plan.candidates)
    assert got == wanted, f"{got} {model} candidates (and {len(plan.reserves)} reserves) for {wanted} slots"


def test_a_market_with_nothing_acceptable_gives_an_empty_plan_with_every_offer_explained(
        manifest: Manifest, offers: list[Offer]) -> None:
    unreliable = [replace(o, reliability=0.5) for o in offers[:10]]
    plan = plan_for(manifest, unreliable)
    assert plan.candidates == () and plan.reserves == ()
    assert {e.offer_id for e in plan.excluded} == {o.id for o in unreliable}
    assert plan.spend_upper_bound_usd == 0.0 and plan.expected_spend_usd == 0.0


# --- filters re-checked client-side -------------------------------------------------------------------------


def test_reliability_and_price_are_rechecked_client_side(manifest: Manifest) -> None:
    """Server-side filters have been seen to drop silently: an offer below min reliability or over max_dph that the
    server let through is excluded, with the reason, and never shortlisted."""
    rows = world_rows()
    baseline = plan_for(manifest, offers_of(rows))
    first, second = baseline.candidates[0].offer, baseline.candidates[1].offer
    assert manifest.shortlist.max_dph == 2.5 and manifest.shortlist.min_reliability == 0.98
    for row in rows:
        if row["id"] == first.id:
            row["reliability"] = row["reliability2"] = 0.951
        if row["id"] == second.id:
            row["dph_total"] = 3.75
    plan = plan_for(manifest, offers_of(rows))
    reasons = {e.offer_id: e.reason for e in plan.excluded}
    assert "reliability 0.951" in reasons[first.id] and "0.98" in reasons[first.id]
    assert "$3.75/h" in reasons[second.id] and "$2.50/h" in reasons[second.id]
    assert {e.machine_id for e in plan.excluded if e.offer_id in (first.id, second.id)} == \
        {first.machine_id, second.machine_id}
    chosen = {c.offer.id for c in (*plan.candidates, *plan.reserves)}
    assert first.id not in chosen and second.id not in chosen
    for c in (*plan.candidates, *plan.reserves):
        assert c.offer.reliability is not None and c.offer.reliability >= manifest.shortlist.min_reliability
        assert manifest.shortlist.max_dph is not None and c.offer.dph_total <= manifest.shortlist.max_dph


def test_unrentable_offers_are_excluded_with_a_reason(manifest: Manifest) -> None:
    rows = world_rows()
    baseline = plan_for(manifest, offers_of(rows))
    taken = baseline.candidates[0].offer
    for row in rows:
        if row["id"] == taken.id:
            row["rentable"], row["rented"] = False, True
    plan = plan_for(manifest, offers_of(rows))
    assert {e.offer_id: e.reason for e in plan.excluded}[taken.id] == "not rentable"
    assert taken.id not in plan.offer_ids


def test_an_offer_without_the_disk_a_rental_takes_is_excluded(manifest: Manifest) -> None:
    """Every rental takes RENTED_DISK_GIB of disk: an offer with less free disk cannot be rented at that size."""
    from vastui.campaign.startup import RENTED_DISK_GIB
    rows = world_rows()
    small = plan_for(manifest, offers_of(rows)).candidates[0].offer
    for row in rows:
        if row["id"] == small.id:
            row["disk_space"] = RENTED_DISK_GIB - 2
    plan = plan_for(manifest, offers_of(rows))
    reason = {e.offer_id: e.reason for e in plan.excluded}[small.id]
    assert "30 GB of free disk" in reason and f"{RENTED_DISK_GIB:g} GiB" in reason
    assert small.id not in plan.offer_ids


def test_the_querys_numeric_filters_are_rechecked_client_side(manifest: Manifest, offers: list[Offer]) -> None:
    """method.md (Shortlist): "Check numeric filters client-side too: server-side filters have been reported to drop
    silently." Here the server dropped every filter (the whole world comes back): no candidate or reserve may break
    the manifest's query (e.g. num_gpus=1, gpu_ram>=16, inet_down>200)."""
    query = manifest.shortlist.query
    assert "num_gpus=1" in query and "gpu_ram>=16" in query
    plan = plan_for(manifest, offers)
    breaking = {c.offer.id: query_violations(c.offer, query) for c in (*plan.candidates, *plan.reserves)}
    assert not {k: v for k, v in breaking.items() if v}, "shortlisted offers break the manifest's query"


# --- host knowledge and bad hosts ---------------------------------------------------------------------------


async def test_bad_hosts_in_force_are_excluded_and_shown_expired_ones_are_not(
        manifest: Manifest, offers: list[Offer], store: SqliteStore) -> None:
    baseline = plan_for(manifest, offers)
    banned, lapsed, forever = (c.offer for c in baseline.candidates[:3])
    await store.record_bad_host(machine_id=banned.machine_id, reason="readiness deadline missed", evidence_json="{}",
                                recorded_at=NOW - DAY, expires_at=NOW + DAY)
    await store.record_bad_host(machine_id=lapsed.machine_id, reason="wrong output last month", evidence_json="{}",
                                recorded_at=NOW - 40 * DAY, expires_at=NOW - DAY)
    await store.record_bad_host(machine_id=forever.machine_id, reason="died mid-run", evidence_json="{}",
                                recorded_at=NOW - DAY, expires_at=None)
    bad = await store.bad_hosts(now=NOW)
    assert [b.is_expired for b in bad] == [False, True, False]

    plan = plan_for(manifest, offers, bad_hosts=bad)
    reasons = {e.machine_id: e.reason for e in plan.excluded}
    assert reasons[banned.machine_id] == "bad host: readiness deadline missed"
    assert reasons[forever.machine_id] == "bad host: died mid-run"
    assert lapsed.machine_id not in reasons
    shortlisted = {c.offer.machine_id for c in (*plan.candidates, *plan.reserves)}
    assert banned.machine_id not in shortlisted and forever.machine_id not in shortlisted
    assert lapsed.machine_id in {c.offer.machine_id for c in plan.candidates}
    text = render_plan(plan)
    assert "excluded: " in text and f"{len(plan.excluded)} offers" in text


async def test_a_host_measured_before_gets_a_measured_prior_and_teaches_the_scale(
        manifest: Manifest, offers: list[Offer], store: SqliteStore) -> None:
    baseline = plan_for(manifest, offers)
    known = baseline.candidates[0].offer
    assert known.dlperf
    excluded = {e.offer_id for e in baseline.excluded}
    pivot = dlperf_pivot([o for o in offers if o.id not in excluded])
    measured = 2.0 * compressed_dlperf(known.dlperf / known.num_gpus, pivot=pivot)
    await store.save_manifest(digest=manifest.digest, name=manifest.workload.name, toml_text="[workload]\n",
                              stored_at=NOW - DAY)
    await store.create_campaign(campaign_id="cbefore", manifest_digest=manifest.digest, created_at=NOW - DAY,
                                phase="finished")
    first = Profile.first(manifest.tuning, gpu_count=known.num_gpus)   # what this plan races it at
    for throughput, status in ((0.5 * measured, RunStatus.OK), (measured, RunStatus.OK),
                               (None, RunStatus.ERROR)):
        run = await store.start_run(campaign_id="cbefore", instance_id=None, machine_id=known.machine_id,
                                    gpu_name=known.gpu_name, num_gpus=known.num_gpus,
                                    workload_digest=manifest.digest, variant_json=first.to_json(),
                                    started_at=NOW - DAY)
        await store.finish_run(run_id=run.run_id, status=status, at=NOW - DAY + 600,
                               throughput_units_per_s=throughput)
    knowledge = await store.host_knowledge(workload_digest=manifest.digest,
                                           machine_ids=sorted({o.machine_id for o in offers}))
    assert len(knowledge) == 1 and knowledge[0].best is not None

    plan = plan_for(manifest, offers, knowledge=knowledge)
    by_machine = {c.offer.machine_id: c for c in plan.candidates}
    mine = by_machine[known.machine_id]
    assert mine.prior_is_measured
    assert mine.prior_throughput_units_per_s == pytest.approx(measured)
    assert "measured" in mine.hypothesis and "2 of 3 runs ok" in mine.hypothesis
    others = [c for c in plan.candidates if c.offer.machine_id != known.machine_id]
    assert others
    for c in others:  # unmeasured hosts: compressed dlperf x the scale learned on the measured one (2.0 here)
        assert not c.prior_is_measured
        assert c.offer.dlperf is not None
        expected = compressed_dlperf(c.offer.dlperf / c.offer.num_gpus, pivot=pivot) * c.gpu_count * 2.0
        assert c.prior_throughput_units_per_s == pytest.approx(expected, rel=1e-6)
        assert "learned scale 2.00" in c.hypothesis

    # measured at another profile only (more loaders than this plan races at): no prior for this one, whatever it did
    other = replace(first, loaders=(first.loaders or 1) + 7)
    run = await store.start_run(campaign_id="cbefore", instance_id=None, machine_id=known.machine_id,
                                gpu_name=known.gpu_name, num_gpus=known.num_gpus, workload_digest=manifest.digest,
                                variant_json=other.to_json(), started_at=NOW - DAY)
    await store.finish_run(run_id=run.run_id, status=RunStatus.OK, at=NOW - DAY + 600,
                           throughput_units_per_s=3.0 * measured)
    knowledge = await store.host_knowledge(workload_digest=manifest.digest,
                                           machine_ids=sorted({o.machine_id for o in offers}))
    mine = next(c for c in plan_for(manifest, offers, knowledge=knowledge).candidates
                if c.offer.machine_id == known.machine_id)
    assert mine.prior_is_measured and mine.prior_throughput_units_per_s == pytest.approx(measured)
    elsewhere = [replace(k, runs=tuple(r for r in k.runs if r.variant_json == other.to_json())) for k in knowledge]
    mine = next(c for c in plan_for(manifest, offers, knowledge=elsewhere).candidates
                if c.offer.machine_id == known.machine_id)
    assert not mine.prior_is_measured
    assert mine.prior_throughput_units_per_s < measured      # the dlperf prior, not the 3x it did at the other
    assert "at another profile only" in mine.hypothesis


# --- money and rendering ------------------------------------------------------------------------------------


def test_the_spend_upper_bound_never_exceeds_the_budget(tmp_path: Path, offers: list[Offer]) -> None:
    roomy = load_manifest(fast_manifest(tmp_path / "roomy", budget_usd=50.0))
    plan = plan_for(roomy, offers)
    caps = sum(c.max_spend_usd for c in plan.candidates)
    assert plan.spend_upper_bound_usd == pytest.approx(caps) and caps <= plan.budget_usd

    tight = load_manifest(fast_manifest(tmp_path / "tight", budget_usd=0.05))
    plan = plan_for(tight, offers)
    assert sum(c.max_spend_usd for c in plan.candidates) > 0.05
    assert plan.spend_upper_bound_usd == pytest.approx(0.05) and plan.budget_usd == pytest.approx(0.05)


def test_render_plan_shows_each_candidate_its_price_the_spend_cap_and_the_budget(
        manifest: Manifest, offers: list[Offer]) -> None:
    plan = plan_for(manifest, offers)
    text = render_plan(plan)
    lines = text.splitlines()
    assert CAMPAIGN in lines[0] and manifest.shortlist.query in lines[0]
    for c in plan.candidates:
        line = next(row for row in lines if re.search(rf"\b{c.offer.id}\b", row) and row.startswith(c.candidate_id))
        assert f"{c.offer.dph_total:.3f}" in line and str(c.offer.machine_id) in line and c.hypothesis in line
    for r in plan.reserves:
        assert str(r.offer.id) in text
    assert f"at most ${plan.spend_upper_bound_usd:.2f}" in text
    assert f"budget ${plan.budget_usd:.2f}" in text
    assert f"{plan.max_instances} instances at once" in text


def bundles(offer: Offer) -> list[Offer]:
    """The offer and its smaller bundles: an 8-GPU machine is also offered as 4, 2 and 1 GPUs (ids made unique)."""
    out = [offer]
    gpus, k = offer.num_gpus // 2, 1
    while gpus >= 1:
        share = gpus / offer.num_gpus
        out.append(replace(offer, id=offer.id + k * 5_000_000, num_gpus=gpus, dph_total=offer.dph_total * share,
                           dlperf=(offer.dlperf or 0.0) * share, gpu_total_ram=None))
        gpus, k = gpus // 2, k + 1
    return out


def test_a_machine_offered_as_several_gpu_bundles_is_shortlisted_once(manifest: Manifest,
                                                                      offers: list[Offer]) -> None:
    """A multi-GPU machine carries several offers (1, 2, 4... GPUs). When the workload may scale (gpu_counts 1, 2, 4),
    the plan must still rent each machine at most once: two candidates on one machine share its host and its luck,
    and a reserve on a candidate's machine is no independent second host."""
    m = with_shortlist(manifest, max_candidates=8, gpu_counts=(1, 2, 4))
    assert "num_gpus" not in m.shortlist.query
    market = [b for offer in offers for b in bundles(offer)]
    plan = plan_for(m, market)
    candidates = [c.offer.machine_id for c in plan.candidates]
    assert len(candidates) == len(set(candidates)), \
        "machine, GPUs: " + ", ".join(f"{c.offer.machine_id}, {c.offer.num_gpus}" for c in plan.candidates)
    shortlisted = [c.offer.machine_id for c in (*plan.candidates, *plan.reserves)]
    assert len(shortlisted) == len(set(shortlisted))


# --- property ------------------------------------------------------------------------------------------------

_SEEDS = (3, 7, 11)


@functools.cache
def small_world(seed: int) -> tuple[Offer, ...]:
    return tuple(offers_of(world_rows(seed, n_machines=60)))


@settings(max_examples=50, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.sampled_from(_SEEDS), keep=st.lists(st.booleans(), min_size=60, max_size=60),
       split=st.lists(st.booleans(), min_size=60, max_size=60), max_candidates=st.integers(1, 8),
       min_hosts=st.integers(1, 3), gpu_counts=st.sampled_from([(1,), (1, 2), (1, 2, 4), (2, 4, 8)]))
def test_candidates_never_share_a_machine(manifest: Manifest, seed: int, keep: list[bool], split: list[bool],
                                          max_candidates: int, min_hosts: int, gpu_counts: tuple[int, ...]) -> None:
    """Whatever the market (a machine may carry several offers), no machine is rented twice as a candidate."""
    offers: list[Offer] = []
    for index, offer in enumerate(small_world(seed)):
        if keep[index]:
            offers.extend(bundles(offer) if split[index] else [offer])
    m = with_shortlist(manifest, max_candidates=max_candidates, min_hosts=min_hosts, gpu_counts=gpu_counts)
    plan = plan_for(m, offers)
    machines = [c.offer.machine_id for c in plan.candidates]
    assert len(machines) == len(set(machines))
    assert len(plan.candidates) <= max_candidates
    assert {c.offer.id for c in plan.candidates} <= {o.id for o in offers}
    assert plan.spend_upper_bound_usd <= plan.budget_usd


def test_a_third_host_of_a_model_in_comes_before_a_far_worse_model(manifest: Manifest) -> None:
    """Machines go by prior cost, a model entering with its two best hosts: with five slots, models A (three hosts
    at $0.10-0.30/h) and B (two at $0.40-0.50/h) fill them, A's third host included, and the lone C at $2.00/h stays
    out — taking models whole in the order of their best host used to give C the last slot, although every A and B
    host is the better prior."""
    template = next(row for row in world_rows() if not query_violations(
        Offer.from_api(row, where="template"), manifest.shortlist.query) and row["dph_total"] < 0.3)
    market = [("A", 0.10), ("A", 0.20), ("A", 0.30), ("B", 0.40), ("B", 0.50), ("C", 2.00)]
    rows = []
    for index, (model, price) in enumerate(market):
        row = dict(template, id=900 + index, machine_id=9000 + index, gpu_name=f"RTX {model}000", dph_total=price)
        rows.append(row)
    offers = offers_of(rows)
    assert [o.dph_total for o in offers] == [price for _model, price in market]
    plan = plan_for(with_shortlist(manifest, max_candidates=5), offers)
    assert plan.excluded == ()
    assert sorted(c.offer.machine_id for c in plan.candidates) == [9000, 9001, 9002, 9003, 9004]
    assert [r.offer.machine_id for r in plan.reserves] == [9005]


def test_the_plans_prior_cost_is_the_races_starting_cost_under_the_billing_model(
        manifest: Manifest, offers: list[Offer]) -> None:
    """The shortlist is ranked by the figure the race starts from: the predicted pull bills the disk, not the GPUs
    (the plan used to charge full $/h through the pull, ranking slow-pull hosts far below what they cost)."""
    plan = plan_for(manifest, offers)
    assert plan.candidates
    for c in (*plan.candidates, *plan.reserves):
        inputs = prior_cost_inputs(c, manifest)
        assert inputs.loading_s == c.predicted_pull_s and inputs.startup_s == 0.0
        assert c.prior_cost_per_unit_usd == pytest.approx(cost_per_accepted_unit(
            inputs, units=manifest.production_units, throughput_units_per_s=c.prior_throughput_units_per_s))
    slow = next(o for o in offers if o.id == plan.candidates[0].offer.id)
    quick, crawl = replace(slow, inet_down=5000.0), replace(slow, inet_down=250.0)
    costs = [plan_for(with_shortlist(manifest, max_candidates=1, min_hosts=1), [o]).candidates[0]
             for o in (quick, crawl)]
    extra_s = costs[1].predicted_pull_s - costs[0].predicted_pull_s
    disk_per_s = prior_cost_inputs(costs[0], manifest).storage_usd_per_hour / 3600.0
    assert extra_s > 500.0
    assert (costs[1].prior_cost_per_unit_usd - costs[0].prior_cost_per_unit_usd) * manifest.production_units == \
        pytest.approx(extra_s * disk_per_s, rel=1e-6)


def test_a_gpu_twice_as_fast_by_dlperf_is_not_assumed_worth_1_6_times_the_price(manifest: Manifest) -> None:
    """Before anything is measured, dlperf's spread is trusted by half its log-ratio (DLPERF_EXPONENT_PRIOR): a
    GPU with twice the dlperf is expected ~1.41x as fast, so at 1.6x the $/h the slower one is the better prior
    (taking dlperf at its word, 2x for 1.6x, ranked the dear one first)."""
    template = next(row for row in world_rows() if not query_violations(
        Offer.from_api(row, where="template"), manifest.shortlist.query) and row["dph_total"] < 0.3)
    price, dlperf = 0.20, float(template["dlperf"])
    rows = [dict(template, id=950, machine_id=9500, gpu_name="RTX S000", dlperf=dlperf, dph_total=price,
                 dph_base=price),
            dict(template, id=951, machine_id=9501, gpu_name="RTX F000", dlperf=2 * dlperf, dph_total=1.6 * price,
                 dph_base=1.6 * price)]
    plan = plan_for(with_shortlist(manifest, max_candidates=1, min_hosts=1), offers_of(rows))
    assert [c.offer.machine_id for c in plan.candidates] == [9500]
    slow, fast = (next(c for c in (*plan.candidates, *plan.reserves) if c.offer.machine_id == m) for m in (9500, 9501))
    assert fast.prior_throughput_units_per_s / slow.prior_throughput_units_per_s == \
        pytest.approx(2 ** DLPERF_EXPONENT_PRIOR)


def test_a_cheap_gpu_whose_dlperf_falls_well_short_of_the_slo_floor_goes_after_one_that_reaches_it(
        manifest: Manifest) -> None:
    """The compressed prior lifts slow GPUs towards the SLO floor; one whose dlperf taken at its word is under
    SLO_SHORTFALL_PRIOR of the floor is ranked after the machines that are not, however cheap, and says why
    (otherwise a small shortlist can fill with machines of which none meets the SLO)."""
    floor = manifest.slo.throughput_min_units_per_s
    assert floor is not None
    template = next(row for row in world_rows() if not query_violations(
        Offer.from_api(row, where="template"), manifest.shortlist.query) and row["dph_total"] < 0.3)
    slow_dlperf = 0.5 * floor
    assert slow_dlperf < SLO_SHORTFALL_PRIOR * floor
    rows = [dict(template, id=960, machine_id=9600, gpu_name="RTX S000", dlperf=slow_dlperf, dph_total=0.05,
                 dph_base=0.05),
            dict(template, id=961, machine_id=9601, gpu_name="RTX F000", dlperf=1.5 * floor, dph_total=0.30,
                 dph_base=0.30)]
    plan = plan_for(with_shortlist(manifest, max_candidates=1, min_hosts=1), offers_of(rows))
    slow, fast = (next(c for c in (*plan.candidates, *plan.reserves) if c.offer.machine_id == m) for m in (9600, 9601))
    assert slow.prior_cost_per_unit_usd < fast.prior_cost_per_unit_usd     # the cheaper prior cost ...
    assert [c.offer.machine_id for c in plan.candidates] == [9601]        # ... yet it goes second
    assert "short of the SLO floor" in slow.hypothesis and "short of" not in fast.hypothesis


def test_a_gpu_short_of_the_slo_floor_at_fp32_keeps_its_place_when_a_half_precision_it_runs_may_lift_it(
        manifest: Manifest) -> None:
    """A machine under SLO_SHORTFALL_PRIOR of the floor at the first profile (fp32) is judged at the half-precision
    lift prior when the manifest lets tuning try bf16 and its GPU runs bf16 natively (compute capability 8.0 on):
    the cheapest machine meeting the SLO at bf16 must get measured. A GPU without native bf16 is still demoted."""
    floor = manifest.slo.throughput_min_units_per_s
    assert floor is not None
    template = next(row for row in world_rows() if not query_violations(
        Offer.from_api(row, where="template"), manifest.shortlist.query) and row["dph_total"] < 0.3)
    slow_dlperf = 0.5 * floor
    assert slow_dlperf < SLO_SHORTFALL_PRIOR * floor <= slow_dlperf * HALF_PRECISION_LIFT_PRIOR
    bf16 = replace(manifest, tuning=replace(manifest.tuning, precisions=("fp32", "bf16")))
    one = with_shortlist(bf16, max_candidates=1, min_hosts=1)
    fast = dict(template, id=961, machine_id=9601, gpu_name="RTX F000", dlperf=1.5 * floor, dph_total=0.30,
                dph_base=0.30, compute_cap=890)

    def first(compute_cap: int, m: Manifest) -> tuple[int, str]:
        slow = dict(template, id=960, machine_id=9600, gpu_name="RTX S000", dlperf=slow_dlperf, dph_total=0.05,
                    dph_base=0.05, compute_cap=compute_cap)
        plan = plan_for(m, offers_of([slow, fast]))
        hypothesis = next(c.hypothesis for c in (*plan.candidates, *plan.reserves) if c.offer.machine_id == 9600)
        return plan.candidates[0].offer.machine_id, hypothesis

    chosen, why = first(860, one)
    assert chosen == 9600 and "kept in line for a half precision" in why
    assert first(750, one)[0] == 9601                                   # Turing: no native bf16
    assert first(860, with_shortlist(manifest, max_candidates=1, min_hosts=1))[0] == 9601   # fp32 only


async def test_the_shortlist_search_prices_offers_at_the_disk_a_rental_takes(manifest: Manifest,
                                                                              store: SqliteStore) -> None:
    """The approval's price must include the storage actually rented: the search asks the marketplace to price
    ``dph_total`` at RENTED_DISK_GIB (``allocated_storage``), not the CLI's 5 GB default."""
    import json
    import types

    import httpx

    from tests.fakes import FakeClock
    from vastui.campaign.session import plan_campaign
    from vastui.campaign.startup import RENTED_DISK_GIB
    from vastui.config import Secret
    from vastui.sim.app import create_app
    from vastui.sim.factory import build_market
    from vastui.vast.client import HttpVastClient

    clock = FakeClock()
    inner = httpx.ASGITransport(app=create_app(build_market(SEED, clock=clock, api_key="plan-key", n_machines=60)))
    bodies: list[dict[str, object]] = []

    class Recording(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.path == "/api/v0/bundles/":
                bodies.append(json.loads(await request.aread()))
            return await inner.handle_async_request(request)

    async with HttpVastClient(base_url="http://sim.test", api_key=Secret("plan-key"), clock=clock,
                              transport=Recording()) as client:
        services = types.SimpleNamespace(market=client, store=store, clock=clock)
        plan = await plan_campaign(services, manifest=manifest, campaign_id="cdisk")  # type: ignore[arg-type]
    assert plan.candidates and [body["allocated_storage"] for body in bodies] == [RENTED_DISK_GIB]
