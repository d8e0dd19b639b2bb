"""The campaign engine: candidates run concurrently (up to the manifest's limit) through rent → loading → SSH →
canary → warm-up → blocks; the race destroys losers as soon as they are out; then the decision, the teardown
that proves itself, and the receipt.

Nothing is rented, destroyed or funded without an approval from the campaign's ``Approver``; every instance is
labelled with the campaign id, written down as an intent before the create call, and destroyed by its deadline.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vastui.approval import Approver
from vastui.bench.attribution import Bottleneck
from vastui.bench.calibration import Calibration
from vastui.bench.cost import CostInputs
from vastui.bench.manifest import Manifest
from vastui.bench.receipt import PassedOver
from vastui.bench.select import Decision, EliminationReason, Race, RaceEnd
from vastui.bench.stats import Interval
from vastui.bench.tuned import TunedEvidence, decide_with_tuned_evidence
from vastui.bench.tuning import Profile
from vastui.campaign.blame import BadHostMark, Halt, HaltReason, WorkloadJudge
from vastui.campaign.candidate import (
    BAD_HOST_TTL_S,
    CandidateContext,
    CandidateFailed,
    CandidatePhase,
    CandidateRun,
    NotRented,
    RentOutcome,
    ScreeningPart,
    canary,
    first_profile,
    read_loading,
    rent,
    stage_inputs,
    wait_running,
)
from vastui.campaign.charges import prior_cost_inputs
from vastui.campaign.cleanup import TeardownReport, destroy_with_approval, record_teardown, teardown
from vastui.campaign.folding import FoldedCanary
from vastui.campaign.inherited import InheritedScreening
from vastui.campaign.labels import is_campaigns
from vastui.campaign.live import decision_event
from vastui.campaign.measuring import Measurer, RaceState, lift_notice
from vastui.campaign.plan import CALIBRATED_AT, Candidate, Plan, first_wave
from vastui.campaign.ports import CampaignStore, HostConnection, HostExecutor, Marketplace
from vastui.campaign.repeat import race_candidate
from vastui.campaign.report import attribution_of
from vastui.campaign.reserves import Reserves
from vastui.campaign.screening import Screening, ScreeningOutcome, inherited_from
from vastui.campaign.slots import Ledger, Slot
from vastui.campaign.snapshot import CampaignStage
from vastui.campaign.tuning import TrialPool, TuningOutcome, tune
from vastui.campaign.waves import WinChance, has_spoken, observations, warmup_units, win_chance
from vastui.clock import Clock
from vastui.errors import ApiError, AuthError, RemoteError, StoreError, VastuiError
from vastui.events import CampaignFinished, EventBus, InstanceDestroyed, Notice
from vastui.events_live import CampaignPhaseChanged
from vastui.store.records import CampaignPhase, InstanceState, RunStatus
from vastui.vast.models import Answered

log = logging.getLogger(__name__)
# How long after a create that scheduling could not place the same offer is asked again (once), market seconds:
# the refusal is about the machine's resources at that moment (docs/api-notes.md, cancel_unavail).
RESCHEDULE_AFTER_S = 60.0
# A waiting candidate at least this likely to beat the leader joins the next wave whatever its size.
LIKELY_WINNER = 0.5
# A candidate whose measuring is over (a wave does not wait for its screened profile).
_GONE = frozenset({CandidatePhase.DONE, CandidatePhase.ELIMINATED, CandidatePhase.FAILED, CandidatePhase.SKIPPED,
                   CandidatePhase.ABORTED})
# Candidates on their way to a canary verdict (a rent after a first canary failure waits for theirs).
_ON_THE_WAY = frozenset({CandidatePhase.RENTING, CandidatePhase.LOADING, CandidatePhase.SSH, CandidatePhase.CANARY})
# A rent the marketplace refused, the offer still listed, with no reserve left: why the candidate is not rented.
_NOT_RENTED = {RentOutcome.REFUSED: NotRented.REFUSED, RentOutcome.NOT_SCHEDULED: NotRented.NOT_SCHEDULED}


@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignOutcome:
    campaign_id: str
    runs: tuple[CandidateRun, ...]
    decision: Decision
    teardown: TeardownReport
    spend_usd: float
    race_reason: str
    tuning: TuningOutcome | None = None
    tuned_cost: Interval | None = None     # the chosen profile after tuning: estimated, not raced
    billed_usd: Mapping[str, float] = field(default_factory=dict)   # per candidate, by the billing model
    tuned_candidate: str | None = None     # whose instance ``tuning`` ran on
    certified_tuned: tuple[str, ...] = ()  # finalists whose SLO was certified at their tuned profile
    halt: Halt | None = None               # why the campaign stopped renting early (the workload fails, ...)
    passed_over: tuple[PassedOver, ...] = ()   # offers a later wave passed over, each with its stated chance
    race_end: RaceEnd | None = None        # which race rule ended it (None: it ended from outside, or never did)
    screening: ScreeningOutcome | None = None   # the knobs screened on the first machine (screening.py)
    inherited: InheritedScreening | None = None  # ... or an earlier campaign's screening, raced at (inherited.py)
    lifted: tuple[str, ...] = ()           # candidates raced at a change the screening left open, and why, in words


class CampaignEngine:
    """Runs one planned campaign to its decision and proves its teardown."""

    def __init__(self, *, plan: Plan, manifest: Manifest, market: Marketplace, executor: HostExecutor,
                 store: CampaignStore, approver: Approver, clock: Clock, bus: EventBus,
                 on_owned: Callable[[int], None] | None = None, poll_s: float = 10.0, teardown_poll_s: float = 5.0) -> None:
        self.plan = plan
        self.manifest = manifest
        self.clock = clock
        self.bus = bus
        self.teardown_poll_s = teardown_poll_s
        self.ctx = CandidateContext(campaign_id=plan.campaign_id, manifest=manifest, market=market,
                                    executor=executor, store=store, approver=approver, clock=clock, bus=bus,
                                    on_owned=on_owned or (lambda _id: None), poll_s=poll_s)
        self.slots = [Slot(CandidateRun(c)) for c in plan.candidates]
        self.ledger = Ledger(slots=self.slots, manifest=manifest, clock=clock)
        self._reserves = Reserves(plan.reserves)
        race = Race([race_candidate(c.candidate_id, self._prior_cost(c), prior_units_per_s=c.prior_throughput_units_per_s,
                                    reverified=c.reverified, rule=manifest.measure)   # campaign/repeat.py
                     for c in plan.candidates], units=manifest.production_units, slo=manifest.slo,
                    measure=manifest.measure, budget_usd=manifest.budget.max_usd)
        self.screening = Screening(manifest)
        if plan.inherited is not None:   # an earlier campaign screened this workload: raced at what it kept
            self.screening.inherit(plan.inherited)
        if self.screening.is_pending:   # no evidence is at its race profile until the knobs are screened
            for c in plan.candidates:
                race.hold(c.candidate_id)
        self.state = RaceState(race=race, manifest=manifest, screening=self.screening)
        # the screening's trials, open to the candidates that would otherwise wait for their verdict
        self._pool = TrialPool(on_change=self.state.news.post)
        self.screening.pool = self._pool
        self._measurer = Measurer(ctx=self.ctx, state=self.state, slots=self.slots, ledger=self.ledger)
        self._turns = asyncio.Semaphore(manifest.budget.max_instances)   # instances alive at once
        self.tuning: TuningOutcome | None = None      # the chosen candidate's tuning, else the last one's
        self._tuned_cid: str | None = None             # ... and whose it is
        self.aborted: str | None = None
        self.halted: Halt | None = None                 # the campaign stopped itself (blame.py): no more rents
        self._judge = WorkloadJudge()
        self._verdict = asyncio.Event()                 # set when a candidate ends or a canary is judged
        self._first_wave = set(plan.first_wave or first_wave(plan.candidates, manifest=manifest,
                                                             calibrated=len(plan.history) >= CALIBRATED_AT))
        self._wave_size = max(1, len(self._first_wave))
        self._wave_verdicts: dict[str, WinChance] = {}  # each later candidate's chance when its wave was chosen
        self._wave_lock = asyncio.Lock()
        self._passed_over: list[PassedOver] = []

    def _prior_cost(self, c: Candidate) -> CostInputs:
        return prior_cost_inputs(c, self.manifest)

    @property
    def runs(self) -> list[CandidateRun]:
        return [slot.run for slot in self.slots]

    # --- money --------------------------------------------------------------------------------------------------
    def spent_usd(self) -> float:
        """What the marketplace has billed so far (``Ledger.spent_usd``)."""
        return self.ledger.spent_usd()

    def reserved_usd(self) -> float:
        """The budget held for rentals (``Ledger.reserved_usd``)."""
        return self.ledger.reserved_usd()

    def abort(self, reason: str) -> None:
        """Stop every candidate now; ``run`` then tears down and proves every instance gone, as after any end."""
        if self.aborted is not None:
            return
        self.aborted = reason
        self.state.finish(f"aborted: {reason}")
        for slot in self.slots:
            if slot.task is not None:
                slot.task.cancel()

    # --- the campaign --------------------------------------------------------------------------------------------
    async def run(self) -> CampaignOutcome:
        store = self.ctx.store
        await store.set_campaign_phase(campaign_id=self.plan.campaign_id, phase=CampaignPhase.MEASURING, at=self.clock.now())
        self._stage(CampaignStage.RUNNING)
        try:
            async with asyncio.TaskGroup() as group:
                for slot in self.slots:
                    slot.task = group.create_task(self._candidate(slot))
        finally:
            await self._paperwork(store.set_campaign_phase(campaign_id=self.plan.campaign_id,
                                                           phase=CampaignPhase.TEARDOWN,
                                                           at=self.clock.now()), "record the teardown phase")
            self._stage(CampaignStage.TEARDOWN, self.aborted or "")
            report = await self.teardown_all(reason="campaign finished")
            await self._close_cut_runs()
            for run in self.runs:
                if run.ended_at is None and run.instance_id in report.destroy_sent_at:
                    run.ended_at = report.destroy_sent_at[run.instance_id]
        finalists = self.state.race.finalists()
        tuned = {slot.cid: slot.tuning for slot in self.slots if slot.tuning is not None}
        seen = {cid: TunedEvidence(t.kept_gains, t.profile_latencies_ms) for cid, t in tuned.items()}
        decision, certified_tuned = decide_with_tuned_evidence(finalists, seen, slo=self.manifest.slo,
                                                               units=self.manifest.production_units)
        if self.halted is not None and decision.chosen is None:
            decision = replace(decision, reason=self.halted.describe())
        if decision.chosen in tuned:   # a later leader was tuned too: the receipt speaks of the chosen
            self._tuned_cid, self.tuning = decision.chosen, tuned[decision.chosen]
        tuned_cost = self._tuned_cost(decision)
        self.bus.publish(decision_event(decision, at=self.clock.now(), campaign_id=self.plan.campaign_id))
        billed = self.ledger.billed_usd()
        spend = sum(billed.values())
        self.bus.publish(CampaignFinished(at=self.clock.now(), campaign_id=self.plan.campaign_id,
                                          status="clean" if report.is_clean else "LEAK", spend_usd=spend))
        return CampaignOutcome(campaign_id=self.plan.campaign_id, runs=tuple(self.runs), decision=decision,
                               teardown=report, spend_usd=spend, race_reason=self.state.reason, tuning=self.tuning,
                               tuned_cost=tuned_cost, billed_usd=billed, tuned_candidate=self._tuned_cid,
                               certified_tuned=certified_tuned, halt=self.halted,
                               passed_over=tuple(self._passed_over), race_end=self.state.ended,
                               screening=self.screening.outcome if self.screening.inherited is None else None,
                               inherited=self.screening.inherited, lifted=tuple(lift.why for lift in self.screening.lifted.values()))

    def _stage(self, phase: CampaignStage, detail: str = "") -> None:
        self.bus.publish(CampaignPhaseChanged(at=self.clock.now(), campaign_id=self.plan.campaign_id, phase=phase,
                                              detail=detail))

    def _tuned_cost(self, decision: Decision) -> Interval | None:
        """When the chosen profile is the one tuned and a change was kept: its cost with the kept gains — the cost
        the decision priced it at (``bench.tuned.priced_at_tuned_profiles``)."""
        if self.tuning is None or decision.chosen is None or decision.chosen != self._tuned_cid:
            return None
        return decision.chosen_cost if self.tuning.kept_gains else None

    async def teardown_all(self, *, reason: str) -> TeardownReport:
        owned = await self.ctx.store.owned_instances(campaign_id=self.plan.campaign_id)
        ids = {o.intent.instance_id for o in owned if o.intent.instance_id is not None}
        ids |= await self._found_by_label()
        ids |= {run.instance_id for run in self.runs if run.instance_id is not None}
        for instance_id in ids:
            self.ctx.on_owned(instance_id)  # labelled or recorded by this campaign: its plan promised to destroy
        report = await teardown(client=self.ctx.market, approver=self.ctx.approver, clock=self.clock, bus=self.bus,
                                instance_ids=ids, campaign_id=self.plan.campaign_id, reason=reason,
                                poll_s=self.teardown_poll_s,
                                already_destroyed={slot.run.instance_id for slot in self.slots
                                                   if slot.destroy_sent and slot.run.instance_id is not None})
        await record_teardown(self.ctx.store, report, clock=self.clock, on_refused=self._paperwork_refused)
        return report

    async def _paperwork(self, write: Coroutine[Any, Any, object], what: str) -> None:
        """A store write on the way to (or after) the teardown: when the store refuses it (a full disk), the
        teardown goes on — destroying stops the billing, the record can wait — and the operator is told."""
        try:
            await write
        except StoreError as exc:
            self._paperwork_refused(exc, what)

    async def _close_cut_runs(self) -> None:
        """A task cancelled between opening its stored run and noting the run's id (an abort, a halt) left that run
        open: no run outlives its campaign, so whatever is still open was cut short."""
        store = self.ctx.store
        why = self._stopped_by or (self.halted.describe() if self.halted is not None else "the campaign ended")
        try:
            for stored in await store.open_runs(campaign_id=self.plan.campaign_id):
                await store.finish_run(run_id=stored.run_id, status=RunStatus.INTERRUPTED, at=self.clock.now(),
                                       error=f"cut short: {why}")
        except StoreError as exc:
            self._paperwork_refused(exc, "close the runs the campaign's end cut short")

    def _paperwork_refused(self, exc: StoreError, what: str) -> None:
        self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.plan.campaign_id, level="error",
                                text=f"could not {what} ({exc.message}); the teardown goes on"))

    async def _found_by_label(self) -> set[int]:
        """Instances labelled with this campaign's id: catches a create whose answer was lost."""
        try:
            listing = await self.ctx.market.list_instances()
        except VastuiError:
            return set()
        return {i.id for i in listing.instances if is_campaigns(i.label, self.plan.campaign_id)}

    async def _candidate(self, slot: Slot) -> None:
        try:
            await self._candidate_life(slot)
        finally:
            self.state.news.post()   # its end (or skip) may complete a wave: the waiting choose again

    async def _candidate_life(self, slot: Slot) -> None:
        run = slot.run
        chance = await self._wave_turn(slot)
        news = self.state.news.current
        async with self._turns:
            if chance is not None and self._may_win(chance) and news.is_set():
                # admitted to its wave, it waited for an instance to end: what ended it (a block, an elimination,
                # a new leader) may have made it unlikely to win, so it is judged again before it is rented
                (chance,) = await self._chances([run.candidate])
                self._wave_verdicts[slot.cid] = chance
            if slot.eliminated or self.state.finished.is_set() or self._stopped_by is not None:
                if self._stopped_by is not None:
                    self.ctx.skip(run, NotRented.STOPPED, f"stopped before its turn: {self._stopped_by}")
                else:
                    self.ctx.skip(run, NotRented.RACE_DECIDED, "race decided before its turn")
                self.state.race.exclude(run.cid, reason=EliminationReason.FAILED, detail="not measured: race decided")
                return
            if chance is not None and not self._may_win(chance):
                self._passed_over.append(PassedOver(run.cid, run.candidate.offer.id, run.candidate.offer.gpu_name,
                                                    run.candidate.gpu_count, chance.probability, chance.describe()))
                if not await self._take_reserve(run, chance):
                    run.win_probability = chance.probability
                    self.ctx.skip(run, NotRented.PASSED_OVER, f"passed over: {chance.describe()}")
                    self.state.race.exclude(run.cid, reason=EliminationReason.FAILED,
                                            detail=f"not measured: passed over ({chance.describe()})")
                    return
            elif chance is not None:
                run.win_probability = chance.probability
            try:
                await self._life(slot)
            except CandidateFailed as exc:
                await self._fail(run, exc)
            except AuthError as exc:   # no request can succeed with this key: stop renting, say why
                await self._fail(run, CandidateFailed(str(exc), bad_host=False))
                await self._halt(Halt(HaltReason.KEY_REJECTED, f"{exc.title}: {exc.message}"))
            except (RemoteError, VastuiError) as exc:
                await self._fail(run, CandidateFailed(str(exc), bad_host=False))
            except asyncio.CancelledError:
                if self._stopped_by is not None:
                    await self._stopped_by_abort(run)
                raise
            finally:
                await self._release(slot)

    # --- waves (waves.py) ----------------------------------------------------------------------------------------
    def _may_win(self, chance: WinChance) -> bool:
        return chance.probability >= self.manifest.race.miss_probability

    async def _wave_turn(self, slot: Slot) -> WinChance | None:
        """Wait for this candidate's wave: at once in the first wave (None); otherwise until every candidate
        rented so far has spoken, then its chance of beating the leader, by which the wave is chosen (it may have
        to wait for a later wave). None too when the race ends or the campaign stops first."""
        if slot.cid in self._first_wave:
            return None
        while True:
            news = self.state.news.current
            if self.state.finished.is_set() or self._stopped_by is not None:
                return None
            if slot.cid in self._wave_verdicts:
                return self._wave_verdicts[slot.cid]
            if self._wave_has_spoken():
                async with self._wave_lock:
                    if slot.cid not in self._wave_verdicts and self._wave_has_spoken():
                        await self._choose_wave()
                if slot.cid in self._wave_verdicts:
                    return self._wave_verdicts[slot.cid]
            await news.wait()

    def _wave_has_spoken(self) -> bool:
        """Every candidate rented so far (the first wave, those admitted since) has its minimum evidence or ended."""
        admitted = self._first_wave | {cid for cid, c in self._wave_verdicts.items() if self._may_win(c)}
        # (while the knobs are screened, and until a live candidate is measured at its screened profile, its
        # blocks say nothing about the profile the race runs: the next wave waits for it)
        return all((has_spoken(slot, min_blocks=self.manifest.measure.min_blocks)
                    and (self.state.is_settled(slot) or slot.eliminated or slot.run.phase in _GONE))
                   or (slot.task is not None and slot.task.done())   # its life is over, whatever its phase says
                   for slot in self.slots if slot.cid in admitted)

    async def _chances(self, candidates: Sequence[Candidate]) -> list[WinChance]:
        """Each candidate's chance of beating the measured leader under the prior calibrated on what the campaign
        measured and the store's history of this workload."""
        calibration = Calibration.fit([*observations(self.slots), *self.plan.history])
        async with self.state.lock:
            leader = self.state.leader
            standing = await asyncio.to_thread(self.state.race.standing, leader) if leader is not None else None
            misses = self.state.race.slo_miss_chance(leader) if leader is not None else 1.0
        cost = standing.cost_per_unit if standing is not None else None
        warmup = warmup_units(self.slots)
        return [win_chance(c, self.manifest, calibration, leader=leader, leader_cost=cost, leader_misses_slo=misses,
                           warmup_units=warmup)
                for c in candidates]

    async def _choose_wave(self) -> None:
        """Give every waiting candidate its chance; below the miss probability it is passed over, of the rest the
        likeliest winners (as many as the first wave held, and every one at least LIKELY_WINNER likely: the next
        wave would hardly pass it over, so waiting for it only costs time) are rented next, and the others wait for
        the wave after."""
        waiting = [slot for slot in self.slots if slot.cid not in self._first_wave
                   and slot.cid not in self._wave_verdicts and slot.run.phase is CandidatePhase.WAITING]
        if not waiting:
            return
        chances = dict(zip((slot.cid for slot in waiting), await self._chances([s.run.candidate for s in waiting]),
                           strict=True))
        admitted = 0
        for slot in sorted(waiting, key=lambda s: -chances[s.cid].probability):
            chance = chances[slot.cid]
            if not self._may_win(chance):
                self._wave_verdicts[slot.cid] = chance
            elif admitted < self._wave_size or chance.probability >= LIKELY_WINNER:
                self._wave_verdicts[slot.cid] = chance
                admitted += 1
        if admitted:
            names = [cid for cid, c in self._wave_verdicts.items() if self._may_win(c) and cid in chances]
            self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.plan.campaign_id, level="info",
                                    text="next wave: " + ", ".join(
                                        f"{cid} ({100 * chances[cid].probability:.0f} %)" for cid in names)))

    async def _take_reserve(self, run: CandidateRun, chance: WinChance) -> bool:
        """A candidate passed over gives its slot to the best reserve that could still win (reserves.py)."""
        async def unlikely(reserve: Candidate) -> str | None:
            (its,) = await self._chances([reserve])
            return None if self._may_win(its) else its.describe()

        reserve = await self._reserves.for_passed_over(unlikely)
        if reserve is None:
            return False
        self._stand_in(run, reserve, f"{run.cid}: offer {run.candidate.offer.id} passed over ({chance.describe()}); "
                                     f"its slot goes to reserve {reserve.offer.id} ({reserve.offer.gpu_name} at "
                                     f"${reserve.offer.dph_total:.3f}/h)")
        return True

    def _stand_in(self, run: CandidateRun, reserve: Candidate, why: str) -> None:
        """``reserve`` takes ``run``'s place (its id kept), with its own prior in the race; the console is told."""
        self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.plan.campaign_id, level="info", text=why))
        run.candidate = replace(reserve, candidate_id=run.cid)
        self.state.race.set_cost(run.cid, self._prior_cost(run.candidate),
                           prior_throughput_units_per_s=run.candidate.prior_throughput_units_per_s)

    @property
    def _stopped_by(self) -> str | None:
        """Why every candidate stops now: the operator's abort, or the campaign's own halt."""
        if self.aborted is not None:
            return self.aborted
        return self.halted.describe() if self.halted is not None else None

    async def _halt(self, halt: Halt) -> None:
        """Stop renting and stop the candidates under way (they are destroyed; none unmeasured can be chosen)."""
        if self.halted is not None or self.aborted is not None:
            return
        self.halted = halt
        self.state.finish(halt.describe())
        async with self.state.lock:
            for run in self.runs:
                if not run.blocks:   # a prior alone must not be chosen from a campaign that stopped itself
                    self.state.race.exclude(run.cid, reason=EliminationReason.FAILED, detail=halt.describe())
        self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.plan.campaign_id, level="error",
                                text=f"campaign stopped: {halt.describe()}"))
        current = asyncio.current_task()
        # A rent in flight when the key is rejected is left to end by itself: cancelled, its instance could only be
        # found by a listing, which the rejected key cannot read; let be, its id is known and reported.
        spared = {CandidatePhase.WAITING} | ({CandidatePhase.RENTING} if halt.reason is HaltReason.KEY_REJECTED
                                             else set())
        for slot in self.slots:
            if slot.task is not None and slot.task is not current and slot.run.phase not in spared:
                slot.task.cancel()   # one still waiting for a slot skips itself when it gets one

    async def _stopped_by_abort(self, run: CandidateRun) -> None:
        """Say where the abort found it; a run it cut short is closed as interrupted (its records are kept)."""
        # the stored run is open while measuring, and during a canary folded into it (folding.py): only then has
        # the canary a stored run
        was_measuring = run.phase is CandidatePhase.MEASURING or (run.phase is CandidatePhase.CANARY
                                                                  and run.run_id is not None)
        self.ctx.phase(run, CandidatePhase.ABORTED, f"stopped in {run.phase}: {self._stopped_by}")
        if not was_measuring or run.run_id is None:
            return
        # A candidate that ended its race run and stays in the measuring phase (waiting for the screening, or
        # helping it) has its stored run closed already: only an open one is cut short. Paperwork the store refuses
        # never stops the teardown that follows (a crash here would leave no receipt).
        try:
            if any(r.run_id == run.run_id for r in await self.ctx.store.open_runs(campaign_id=self.plan.campaign_id)):
                await self.ctx.store.finish_run(run_id=run.run_id, status=RunStatus.INTERRUPTED,
                                                at=self.clock.now(), error=f"aborted: {self._stopped_by}")
        except StoreError as exc:
            self._paperwork_refused(exc, f"close {run.cid}'s run cut short by the abort")

    async def _life(self, slot: Slot) -> None:
        run = slot.run
        if not await self._rent_or_replace(slot):
            self.state.race.exclude(run.cid, reason=EliminationReason.FAILED, detail=run.detail or "not rented")
            return
        instance = await wait_running(self.ctx, run)
        await read_loading(self.ctx, run)
        endpoints = instance.ssh_endpoints()
        assert endpoints
        self.ctx.phase(run, CandidatePhase.SSH)
        connected = False
        try:
            # One SSH connection for this instance's whole life: uploads, agent runs, commands and stops. Its
            # endpoints (direct, then the proxy) are tried in turn until one accepts (docs/api-notes.md §3.12).
            async with self.ctx.executor.connect_first(endpoints,
                                                       deadline_s=self.manifest.budget.readiness_min_s) as conn:
                connected = True
                await self._on_host(slot, conn)
        except RemoteError as exc:
            if not connected:
                raise CandidateFailed(f"SSH never became ready: {exc}", bad_host=True) from exc
            raise

    async def _on_host(self, slot: Slot, conn: HostConnection) -> None:
        run = slot.run
        await stage_inputs(self.ctx, conn)
        # the canary runs the first profile, which every candidate can hold; the race, the screened one
        profile = first_profile(run.candidate, self.manifest)
        folded = (FoldedCanary(self.ctx, run, profile=profile, on_passed=self._canary_passed)
                  if self.manifest.correctness.fold_canary else None)
        if folded is None:
            await canary(self.ctx, run, conn, profile)
            await self._canary_passed()
        variant = await self._race_at_profile(slot, conn, folded)
        # Tune the leader on its own instance: when the race is decided, or when it ran out of blocks while leading
        # (waiting idle for the others would bill for nothing).
        # (A leader stopped by its deadline is still offered: tuning then says the deadline left it no time.)
        done_measuring = (self.state.finished.is_set() or len(run.blocks) >= self.manifest.measure.max_blocks
                          or run.work_time_left_s(self.clock.now()) <= 0 or self.state.leader_may_tune(slot))
        leads = done_measuring and (self.state.leader == run.cid or await self.state.would_be_chosen(slot))
        if run.blocks and (leads or slot.tune_next) and not slot.tuning_started and not slot.eliminated:
            await self._tune(slot, conn, variant)
        if run.phase not in _GONE and self._stopped_by is None:
            # Its time ran out while it screened, or waited for the screening, or the race ended meanwhile: it
            # has said all it will, and says so (a later wave waits until every rented candidate has). A stopped
            # campaign's candidates are the stop's to account for (``_stopped_by_abort``).
            why = ("its deadline came" if run.work_time_left_s(self.clock.now()) <= 0 else "the race was decided"
                   if self.state.finished.is_set() else "its measuring is over")
            self.ctx.phase(run, CandidatePhase.DONE, f"{len(run.blocks)} blocks; {why} ({run.detail})")

    async def _canary_passed(self) -> None:
        for mark in self._judge.canary_passed().marks:   # the workload works: held failures were the hosts'
            await self._record_bad_host(mark)
        self._verdict.set()

    # --- screening (screening.py) ---------------------------------------------------------------------------------
    async def _race_at_profile(self, slot: Slot, conn: HostConnection, folded: FoldedCanary | None) -> Profile:
        """Measure at the profile the screening gives this candidate (the first one until it is done). The first
        with its minimum evidence screens the knobs on its own instance; one whose profile the screening then
        changed is measured again at it, its earlier blocks out of the race. Returns its evidence's profile.
        ``folded``: its canary is still to run, as the first phase of its first run when that run is at the
        canary's profile (folding.py), else on its own first."""
        run = slot.run
        while True:
            variant = self.screening.profile_for(run.candidate)
            await self._enter_profile(slot, variant)
            if folded is not None and variant != folded.profile:   # raced at a screened profile: a canary of its own
                await canary(self.ctx, run, conn, folded.profile)
                await self._canary_passed()
                folded = None
            if folded is None and await self._help_before_measuring(slot, conn, variant):
                if not self._measures_on(slot):
                    break
                continue   # the screening is over (or lost its screener): raced at what it says now
            await self._measurer.measure(slot, conn, variant, folded=folded)
            folded = None   # (its first run carried it)
            if self.screening.designate == run.cid and not slot.screen_next:
                self._screener_lost(run.cid)   # measured to screen, yet did not: the waiting measure instead
            if slot.lift_due is not None:   # short of the SLO's floor: raced again at the change that may lift it
                if slot.lift is not None and self._measures_on(slot):
                    self.screening.lift(run.cid, slot.lift, why=slot.lift_due)
                slot.lift_due = None
            screened = slot.screen_next
            if screened:
                await self._screen(slot, conn, variant)
            elif self.screening.is_pending and self._measures_on(slot):
                screened = await self._await_screening(slot, conn, variant)   # (True too when it played pairs)
            if not self._measures_on(slot):
                break
            if self.screening.profile_for(run.candidate) == run.race_profile and (
                    not screened or len(run.blocks) >= self.manifest.measure.max_blocks):
                break   # (a screener whose profile stayed measures on: it stopped at its minimum evidence)
        async with self.state.lock:
            self.state.race.may_lift(run.cid, None)   # its measuring is over: nobody would race it at a lift
            if not self.screening.is_pending or not self._measures_on(slot):
                self.state.race.release(run.cid)   # its evidence stands at the profile it is at
        return variant

    async def _help_before_measuring(self, slot: Slot, conn: HostConnection, variant: Profile) -> bool:
        """Not measured yet while another candidate screens the knobs, or measures its minimum evidence to:
        play the screening's pairs, or wait for them, instead of measuring at a profile the screening is about to
        change (blocks there would leave the race when it does, and the waves wait for blocks at the screened
        profile anyway; ``Screening.measures_first``). True when it helped or waited for the screening (its
        profile is to be asked again); False when it measures now."""
        run = slot.run
        if run.blocks or not self._measures_on(slot) or self.screening.measures_first(run.cid):
            return False
        await self._await_screening(slot, conn, variant)
        return True

    def _measures_on(self, slot: Slot) -> bool:
        return (not slot.eliminated and not self.state.finished.is_set() and self._stopped_by is None
                and slot.run.work_time_left_s(self.clock.now()) > 0)

    async def _enter_profile(self, slot: Slot, variant: Profile) -> None:
        """From now on ``slot`` is measured at ``variant``: blocks it has at another profile leave the race (their
        stored records stay), so the race compares like with like; its hold is lifted once the screening is done."""
        run = slot.run
        # a re-verified host's history was measured at the profile it was planned to race at (campaign/repeat.py)
        reverified = run.candidate.reverified
        previous = run.race_profile or (reverified.profile if reverified is not None and reverified.profile
                                        else first_profile(run.candidate, self.manifest))
        async with self.state.lock:
            if previous != variant:
                self.state.race.restart(run.cid)
                run.earlier_blocks += len(run.blocks)
                run.blocks, run.latencies_ms, run.measured_runs = [], [], 0
                # warm-up is the profile's too (production warms up at the screened one): measured anew
                run.warmup_lost_s, run.warmup_s = [], None
                slot.certified = False
            if not self.screening.is_pending:
                self.state.race.release(run.cid)
                # should its blocks miss the SLO's floor here, or its cost the leader's, an open change may lift
                # it (Race.may_lift)
                slot.lift = self.screening.lift_for(run.candidate, raced=variant)
                self._arm_lift(slot)
            slot.lift_due = None
        run.race_profile = variant

    async def _await_screening(self, slot: Slot, conn: HostConnection, variant: Profile) -> bool:
        """Done measuring while the screening is still under way: play its current trial's pairs on this instance
        while the trial wants them (``TrialPool``), else wait for it (its verdict may change this candidate's
        profile), or screen in its place when its screener was lost. True when it screened or played pairs (it
        may have stopped measuring at its minimum evidence to play them: it measures on should its profile
        stay)."""
        run = slot.run
        waiting = "waiting for the knobs' screening (it may change the profile)"
        self.ctx.phase(run, CandidatePhase.MEASURING, waiting, screening=ScreeningPart.WAITING)
        self._pool.at_hand.add(run.cid)
        try:
            return await self._wait_or_help(slot, conn, variant, waiting=waiting)
        finally:
            self._pool.at_hand.discard(run.cid)

    async def _wait_or_help(self, slot: Slot, conn: HostConnection, variant: Profile, *, waiting: str) -> bool:
        run = slot.run
        helped = False
        while self.screening.is_pending and self._measures_on(slot):
            if not run.blocks and not self.screening.waits_for_screener():
                break   # the screener (or the designate) was lost: measured first, it may screen in its place
            if self.screening.may_claim(run.cid, blocks=len(run.blocks), tuned=slot.tuning_started):
                self.screening.claim(run.cid)
                slot.screen_next = True
                self._pool.at_hand.discard(run.cid)   # it screens: no longer at hand to help
                await self._screen(slot, conn, variant)
                return True
            news = self.state.news.current
            if await self._help_screening(slot, conn, variant):
                helped = True
                continue
            if run.detail != waiting:
                self.ctx.phase(run, CandidatePhase.MEASURING, waiting, screening=ScreeningPart.WAITING)
            waits = [asyncio.ensure_future(news.wait()),
                     asyncio.ensure_future(self.clock.sleep(run.work_time_left_s(self.clock.now())))]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
        return helped

    async def _help_screening(self, slot: Slot, conn: HostConnection, variant: Profile) -> bool:
        """One pair of the screening's current trial on this instance, when the trial wants one and the deadline
        leaves room for it and for measuring again at the screened profile; False when it played none."""
        run = slot.run
        if not self._pool.has_pair_for(run):
            return False
        helping = f"playing A/B pairs of {self._pool.describe()}"
        if run.detail != helping:
            self.ctx.phase(run, CandidatePhase.MEASURING, helping, screening=ScreeningPart.HELPING)
        again_s = self._measure_again_s(run)
        return await self._pool.help(self.ctx, run, conn, gpu_count=variant.gpu_count,
                                     time_left_s=lambda: run.work_time_left_s(self.clock.now()) - again_s,
                                     keep_going=lambda: self._measures_on(slot))

    def _measure_again_s(self, run: CandidateRun) -> float:
        """What measuring ``run`` again at a new profile takes: the winner's minimum blocks and a warm-up a run.
        Not measured yet (it helped the screening first), the manifest's block and the longest warm-up measured on
        any candidate, else the warm-up's cap (errs long)."""
        m = self.manifest.measure
        blocks_s = (sum(b.end_t - b.start_t for b in run.blocks) / len(run.blocks) if run.blocks else m.block_s)
        warmup_s = run.warmup_s
        if warmup_s is None and not run.blocks:
            seen = [s.run.warmup_s for s in self.slots if s.run.warmup_s is not None]
            warmup_s = max(seen) if seen else self.manifest.warmup.cap_s
        return m.winner_min_blocks * blocks_s + max(1, m.min_runs) * (warmup_s or 0.0)

    async def _screen(self, slot: Slot, conn: HostConnection, start: Profile) -> None:
        """The knobs' A/B trials (``tune``) on the screener's instance, each open to the pairs of the candidates
        that would otherwise wait for it (``TrialPool``), leaving time to measure it again at the profile they
        keep; every candidate is raced at that profile from now on (``Screening.profile_for``)."""
        run = slot.run
        attribution = attribution_of(run, units=self.manifest.production_units)
        bottleneck = attribution.in_execution if attribution is not None else Bottleneck.UNDETERMINED
        self.ctx.phase(run, CandidatePhase.TUNING, f"screening the knobs; bottleneck {bottleneck}")
        again_s = self._measure_again_s(run)
        outcome = await tune(self.ctx, run, conn, start=start, bottleneck=bottleneck,
                             time_left_s=lambda: run.work_time_left_s(self.clock.now()) - again_s, pool=self._pool)
        slot.screen_next = False
        # Its trials are spent, but not its tuning: should it lead, what they left unsettled (a knob whose pooled
        # pairs disagreed across machines: more loaders pay on one host's input path, not on another's) is
        # confirmed on its own instance, as for any leader (``Screening.left_to_confirm``). Left out, a screener
        # chosen in the end kept 4 loaders at 64 % of its best while its own pairs showed +50 %.
        screened = ScreeningOutcome(screener=run.cid, gpu_ram_mb=run.candidate.offer.gpu_ram, start=start,
                                    tuning=outcome)
        self.screening.finish(screened)
        # kept for a later campaign of this workload, which races at it instead of screening again (inherited.py)
        at = self.clock.now()
        await self.ctx.store.save_screening(
            campaign_id=self.plan.campaign_id, workload_digest=self.manifest.digest, screened_at=at,
            json_text=inherited_from(screened, campaign_id=self.plan.campaign_id, at=at).to_json())
        async with self.state.lock:
            for other in self.slots:
                if (other.run.race_profile in (None, self.screening.profile_for(other.run.candidate))
                        and not self._lifted_at_screening(other)):
                    self.state.race.release(other.cid)
        self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.plan.campaign_id, level="info",
                                text=f"{run.cid}: knobs screened; the race runs {outcome.profile.describe()}"))
        self.state.news.post()

    def _lifted_at_screening(self, slot: Slot) -> bool:
        """For a candidate measured at what is now its class's screened profile, while the knobs were screened: the
        open change that may carry it over the SLO's floor (``Screening.lift_for``). Done measuring (waiting for
        the screening, or playing its pairs) and short of the floor, it is lifted now: True, and it stays held
        until it is measured again at the change. Still measuring, its next blocks may lift it (Race.may_lift)."""
        run, race = slot.run, self.state.race
        if (run.race_profile is None or slot.task is None or slot.task.done() or not self._measures_on(slot)
                or run.phase is not CandidatePhase.MEASURING):
            return False
        slot.lift = self.screening.lift_for(run.candidate, raced=run.race_profile)
        if slot.lift is None:
            return False
        if run.cid not in self._pool.at_hand:   # still measuring: armed for its next blocks
            self._arm_lift(slot)
            return False
        if not race.could_lift(run.cid, gain=slot.lift.reach):
            return False
        why = lift_notice(race, run.cid, slot.lift)
        self.screening.lift(run.cid, slot.lift, why=why)
        self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.plan.campaign_id, level="info", text=why))
        return True

    def _arm_lift(self, slot: Slot) -> None:
        """Tell the race the most ``slot.lift`` could raise the candidate's throughput (``Race.may_lift``): enough
        to hold it for the change when its blocks miss the SLO's floor by less; and, when the change is worth a
        run on cost (``Lift.on_cost``), when its cost is what would eliminate it (``Race.could_lift_on_cost``;
        docs/method.md, Screening). One lift a candidate (``Screening.lift_for``)."""
        lift = slot.lift
        self.state.race.may_lift(slot.cid, None if lift is None else lift.reach,
                                 on_cost=lift is not None and lift.on_cost,
                                 widening=None if lift is None else lift.widening)

    async def _tune(self, slot: Slot, conn: HostConnection, variant: Profile) -> None:
        """One variable at a time on the leader's own instance, inside its deadline."""
        run = slot.run
        attribution = attribution_of(run, units=self.manifest.production_units)
        if attribution is None:
            return

        def time_left() -> float:
            return run.work_time_left_s(self.clock.now())

        slot.tuning_started = True
        # raced at its class's screened profile: only what the screening left unsettled is tried (screening.py)
        confirm = self.screening.left_to_confirm(run.candidate, raced=variant, bottleneck=attribution.in_execution)
        screened_by = self.screening.outcome.screener if confirm is not None and self.screening.outcome else None
        if confirm == ():
            outcome = TuningOutcome((), variant, screened_by=screened_by)
        else:
            self.ctx.phase(run, CandidatePhase.TUNING, f"bottleneck {attribution.in_execution}")
            screened = self.screening.outcome
            outcome = await tune(self.ctx, run, conn, start=variant, bottleneck=attribution.in_execution,
                                 time_left_s=time_left, steps=confirm, screened_by=screened_by,
                                 earlier=screened.tuning.trials if confirm is not None and screened else ())
        slot.tuning = outcome
        self._tuned_cid, self.tuning = run.cid, outcome
        self.ctx.phase(run, CandidatePhase.DONE, f"{len(run.blocks)} blocks; tuned: {outcome.profile.describe()}"
                       + (f" (knobs screened on {screened_by})" if screened_by is not None else ""))

    async def _rent_or_replace(self, slot: Slot) -> bool:
        """Re-check the offer right before renting; a vanished offer is replaced from the reserves, once each. An
        offer scheduling could not place is asked again once, ``RESCHEDULE_AFTER_S`` later (a new approval): the
        refusal is about that moment's free resources, and nothing was rented or billed."""
        run = slot.run
        rescheduled: set[int] = set()
        while True:
            candidate = run.candidate
            await self._while_in_doubt(run)
            if self._stopped_by is not None:
                self.ctx.skip(run, NotRented.STOPPED, f"stopped before its turn: {self._stopped_by}")
                return False
            if not self.ledger.can_afford(candidate):
                self.ctx.skip(run, NotRented.OVER_BUDGET,
                              f"budget: ${candidate.max_spend_usd:.2f} more could exceed ${self.plan.budget_usd:.2f}")
                return False
            try:
                still_there = bool(await self.ctx.market.search_offers(f"id={candidate.offer.id}"))
            except ApiError:  # a spent search quota, a storm: the check is a shortcut, the rent's answer says it
                still_there = True
            outcome = RentOutcome.REFUSED
            if still_there:
                outcome = await rent(self.ctx, run, again=candidate.offer.id in rescheduled,
                                     reserve=lambda: self.ledger.hold(slot))
                if outcome is RentOutcome.RENTED:
                    slot.rented_local_at = self.clock.now()
                    return True
                slot.rented_local_at = None
            slot.committed_usd = None
            if outcome in (RentOutcome.NOT_APPROVED, RentOutcome.OVER_BUDGET, RentOutcome.RATE_LIMITED):
                return False   # nothing wrong with the offer: no reserve takes its place
            if outcome is RentOutcome.NOT_SCHEDULED and candidate.offer.id not in rescheduled:
                rescheduled.add(candidate.offer.id)
                self.ctx.phase(run, CandidatePhase.RENTING, f"{run.detail}; asking again in "
                                                            f"{RESCHEDULE_AFTER_S:.0f} s")
                await self.clock.sleep(RESCHEDULE_AFTER_S)
                continue
            # the rent's own refusal (e.g. scheduling could not place it) says more than "vanished"
            why = (run.detail if still_there and outcome in (RentOutcome.REFUSED, RentOutcome.NOT_SCHEDULED)
                   and run.detail
                   else f"offer {candidate.offer.id} vanished")
            replacement = self._reserves.for_vanished(candidate)
            if replacement is None:
                self.ctx.skip(run, _NOT_RENTED[outcome] if still_there else NotRented.VANISHED,
                              f"{why}; no reserve left")
                return False
            self._stand_in(run, replacement, f"{run.cid}: {why}, trying reserve {replacement.offer.id}")

    async def _fail(self, run: CandidateRun, exc: CandidateFailed) -> None:
        run.failure = str(exc)
        run.failed_with = exc.failure
        self.ctx.phase(run, CandidatePhase.FAILED, str(exc))
        async with self.state.lock:
            self.state.race.exclude(run.cid, reason=EliminationReason.FAILED, detail=str(exc))
        mark = (BadHostMark(machine_id=run.candidate.offer.machine_id, reason=str(exc)[:200],
                            evidence_json=json.dumps({"instance_id": run.instance_id, **exc.evidence}, default=str))
                if exc.bad_host and run.instance_id is not None else None)
        judgement = self._judge.failed(exc.failure, mark=mark, detail=str(exc))
        for due in judgement.marks:
            await self._record_bad_host(due)
        if judgement.halt is not None:
            await self._halt(judgement.halt)
        self._verdict.set()

    async def _while_in_doubt(self, run: CandidateRun) -> None:
        """After a first canary failure, wait for the verdicts of the candidates already on their way to their
        canaries before renting another: if they fail the same way, this rent would only buy that failure again."""
        while self._judge.in_doubt and any(r is not run and r.phase in _ON_THE_WAY for r in self.runs):
            self._verdict.clear()
            await self._verdict.wait()

    async def _record_bad_host(self, mark: BadHostMark) -> None:
        now = self.clock.now()
        await self.ctx.store.record_bad_host(machine_id=mark.machine_id, reason=mark.reason,
                                             evidence_json=mark.evidence_json, recorded_at=now,
                                             expires_at=now + BAD_HOST_TTL_S, campaign_id=self.plan.campaign_id)

    def _screener_lost(self, cid: str) -> None:
        if self.screening.lost(cid):
            self.state.news.post()   # the candidates waiting for its screening measure (one may screen instead)

    async def _release(self, slot: Slot) -> None:
        """Destroy this candidate's instance as soon as it is done with (the final teardown verifies it)."""
        run = slot.run
        self._verdict.set()   # one fewer on its way to a canary verdict
        self._screener_lost(run.cid)   # a screener ended before its screening: another may screen
        if run.instance_id is None:
            if run.uncertain_label is None:
                slot.committed_usd = None
            # else: the create's answer was lost and an instance may be billing until the final teardown finds
            # it by label, so its worst case stays reserved against the budget
            return
        sending_at: list[float] = []
        windows: list[Answered] = []
        try:
            if await destroy_with_approval(client=self.ctx.market, approver=self.ctx.approver,
                                           instance_id=run.instance_id, campaign_id=self.plan.campaign_id,
                                           reason=f"{run.cid} {run.phase}",
                                           on_sending=lambda: sending_at.append(self.clock.now()),
                                           on_answered=windows.append):
                slot.destroy_sent = True
                self.bus.publish(InstanceDestroyed(at=self.clock.now(), campaign_id=self.plan.campaign_id,
                                                   instance_id=run.instance_id))
                await self.ctx.store.record_transition(instance_id=run.instance_id,
                                                       state=InstanceState.DESTROY_REQUESTED, at=self.clock.now())
                for endpoint in run.instance.ssh_endpoints() if run.instance is not None else []:
                    # the addresses go back to the market: its next instance will present a key of its own
                    self.ctx.executor.forget_host(*endpoint)
        except VastuiError as exc:
            log.warning("destroying %s failed (final teardown retries): %s", run.instance_id, exc)
        if slot.destroy_sent:
            # billing stops as the marketplace handles the destroy: between the request and its answer
            run.ended_at = windows[0].midpoint if windows else (sending_at[0] if sending_at else self.clock.now())
        self.ledger.settle(slot)

