"""A campaign from manifest to receipt, and its resume after a crash: the steps around the engine.

``plan_campaign`` spends nothing. ``start_campaign`` (campaign/handle.py) records the campaign, runs the engine
under the operator's approvals, and writes the receipt. ``resume_campaign`` reconciles the store with the marketplace after the console
was killed at any point, destroys what the campaign left behind, and keeps every measurement.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from vastui.approval import Approver
from vastui.bench.manifest import Manifest
from vastui.bench.receipt import Receipt, cost_text, render_json, render_markdown
from vastui.campaign.approvers import AuditedApprover
from vastui.campaign.cleanup import MAX_OUTAGE_WAIT_S, PATIENCE_S, TeardownReport, record_teardown, teardown
from vastui.campaign.engine import CampaignEngine, CampaignOutcome
from vastui.campaign.inherited import InheritedScreening
from vastui.campaign.labels import is_campaigns
from vastui.campaign.owner import OwnerState, current_owner, owner_state
from vastui.campaign.plan import Plan, build_plan
from vastui.campaign.ports import CampaignStore, HostExecutor, Marketplace
from vastui.campaign.repeat import DAY_S
from vastui.campaign.report import build_receipt
from vastui.campaign.startup import RENTED_DISK_GIB
from vastui.clock import Clock, clock_scale
from vastui.config import Redactor
from vastui.errors import ApiError, CampaignError
from vastui.events import CampaignStarted, EventBus, PlanMade
from vastui.store.records import CampaignPhase, InstanceState, IntentStatus, OfferSnapshot, RunStatus
from vastui.vast.models import InstanceListing, Offer

SEARCH_LIMIT = 400


@dataclass(slots=True)
class CampaignServices:
    market: Marketplace
    executor: HostExecutor
    store: CampaignStore
    clock: Clock
    bus: EventBus
    redact: Redactor
    poll_s: float = 10.0
    teardown_poll_s: float = 5.0


def new_campaign_id() -> str:
    return "c" + secrets.token_hex(4)


async def plan_campaign(services: CampaignServices, *, manifest: Manifest, campaign_id: str) -> Plan:
    """Search with the manifest's query, join host knowledge and bad hosts, shortlist. Spends nothing."""
    offers = await services.market.search_offers(manifest.shortlist.query, order="dlperf_usd-", limit=SEARCH_LIMIT,
                                                 storage_gib=RENTED_DISK_GIB)
    # every host this workload ran on, listed now or not: the plan says what it knows (campaign/repeat.py)
    knowledge = await services.store.host_knowledge(workload_digest=manifest.digest)
    # a host measured before and not listed now: its last offer seen still says what dlperf it has (calibration)
    gone = sorted({k.machine_id for k in knowledge} - {o.machine_id for o in offers})
    seen = _offers_seen(await services.store.last_offer_snapshots(gone))
    bad = await services.store.bad_hosts(now=services.clock.now())
    inherited, note = await _inherited_screening(services, manifest)
    plan = build_plan(campaign_id=campaign_id, manifest=manifest, offers=offers, knowledge=knowledge, bad_hosts=bad,
                      now=services.clock.now(), inherited=inherited, inherited_note=note, seen=seen)
    if not plan.candidates:
        raise CampaignError(f"no offer passes the shortlist for query {manifest.shortlist.query!r} "
                            f"({len(plan.excluded)} excluded)", title="Empty shortlist")
    return plan


def _offers_seen(snapshots: Sequence[OfferSnapshot]) -> list[Offer]:
    """The offers kept in ``snapshots``; one that no longer parses (written by another version) is left out: it
    only informs the calibrated prior, which does without it."""
    out = []
    for snap in snapshots:
        try:
            out.append(Offer.from_api(json.loads(snap.snapshot_json), where=f"the snapshot of offer {snap.offer_id}"))
        except (ApiError, ValueError, TypeError):
            continue
    return out


