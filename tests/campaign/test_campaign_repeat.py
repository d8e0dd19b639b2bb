"""A repeat campaign's plan (campaign/repeat.py): what earlier campaigns measured, read back from a real SQLite store,
shown in the plan (``render_plan`` and ``vastui campaign plan`` against the simulator over HTTP), fresh known hosts
re-verified with their history, and the calibrated prior's history observations."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.fakes import FakeClock
from vastui.bench.calibration import Calibration, Observation
from vastui.bench.cost import CostInputs
from vastui.bench.manifest import Manifest, load_manifest
from vastui.bench.select import Race
from vastui.bench.stats import Block
from vastui.bench.tuning import Profile
from vastui.campaign.charges import prior_cost_inputs
from vastui.campaign.inherited import InheritedScreening
from vastui.campaign.plan import CALIBRATED_AT, Plan, build_plan, render_plan
from vastui.campaign.prior import compressed_dlperf, dlperf_pivot, workload_scale
from vastui.campaign.repeat import HISTORY_HALF_LIFE_DAYS, Reverification, history_weight, race_candidate
from vastui.campaign.startup import RENTED_DISK_GIB
from vastui.config import Secret
from vastui.sim.factory import build_market
from vastui.sim.server import SimServer
from vastui.store import SqliteStore
from vastui.store.records import BadHost, HostKnowledge, OfferSnapshot, RunStatus
from vastui.vast.client import HttpVastClient
from vastui.vast.models import Offer

NOW = 1_800_000_000.0
DAY = 86_400.0
API_KEY = "repeat-test-api-key-51c2"
WAIT_S = 240.0   # a guard against a hang on a busy machine, not a speed check
UNLISTED = 9_999_999


@pytest.fixture
def manifest(tmp_path: Path) -> Manifest:
    return load_manifest(fast_manifest(tmp_path / "m"))


@pytest.fixture
async def listed() -> AsyncIterator[str]:
    """The simulated market's URL: served over HTTP on loopback, its clock standing at NOW."""
    market = build_market(7, clock=FakeClock(NOW), api_key=API_KEY, n_machines=120)
    async with SimServer(market) as server:
        yield server.url


async def offers_at(url: str, manifest: Manifest) -> list[Offer]:
    async with HttpVastClient(base_url=url, api_key=Secret(API_KEY), clock=FakeClock(NOW)) as client:
        return await client.search_offers(manifest.shortlist.query, order="dlperf_usd-", limit=400,
                                          storage_gib=RENTED_DISK_GIB)


async def remember(store: SqliteStore, manifest: Manifest, *, machine_id: int, gpu_name: str, num_gpus: int,
                   throughputs: Sequence[float], days_ago: float, campaign_id: str = "cbefore",
                   variant: Profile | None = None) -> None:
    """Earlier runs of this workload on one host, finished ``days_ago`` days before NOW, at ``variant`` (the
    manifest's first profile unless given)."""
    variant = variant or Profile.first(manifest.tuning, gpu_count=num_gpus)
    await store.save_manifest(digest=manifest.digest, name=manifest.workload.name, toml_text="[workload]\n",
                              stored_at=NOW - 90 * DAY)
    if await store.campaign(campaign_id) is None:
        await store.create_campaign(campaign_id=campaign_id, manifest_digest=manifest.digest,
                                    created_at=NOW - 90 * DAY, phase="finished")
    for theta in throughputs:
        run = await store.start_run(campaign_id=campaign_id, instance_id=None, machine_id=machine_id,
                                    gpu_name=gpu_name, num_gpus=num_gpus, workload_digest=manifest.digest,
                                    variant_json=variant.to_json(), started_at=NOW - days_ago * DAY - 600)
        await store.finish_run(run_id=run.run_id, status=RunStatus.OK, at=NOW - days_ago * DAY,
                               throughput_units_per_s=theta)