async def _inherited_screening(services: CampaignServices,
                               manifest: Manifest) -> tuple[InheritedScreening | None, str]:
    """The latest screening of this workload an earlier campaign stored, when it is within the manifest's
    ``reverify_max_age_days``, with why a stored one that cannot be read is not used (the knobs are screened
    again; the campaign goes on)."""
    max_age = manifest.race.reverify_max_age_days
    stored = await services.store.latest_screening(workload_digest=manifest.digest,
                                                   since=services.clock.now() - max_age * DAY_S)
    if stored is None:
        return None, ""
    try:
        return InheritedScreening.from_json(stored.json_text, campaign_id=stored.campaign_id,
                                            screened_at=stored.screened_at), ""
    except ValueError as exc:
        return None, f"not inherited: {exc}"


async def record_campaign(services: CampaignServices, *, manifest: Manifest, plan: Plan) -> None:
    """Write the campaign, its manifest and the offers it was planned on to the store; announce it."""
    store, clock = services.store, services.clock
    now = clock.now()
    await store.save_manifest(digest=manifest.digest, name=manifest.workload.name,
                              toml_text=manifest.path.read_text(encoding="utf-8"), stored_at=now)
    await store.create_campaign(campaign_id=plan.campaign_id, manifest_digest=manifest.digest, created_at=now,
                                phase=CampaignPhase.PLANNED, budget_usd=plan.budget_usd,
                                deadline_at=now + max((c.time_cap_s for c in plan.candidates), default=0.0))
    await store.claim_campaign(current_owner(plan.campaign_id, at=now))   # this process runs it (campaign/owner.py)
    await store.save_offer_snapshots([
        OfferSnapshot(campaign_id=plan.campaign_id, offer_id=c.offer.id, machine_id=c.offer.machine_id,
                      gpu_name=c.offer.gpu_name, num_gpus=c.offer.num_gpus, dph_usd=c.offer.dph_total, taken_at=now,
                      snapshot_json=json.dumps(asdict(c.offer), default=str))
        for c in (*plan.candidates, *plan.reserves)])
    services.bus.publish(CampaignStarted(at=now, campaign_id=plan.campaign_id, workload=manifest.workload.name,
                                         manifest_digest=manifest.digest))
    services.bus.publish(PlanMade(at=now, campaign_id=plan.campaign_id,
                                  candidate_offer_ids=tuple(c.offer.id for c in plan.candidates),
                                  expected_spend_usd=plan.expected_spend_usd,
                                  spend_upper_bound_usd=plan.spend_upper_bound_usd))


def make_engine(services: CampaignServices, *, manifest: Manifest, plan: Plan, approver: Approver,
                on_owned: Callable[[int], None] | None = None) -> CampaignEngine:
    """The engine for a recorded campaign; ``approver`` must audit its own answers (the broker does)."""
    return CampaignEngine(plan=plan, manifest=manifest, market=services.market, executor=services.executor,
                          store=services.store, approver=approver, clock=services.clock, bus=services.bus,
                          on_owned=on_owned, poll_s=services.poll_s, teardown_poll_s=services.teardown_poll_s)


async def write_receipt(services: CampaignServices, *, manifest: Manifest, plan: Plan,
                        outcome: CampaignOutcome) -> Receipt:
    """Build and store the receipt of a campaign the engine finished; close the campaign in the store."""
    store, clock = services.store, services.clock
    receipt = build_receipt(campaign_id=plan.campaign_id, created_at=clock.now(), manifest=manifest,
                            runs=outcome.runs, decision=outcome.decision,
                            audit=await store.audit_records(campaign_id=plan.campaign_id), teardown=outcome.teardown,
                            destroyed_at=await _destroy_times(store, [g.instance_id for g in outcome.teardown.gone]),
                            spend_usd=outcome.spend_usd, billed_usd=outcome.billed_usd,
                            notes=_notes(outcome), passed_over=outcome.passed_over)
    await save_receipt(services, receipt)
    await store.finish_campaign(campaign_id=plan.campaign_id, at=clock.now(),
                                phase=CampaignPhase.FINISHED if receipt.teardown_passed else CampaignPhase.LEAKED)
    return receipt


async def _destroy_times(store: CampaignStore, instance_ids: Sequence[int]) -> dict[int, float]:
    """When each instance's first destroy went out, from its recorded transitions."""
    times: dict[int, float] = {}
    for instance_id in instance_ids:
        sent = [t.at for t in await store.transitions(instance_id) if t.state == InstanceState.DESTROY_REQUESTED]
        if sent:
            times[instance_id] = min(sent)
    return times


def _notes(outcome: CampaignOutcome) -> tuple[str, ...]:
    notes = [f"race: {outcome.race_reason}"]
    if outcome.screening is not None:
        screening = outcome.screening
        notes += [f"screening on {screening.screener}: {knob.describe()}" for knob in screening.knobs]
        notes += [f"screening on {screening.screener}: {line}" for line in screening.tuning.not_tried]
        notes.append(f"screened profile: {screening.profile.describe()} (raced at it by every candidate measured "
                     f"after the screening, its batch bounded by each GPU's memory; see 'Raced at')")
        played = screening.pairs_on
        if played:
            notes.append("screening's A/B pairs ran on " + ", ".join(f"{cid} ({n})" for cid, n in played.items()))
        if screening.tuning.stopped_early:
            notes.append(f"screening stopped early: {screening.tuning.stopped_early}")
    if outcome.inherited is not None:
        inherited = outcome.inherited
        notes.append(f"{inherited.describe(now=None)} (not screened again; every candidate was raced at it, its batch "
                     f"bounded by each GPU's memory; the leader confirmed only what those trials left open)")
        notes += [f"earlier screening by {inherited.campaign_id}: {knob}" for knob in inherited.knobs]
    notes += list(outcome.lifted)
    if outcome.tuning is not None and outcome.tuning.screened_by is not None:
        tuning = outcome.tuning
        notes.append(f"production profile of {outcome.tuned_candidate}: {tuning.profile.describe()}; its knobs come "
                     f"from the screening on {tuning.screened_by} (gains above), "
                     + ("confirmed on its own instance where the screening could not settle them (below)"
                        if tuning.trials else "none left to confirm: it was raced at that profile, its GPU class's "
                                              "screened one (the costs above are for it)"))
    if outcome.tuning is not None:
        notes += [f"tuning: {trial.describe()}" for trial in outcome.tuning.trials]
        notes += [f"tuning: {line}" for line in outcome.tuning.not_tried]
        if outcome.tuning.trials or outcome.tuning.screened_by is None:
            notes.append(f"tuned profile of the leader: {outcome.tuning.profile.describe()} "
                         f"(costs above are for the profile measured in the race)")
        if outcome.tuned_cost is not None:
            notes.append(f"tuned profile's cost per 1k accepted units at N={outcome.decision.units:,}: "
                         f"{cost_text(outcome.tuned_cost)}, estimated from the race's throughput and the kept A/B "
                         f"gains (not raced; " + ("its SLO certified at that profile)"
                                                  if outcome.decision.chosen in outcome.certified_tuned
                                                  else "its SLO is not re-certified)"))
        if outcome.tuning.stopped_early:
            notes.append(f"tuning stopped early: {outcome.tuning.stopped_early}")
    return tuple(notes)


async def save_receipt(services: CampaignServices, receipt: Receipt) -> None:
    await services.store.save_receipt(campaign_id=receipt.campaign_id, created_at=receipt.created_at,
                                      json_text=render_json(receipt, redact=services.redact),
                                      markdown_text=render_markdown(receipt, redact=services.redact))


@dataclass(frozen=True, slots=True)
class ResumeReport:
    campaign_id: str
    found_instance_ids: tuple[int, ...]
    teardown: TeardownReport
    runs_kept: int
    interrupted_runs: int