class Earlier:
    """A store holding earlier runs: a fresh host (2 days), a stale one (40 days), one no longer listed, and a bad
    host flagged now; the two listed ones measured well above their dlperf prior so the plan shortlists them."""

    def __init__(self, manifest: Manifest, offers: list[Offer]) -> None:
        baseline = build_plan(campaign_id="base", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
        self.fresh, self.stale, self.bad = (c.offer for c in baseline.candidates[:3])
        kept = [o for o in offers if o.id not in {e.offer_id for e in baseline.excluded}]
        self.pivot = dlperf_pivot(kept)

    def prior(self, offer: Offer) -> float:
        assert offer.dlperf
        return compressed_dlperf(offer.dlperf / offer.num_gpus, pivot=self.pivot)

    async def write(self, store: SqliteStore, manifest: Manifest) -> None:
        await remember(store, manifest, machine_id=self.fresh.machine_id, gpu_name=self.fresh.gpu_name,
                       num_gpus=1, throughputs=[3.0 * self.prior(self.fresh), 3.3 * self.prior(self.fresh)],
                       days_ago=2.0)
        await remember(store, manifest, machine_id=self.stale.machine_id, gpu_name=self.stale.gpu_name,
                       num_gpus=1, throughputs=[3.0 * self.prior(self.stale)], days_ago=40.0)
        await remember(store, manifest, machine_id=UNLISTED, gpu_name="RTX 3090", num_gpus=1, throughputs=[40.0],
                       days_ago=1.0)
        await store.record_bad_host(machine_id=self.bad.machine_id, reason="canary output digest differs",
                                    evidence_json="{}", recorded_at=NOW - DAY, expires_at=NOW + 30 * DAY)


async def plan_from_store(store: SqliteStore, manifest: Manifest, offers: list[Offer]) -> Plan:
    knowledge = await store.host_knowledge(workload_digest=manifest.digest)
    bad = await store.bad_hosts(now=NOW)
    return build_plan(campaign_id="cagain", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=bad,
                      now=NOW)


async def earlier_plan(tmp_path: Path, manifest: Manifest, listed: str) -> tuple[Earlier, Plan, list[Offer]]:
    """The listed offers, a store holding ``Earlier``'s runs (at ``tmp_path``/c.sqlite3), and the plan made on it."""
    offers = await offers_at(listed, manifest)
    earlier = Earlier(manifest, offers)
    store = await SqliteStore.open(tmp_path / "c.sqlite3")
    try:
        await earlier.write(store, manifest)
        plan = await plan_from_store(store, manifest, offers)
    finally:
        await store.close()
    return earlier, plan, offers


async def test_a_fresh_known_host_is_re_verified_on_its_history_and_a_stale_one_is_raced_again(
        tmp_path: Path, manifest: Manifest, listed: str) -> None:
    earlier, plan, offers = await earlier_plan(tmp_path, manifest, listed)
    by_machine = {c.offer.machine_id: c for c in plan.candidates}
    fresh, stale = by_machine[earlier.fresh.machine_id], by_machine[earlier.stale.machine_id]
    assert fresh.reverified is not None and stale.reverified is None
    assert fresh.reverified.throughputs_units_per_s == pytest.approx(
        (3.0 * earlier.prior(earlier.fresh), 3.3 * earlier.prior(earlier.fresh)))
    assert fresh.reverified.campaign_ids == ("cbefore",) and fresh.reverified.age_days == pytest.approx(2.0)
    assert "re-verified on 2 earlier run(s)" in fresh.hypothesis
    assert earlier.bad.machine_id not in by_machine
    assert {k.machine_id for k in plan.known} == {earlier.fresh.machine_id, earlier.stale.machine_id, UNLISTED}
    unlisted = next(k for k in plan.known if k.machine_id == UNLISTED)
    assert not unlisted.listed and unlisted.cost_per_unit_usd is None and unlisted.median_units_per_s == 40.0

    text = render_plan(plan)
    section = text[text.index("known from earlier campaigns"):]
    assert "3 host(s) measured, 2 listed now, 1 re-verified in this plan" in section
    assert "within 14 days" in section
    fresh_line = next(line for line in section.splitlines() if f" {earlier.fresh.machine_id} " in line)
    assert f"re-verified as {fresh.candidate_id}" in fresh_line and "2.0 days ago" in fresh_line
    assert "2/2" in fresh_line
    stale_line = next(line for line in section.splitlines() if f" {earlier.stale.machine_id} " in line)
    assert "40.0 days ago" in stale_line and "raced from scratch" in stale_line
    assert "not listed" in next(line for line in section.splitlines() if f" {UNLISTED} " in line)
    assert f"machine {earlier.bad.machine_id}: canary output digest differs" in section


async def test_an_empty_store_says_nothing_is_known(manifest: Manifest, listed: str) -> None:
    offers = await offers_at(listed, manifest)
    plan = build_plan(campaign_id="c", manifest=manifest, offers=offers, knowledge=(), bad_hosts=(), now=NOW)
    assert plan.known == () and plan.history == ()
    assert all(c.reverified is None for c in plan.candidates)
    assert "no host measured yet" in render_plan(plan)


async def test_the_history_relates_each_listed_known_host_to_the_prior_an_unknown_one_carries_older_ones_weighing_less(
        tmp_path: Path, manifest: Manifest, listed: str) -> None:
    earlier, plan, offers = await earlier_plan(tmp_path, manifest, listed)
    assert len(plan.history) == 2    # the unlisted host has no offer to take a dlperf prior from
    # the prior an unknown host carries in this plan (no measured shortcut): compressed dlperf over the offers it
    # ranks, times the scale the known hosts teach (3 and 3.15 times their priors: ~3), as the candidates' is
    pivot = dlperf_pivot([o for o in offers if o.id not in {e.offer_id for e in plan.excluded}])
    knowledge = await _knowledge(tmp_path / "c.sqlite3", manifest)
    scale = workload_scale(knowledge, {o.machine_id: o for o in offers}, pivot=pivot)
    assert scale is not None and 2.5 < scale < 4.0
    unknown = next(c for c in plan.candidates if not c.prior_is_measured)
    assert unknown.offer.dlperf
    assert unknown.prior_throughput_units_per_s == pytest.approx(
        compressed_dlperf(unknown.offer.dlperf / unknown.offer.num_gpus, pivot=pivot) * scale)

    def seen(offer: Offer, measured: float) -> Observation:
        assert offer.dlperf
        prior = compressed_dlperf(offer.dlperf / offer.num_gpus, pivot=pivot) * scale
        return next(o for o in plan.history if o.prior_units_per_s == pytest.approx(prior)
                    and o.measured_units_per_s == pytest.approx(measured))

    fresh = seen(earlier.fresh, 3.15 * earlier.prior(earlier.fresh))     # the median of its two runs
    stale = seen(earlier.stale, 3.0 * earlier.prior(earlier.stale))
    assert fresh.model == f"{earlier.fresh.gpu_name} x1" and stale.model == f"{earlier.stale.gpu_name} x1"
    assert fresh.weight == pytest.approx(0.5 ** (2.0 / HISTORY_HALF_LIFE_DAYS))
    assert stale.weight == pytest.approx(0.5 ** (40.0 / HISTORY_HALF_LIFE_DAYS))
    assert "calibrated prior starts from 2 earlier measurement(s)" in render_plan(plan)


async def test_a_known_host_no_longer_listed_keeps_its_place_in_the_history_by_the_offer_seen_before(
        tmp_path: Path, manifest: Manifest, listed: str) -> None:
    earlier, plan, offers = await earlier_plan(tmp_path, manifest, listed)
    # the unlisted host as an earlier campaign saw it: an RTX 3090 offer (another machine's, renumbered)
    before = replace(next(o for o in offers if o.gpu_name == "RTX 3090" and o.num_gpus == 1 and o.dlperf),
                     id=UNLISTED + 1, machine_id=UNLISTED)
    knowledge = await _knowledge(tmp_path / "c.sqlite3", manifest)
    again = build_plan(campaign_id="cagain", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=(),
                       now=NOW, seen=[before])
    assert len(plan.history) == 2 and len(again.history) == CALIBRATED_AT
    pivot = dlperf_pivot([o for o in offers if o.id not in {e.offer_id for e in again.excluded}])
    scale = workload_scale(knowledge, {o.machine_id: o for o in [*offers, before]}, pivot=pivot)
    assert scale is not None and before.dlperf
    gone = next(o for o in again.history if o.measured_units_per_s == 40.0)
    assert gone.model == "RTX 3090 x1"
    assert gone.prior_units_per_s == pytest.approx(compressed_dlperf(before.dlperf, pivot=pivot) * scale)
    # seen is never rented from: the host is still not listed, and not a candidate
    assert UNLISTED not in {c.offer.machine_id for c in (*again.candidates, *again.reserves)}
    assert not next(k for k in again.known if k.machine_id == UNLISTED).listed
    # a listed host's own offer wins over an older sighting of it
    stale_seen = replace(earlier.fresh, dlperf=(earlier.fresh.dlperf or 1.0) * 10)
    same = build_plan(campaign_id="csame", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=(),
                      now=NOW, seen=[stale_seen])
    assert same.history == plan.history


def _bf16_screened(manifest: Manifest) -> tuple[Profile, Profile, InheritedScreening]:
    """The manifest's first profile (fp32), the same at bf16, and an earlier campaign's screening that kept bf16."""
    fp32 = Profile.first(manifest.tuning, gpu_count=1)
    bf16 = Profile(fp32.batch_size, "bf16", fp32.loaders, 1)
    screened = InheritedScreening(campaign_id="cbefore", screened_at=NOW - 3 * DAY, start=replace(fp32, gpu_count=None),
                                  profile=replace(bf16, gpu_count=None), batches=(),
                                  knobs=("precision fp32 -> bf16: kept (gain +80.0% [+70.0%, +90.0%])",))
    return fp32, bf16, screened


async def test_a_host_is_re_verified_only_on_earlier_runs_at_the_profile_it_is_raced_at(
        tmp_path: Path, listed: str) -> None:
    """An earlier campaign raced a host at fp32, screened bf16 in and raced it again there. A later campaign that
    inherits that screening races at bf16 from its first block, so only the bf16 runs re-verify the host; one that
    screens again starts at fp32, where only the fp32 runs do. A bf16 run counted at fp32 (or the reverse) would
    put a throughput nearly twice the truth into the race as evidence."""
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    offers = await offers_at(listed, manifest)
    host = build_plan(campaign_id="base", manifest=manifest, offers=offers, knowledge=(), bad_hosts=()).candidates[0]
    fp32, bf16, screened = _bf16_screened(manifest)
    store = await SqliteStore.open(tmp_path / "c.sqlite3")
    try:
        for variant, throughputs in ((fp32, [30.0, 31.0]), (bf16, [55.0, 56.0, 57.0])):
            await remember(store, manifest, machine_id=host.offer.machine_id, gpu_name=host.offer.gpu_name,
                           num_gpus=1, throughputs=throughputs, days_ago=3.0, variant=variant)
        knowledge = await store.host_knowledge(workload_digest=manifest.digest)
    finally:
        await store.close()

    def planned(inherited: InheritedScreening | None) -> tuple[Plan, Reverification]:
        plan = build_plan(campaign_id="cagain", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=(),
                          now=NOW, inherited=inherited)
        again = next(c for c in plan.candidates if c.offer.machine_id == host.offer.machine_id)
        assert again.reverified is not None
        return plan, again.reverified

    plan, at_bf16 = planned(screened)
    assert at_bf16.throughputs_units_per_s == (55.0, 56.0, 57.0) and at_bf16.profile == bf16
    assert plan.inherited == screened
    assert "knobs screened by campaign cbefore: raced at batch 64, bf16" in render_plan(plan)
    assert "precision fp32 -> bf16: kept" in render_plan(plan)
    plan, at_fp32 = planned(None)
    assert at_fp32.throughputs_units_per_s == (30.0, 31.0) and at_fp32.profile == fp32
    # a screening the manifest can no longer race at is not inherited, and the plan says why
    plan = build_plan(campaign_id="cagain", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=(),
                      now=NOW, inherited=replace(screened, profile=replace(screened.profile, precision="fp8")))
    assert plan.inherited is None and "no longer allows" in render_plan(plan)


async def test_raced_at_an_inherited_screening_a_host_measured_at_another_profile_only_is_not_a_measured_prior(
        tmp_path: Path, listed: str) -> None:
    """One host was measured at fp32 only (dropped before the earlier campaign's screening), another at bf16. Raced
    at the inherited bf16, the first is an unknown host: its fp32 speed is neither its prior (at +-6 %, a bf16 host
    predicted at its fp32 speed is passed over on it) nor the calibration's evidence, nor the learned scale's."""
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    offers = await offers_at(listed, manifest)
    base = build_plan(campaign_id="base", manifest=manifest, offers=offers, knowledge=(), bad_hosts=()).candidates
    early, late = base[0], base[1]
    fp32, bf16, screened = _bf16_screened(manifest)
    store = await SqliteStore.open(tmp_path / "c.sqlite3")
    try:
        await remember(store, manifest, machine_id=early.offer.machine_id, gpu_name=early.offer.gpu_name, num_gpus=1,
                       throughputs=[30.0, 31.0], days_ago=3.0, variant=fp32)
        await remember(store, manifest, machine_id=late.offer.machine_id, gpu_name=late.offer.gpu_name, num_gpus=1,
                       throughputs=[55.0, 56.0, 57.0], days_ago=3.0, variant=bf16)
        knowledge = await store.host_knowledge(workload_digest=manifest.digest)
    finally:
        await store.close()
    plan = build_plan(campaign_id="cagain", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=(),
                      now=NOW, inherited=screened)
    by_machine = {c.offer.machine_id: c for c in (*plan.candidates, *plan.reserves)}
    assert by_machine[late.offer.machine_id].prior_is_measured
    assert by_machine[late.offer.machine_id].prior_throughput_units_per_s == 57.0
    assert [o.measured_units_per_s for o in plan.history] == [56.0]   # the bf16 host's median, not the fp32 one's
    pivot = dlperf_pivot([o for o in offers if o.id not in {e.offer_id for e in plan.excluded}])
    assert late.offer.dlperf
    scale = 57.0 / compressed_dlperf(late.offer.dlperf, pivot=pivot)   # learned on the bf16 host alone
    mine = by_machine[early.offer.machine_id]
    assert not mine.prior_is_measured and mine.reverified is None
    assert early.offer.dlperf
    assert mine.prior_throughput_units_per_s == pytest.approx(compressed_dlperf(early.offer.dlperf, pivot=pivot) * scale)
    assert "at another profile only" in mine.hypothesis
    # raced at fp32 (nothing inherited), the fp32 runs are the host's measured prior again
    fresh = build_plan(campaign_id="cagain", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=(),
                       now=NOW)
    mine = next(c for c in (*fresh.candidates, *fresh.reserves) if c.offer.machine_id == early.offer.machine_id)
    assert mine.prior_is_measured and mine.prior_throughput_units_per_s == 31.0


async def test_the_cheapest_re_verifiable_host_is_shortlisted_first_though_unknown_priors_promise_more(
        tmp_path: Path, manifest: Manifest, listed: str) -> None:
    """Earlier hosts: one measured two days ago at a fifth of its dlperf prior (fresh), two others 40 days ago at
    three times theirs (so the learned scale lifts every unknown host's prior above the fresh host's measurement). By
    prior cost alone the fresh host falls off the shortlist; it is shortlisted first (in the first wave), re-verified
    on its runs."""
    offers = await offers_at(listed, manifest)
    earlier = Earlier(manifest, offers)
    store = await SqliteStore.open(tmp_path / "c.sqlite3")
    try:
        await remember(store, manifest, machine_id=earlier.fresh.machine_id, gpu_name=earlier.fresh.gpu_name,
                       num_gpus=1, throughputs=[0.2 * earlier.prior(earlier.fresh)], days_ago=2.0)
        for offer in (earlier.stale, earlier.bad):
            await remember(store, manifest, machine_id=offer.machine_id, gpu_name=offer.gpu_name, num_gpus=1,
                           throughputs=[3.0 * earlier.prior(offer)], days_ago=40.0)
        knowledge = await store.host_knowledge(workload_digest=manifest.digest)
    finally:
        await store.close()
    plan = build_plan(campaign_id="c", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=(), now=NOW)
    first = plan.candidates[0]
    assert first.offer.machine_id == earlier.fresh.machine_id and first.reverified is not None
    assert first.candidate_id in plan.first_wave
    assert len(plan.candidates) == manifest.shortlist.max_candidates
    # by prior cost alone (no clock reading: nothing re-verifiable) it is not shortlisted
    unverified = build_plan(campaign_id="c", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=())
    assert earlier.fresh.machine_id not in {c.offer.machine_id for c in unverified.candidates}


def test_history_weight_halves_every_half_life_and_is_whole_when_fresh_or_undated() -> None:
    assert history_weight(0.0) == 1.0 and history_weight(None) == 1.0
    assert history_weight(HISTORY_HALF_LIFE_DAYS) == pytest.approx(0.5)
    assert history_weight(3 * HISTORY_HALF_LIFE_DAYS) == pytest.approx(0.125)


async def test_without_a_clock_reading_nothing_is_re_verified(tmp_path: Path, manifest: Manifest,
                                                             listed: str) -> None:
    offers = await offers_at(listed, manifest)
    earlier = Earlier(manifest, offers)
    store = await SqliteStore.open(tmp_path / "c.sqlite3")
    try:
        await earlier.write(store, manifest)
        knowledge: list[HostKnowledge] = await store.host_knowledge(workload_digest=manifest.digest)
        bad: list[BadHost] = await store.bad_hosts(now=NOW)
    finally:
        await store.close()
    plan = build_plan(campaign_id="c", manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=bad)
    assert all(c.reverified is None for c in plan.candidates)
    assert all(o.weight == 1.0 for o in plan.history) and plan.history


async def test_a_re_verified_host_races_on_fewer_fresh_blocks_its_earlier_runs_counting(
        tmp_path: Path, manifest: Manifest, listed: str) -> None:
    earlier, plan, offers = await earlier_plan(tmp_path, manifest, listed)
    fresh = next(c for c in plan.candidates if c.reverified is not None)
    reverified = fresh.reverified
    assert reverified is not None
    rule = manifest.measure
    entry = race_candidate(fresh.candidate_id, _cost(plan, manifest, fresh.candidate_id),
                           prior_units_per_s=fresh.prior_throughput_units_per_s, reverified=reverified, rule=rule)
    assert entry.rule is not None and entry.rule.min_blocks < rule.min_blocks and entry.rule.min_runs == 1
    assert sorted(b.run for b in entry.history) == [-2, -1]
    race = Race([entry], units=manifest.production_units, measure=rule)
    assert race.rule_of(fresh.candidate_id) == entry.rule
    theta = reverified.throughputs_units_per_s[-1]
    assert not race.standing(fresh.candidate_id).is_measured   # history alone never stands for a measurement
    for _ in range(entry.rule.min_blocks):
        race.add_block(fresh.candidate_id, Block(units=theta * rule.block_s, duration_s=rule.block_s, steps=5))
    standing = race.standing(fresh.candidate_id)
    assert standing.is_measured and standing.blocks == entry.rule.min_blocks
    assert standing.throughput is not None and standing.throughput.n == entry.rule.min_blocks + 2
    # another offer taking its place keeps neither its history nor its lighter rule
    race.set_cost(fresh.candidate_id, _cost(plan, manifest, fresh.candidate_id), prior_throughput_units_per_s=1.0)
    assert race.rule_of(fresh.candidate_id) == rule


async def _knowledge(db: Path, manifest: Manifest) -> list[HostKnowledge]:
    store = await SqliteStore.open(db)
    try:
        return await store.host_knowledge(workload_digest=manifest.digest)
    finally:
        await store.close()


def _cost(plan: Plan, manifest: Manifest, cid: str) -> CostInputs:
    return prior_cost_inputs(next(c for c in plan.candidates if c.candidate_id == cid), manifest)


async def test_vastui_campaign_plan_says_what_earlier_campaigns_measured(
        tmp_path: Path, manifest: Manifest, listed: str) -> None:
    url = listed
    offers = await offers_at(url, manifest)
    earlier = Earlier(manifest, offers)
    db = tmp_path / "campaign.sqlite3"
    store = await SqliteStore.open(db)
    try:
        await earlier.write(store, manifest)
        # the unlisted host's offer as the earlier campaign was planned on it: the calibration keeps its runs
        before = replace(next(o for o in offers if o.gpu_name == "RTX 3090" and o.dlperf), id=UNLISTED + 1,
                         machine_id=UNLISTED)
        await store.save_offer_snapshots([OfferSnapshot(
            campaign_id="cbefore", offer_id=before.id, machine_id=UNLISTED, gpu_name=before.gpu_name,
            num_gpus=before.num_gpus, dph_usd=before.dph_total, taken_at=NOW - DAY, snapshot_json=json.dumps(asdict(before)))])
    finally:
        await store.close()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vastui", "campaign", "plan", str(manifest.path), "--url", url, "--db", str(db),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "VAST_API_KEY": API_KEY})
    async with asyncio.timeout(WAIT_S):
        out_bytes, err_bytes = await proc.communicate()
    out = out_bytes.decode()
    assert proc.returncode == 0, err_bytes.decode()
    section = out[out.index("known from earlier campaigns of this workload: 3 host(s) measured"):]
    fresh_line = next(line for line in section.splitlines() if f" {earlier.fresh.machine_id} " in line)
    assert "re-verified as c" in fresh_line and "days ago" in fresh_line
    assert "not listed" in next(line for line in section.splitlines() if f" {UNLISTED} " in line)
    assert f"machine {earlier.bad.machine_id}: canary output digest differs" in section
    assert f"calibrated prior starts from {CALIBRATED_AT} earlier measurement(s)" in out


async def test_a_calibrated_history_judges_a_slow_gpu_by_its_chance_not_by_one_learned_scale(
        tmp_path: Path, manifest: Manifest, listed: str) -> None:
    """Input-bound history: three fast GPUs all measured near 33 units/s, a third of their dlperf priors. One learned
    scale would put a slow GPU at a third of its dlperf too, far short of the SLO floor, and rank it last; the
    calibrated prior (its slope: throughput does not follow dlperf here) gives it a real chance of the floor."""
    offers = await offers_at(listed, manifest)
    floor = manifest.slo.throughput_min_units_per_s
    assert floor is not None
    per_gpu = {o.id: (o.dlperf or 0.0) / o.num_gpus for o in offers if o.num_gpus == 1 and o.dlperf}
    by_speed = sorted((o for o in offers if o.id in per_gpu), key=lambda o: per_gpu[o.id])
    fast: list[Offer] = []
    for offer in reversed(by_speed):
        if offer.gpu_name not in {f.gpu_name for f in fast}:
            fast.append(offer)
        if len(fast) == 3:
            break
    slow = by_speed[0]
    assert per_gpu[slow.id] * 3 < per_gpu[fast[-1].id]

    async def plan_with(known: Sequence[Offer]) -> Plan:
        store = await SqliteStore.open(tmp_path / f"h{len(known)}.sqlite3")
        try:
            for offer in known:
                await remember(store, manifest, machine_id=offer.machine_id, gpu_name=offer.gpu_name, num_gpus=1,
                               throughputs=[33.0, 34.0], days_ago=1.0, campaign_id=f"c{len(known)}")
            return await plan_from_store(store, manifest, [*fast, slow])
        finally:
            await store.close()

    def slow_note(plan: Plan) -> str:
        return next(c.hypothesis for c in (*plan.candidates, *plan.reserves) if c.offer.id == slow.id)

    learned = await plan_with(fast[:2])       # two measurements: no calibration, the learned scale alone
    assert len(learned.history) < CALIBRATED_AT and "short of the SLO floor" in slow_note(learned)
    calibrated = await plan_with(fast)
    assert len(calibrated.history) == CALIBRATED_AT
    assert "ranked after" not in slow_note(calibrated)
    fit = Calibration.fit(calibrated.history)
    assert fit.beta < 0.0