async def resume_campaign(services: CampaignServices, *, campaign_id: str, approver: Approver,
                          on_owned: Callable[[int], None] | None = None) -> ResumeReport:
    """Reconcile after a crash: find every instance the campaign may own, destroy it, prove it gone."""
    store, clock = services.store, services.clock
    campaign = await store.campaign(campaign_id)
    if campaign is None:
        raise CampaignError(f"no campaign {campaign_id} in {store.path}", title="Unknown campaign")
    owner = (await store.campaign_owners()).get(campaign_id)
    if campaign.is_active and owner is not None and owner.pid != os.getpid():
        state = owner_state(owner)
        if state is not OwnerState.GONE:
            where = f"pid {owner.pid} on {owner.host}"
            raise CampaignError(
                f"campaign {campaign_id} is still running ({where}"
                f"{'' if state is OwnerState.ALIVE else ', another host: cannot tell whether it is alive'}); "
                "resume is for a campaign whose console is gone: stop that console (it tears down its instances) "
                "or wait for it to end", title="Campaign still running")
    interrupted = 0
    for run in await store.open_runs(campaign_id=campaign_id):
        await store.finish_run(run_id=run.run_id, status=RunStatus.INTERRUPTED, at=clock.now(),
                               error="console stopped before the run ended")
        interrupted += 1
    listing = await _complete_listing(services)
    by_label = {i.label: i.id for i in listing.instances if i.label and is_campaigns(i.label, campaign_id)}
    by_label.update({r.label: r.id for r in listing.unreadable  # an odd row is still this campaign's instance
                     if r.id is not None and r.label and is_campaigns(r.label, campaign_id)})
    ids = set(by_label.values())
    for owned in await store.owned_instances(campaign_id=campaign_id):
        intent = owned.intent
        if intent.instance_id is not None:
            ids.add(intent.instance_id)
        elif intent.label in by_label:
            await store.bind_intent(intent_id=intent.intent_id, instance_id=by_label[intent.label], at=clock.now())
        elif intent.status in (IntentStatus.PENDING, IntentStatus.FAILED):
            await store.rule_out_intent(intent_id=intent.intent_id, at=clock.now(),
                                        reason="a complete listing after the crash shows no instance with its label")
    for instance_id in ids:
        if on_owned is not None:
            on_owned(instance_id)
    audited = AuditedApprover(approver, audit=store, clock=clock)
    report = await teardown(client=services.market, approver=audited, clock=clock, bus=services.bus,
                            instance_ids=ids, campaign_id=campaign_id, reason="resume after a crash: clean up",
                            poll_s=services.teardown_poll_s)
    await record_teardown(store, report, clock=clock)
    if campaign.is_active:
        await store.finish_campaign(campaign_id=campaign_id, at=clock.now(),
                                    phase=CampaignPhase.CLEANED_UP if report.is_clean else CampaignPhase.LEAKED,
                                    note=f"resumed: {len(ids)} instance(s) destroyed, {interrupted} run(s) interrupted")
    runs = await store.runs(campaign_id=campaign_id)
    return ResumeReport(campaign_id, tuple(sorted(ids)), report, len(runs), interrupted)


async def _complete_listing(services: CampaignServices) -> InstanceListing:
    """A complete listing, waited for through an outage as patiently as the teardown (``cleanup.PATIENCE_S``)."""
    clock, poll_s = services.clock, services.teardown_poll_s
    started, wait = clock.now(), poll_s
    while True:
        listing = await services.market.list_instances()
        if listing.is_complete:
            return listing
        if clock.now() - started >= PATIENCE_S * clock_scale(clock):
            raise CampaignError("could not get a complete instance listing to reconcile against for "
                                f"{clock.now() - started:.0f} s: {listing.error or 'incomplete'}",
                                title="Listing incomplete")
        await clock.sleep(wait)
        wait = min(wait * 2, max(MAX_OUTAGE_WAIT_S, poll_s))

