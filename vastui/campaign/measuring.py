"""Measuring a candidate for the race: independent runs of warm-up and blocks, each block fed to the race.

The engine's measuring collaborator (``Measurer``) is given the context, the race's shared state (``RaceState``,
which also says who stops measuring to be tuned), the slots and the ledger. At least ``min_runs`` separate agent
processes per candidate when its deadline leaves room, and another whenever the race asks for one (its runs are too
few or disagree: docs/method.md, Stopping), every block decided on at once (off the event loop), a run cut by the
deadline left for the destroy; why measuring ended is a ``MeasuringStop``.
"""

from __future__ import annotations

import asyncio
import enum
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from vastui.bench.manifest import Manifest, MeasureRule
from vastui.bench.select import EliminationReason, LiftReason, Race, RaceEnd, decide_profile
from vastui.bench.stats import Verdict, WarmupResult
from vastui.bench.tuning import Profile
from vastui.campaign.candidate import (
    CandidateContext,
    CandidateFailed,
    CandidatePhase,
    CandidateRun,
    note_record,
    save_records,
    workload_argv,
)
from vastui.campaign.charges import measured_cost_inputs
from vastui.campaign.folding import FoldedCanary
from vastui.campaign.live import standings_event, warmup_event
from vastui.campaign.measure import BlockMeter, MeasuredBlock
from vastui.campaign.plan import tuning_trials
from vastui.campaign.ports import HostConnection, Record
from vastui.campaign.screening import Lift, Screening
from vastui.campaign.slots import Ledger, Slot
from vastui.campaign.waves import Bulletin
from vastui.errors import RemoteError
from vastui.events import BlockMeasured, CandidateEliminated, Notice
from vastui.remote.protocol import Result
from vastui.store.records import RunStatus


class MeasuringEnded(enum.StrEnum):
    """Why a candidate's measuring, or one agent run of it, ended."""

    MAX_BLOCKS = "max blocks"             # it reached the manifest's most blocks
    TO_TUNING = "to tuning"               # it leads with enough evidence: its instance goes to tuning
    TO_SCREENING = "to screening"         # the first with its minimum evidence: its instance screens the knobs
    TO_HELP_SCREENING = "to help the screening"   # its minimum evidence while the screening's trial wants pairs
    PROFILE_CHANGED = "profile changed"   # the screening says it is raced at another profile: measured again there
    TO_LIFT = "to lift"                   # it missed the SLO's floor: measured again at the open change that may lift it
    ELIMINATED = "eliminated"             # the race dropped it
    RACE_DECIDED = "race decided"
    DEADLINE = "instance deadline"
    STREAM_ENDED = "stream ended"         # the agent's records stopped coming
    SHARE_DONE = "share done"             # this run gave its share of the minimum evidence: the next run starts
    RUN_ASKED = "another run asked"       # the race asked for another independent run (runs few or disagreeing)
    RACE = "race"                         # the race said stop after a block
    WORKLOAD_ENDED = "the workload ended"
    RUN_NOT_STARTED = "run did not start"   # a further run would not start: the evidence already had stands
    NO_RUN_FITS = "no further run fits"   # at the SLO's edge past max_blocks, where only further runs help


@dataclass(frozen=True, slots=True)
class MeasuringStop:
    """Why measuring ended (``why``) with its particulars; ``describe`` says it for people."""

    why: MeasuringEnded
    blocks: int = 0          # MAX_BLOCKS: the most allowed; TO_TUNING: how many it had
    run: int = 0             # RUN_NOT_STARTED: which run (counted from 1)
    race_reason: str = ""    # RACE_DECIDED: the race's own reason
    slo_edge: bool = False   # MAX_BLOCKS: past the manifest's most, its SLO at the edge (Race.at_slo_edge)

    def describe(self) -> str:
        match self.why:
            case MeasuringEnded.MAX_BLOCKS:
                return f"reached {self.blocks} blocks" + (" (past max_blocks: its SLO was undecided, and certified it "
                                                          "would have been chosen)" if self.slo_edge else "")
            case MeasuringEnded.TO_TUNING:
                return f"leading with {self.blocks} blocks: its instance goes to tuning"
            case MeasuringEnded.TO_SCREENING:
                return f"first with its minimum evidence ({self.blocks} blocks): its instance screens the knobs"
            case MeasuringEnded.TO_HELP_SCREENING:
                return (f"its minimum evidence ({self.blocks} blocks) while the knobs are screened: its instance "
                        f"plays the screening's A/B pairs")
            case MeasuringEnded.PROFILE_CHANGED:
                return "the screening changed its race profile: measured again at it"
            case MeasuringEnded.TO_LIFT:
                return (f"short of the SLO's throughput floor after {self.blocks} blocks: measured again at a change "
                        f"the screening left open")
            case MeasuringEnded.RACE_DECIDED:
                return f"race decided: {self.race_reason}"
            case MeasuringEnded.RUN_NOT_STARTED:
                return f"run {self.run} did not start"
            case MeasuringEnded.NO_RUN_FITS:
                return (f"its SLO still undecided at {self.blocks} blocks, and no further run fits before its "
                        f"deadline")
        return str(self.why)


def lift_notice(race: Race, cid: str, lift: Lift) -> str:
    """What the console and the receipt say of a candidate lifted (``Race.may_lift``)."""
    standing = race.standing(cid)
    why = race.lifted_for(cid)
    if why is LiftReason.COST:
        cost = standing.cost_per_unit
        seen = ("" if cost is None else
                f" (${1000 * cost.point:.4g} [{1000 * cost.low:.4g}, {1000 * cost.high:.4g}] per 1k units)")
        return (f"{cid}: dearer than the leader after {standing.blocks} blocks{seen}, by less than an open change "
                f"could save; raced again at {lift.describe()} instead of being dropped")
    if why is LiftReason.LATENCY:
        return (f"{cid}: over the SLO's latency ceiling after {standing.blocks} blocks, its steps waiting for input; "
                f"raced again at {lift.describe()} instead of being dropped")
    floor = race.slo.throughput_min_units_per_s
    seen = ("" if standing.throughput is None else
            f" ({standing.throughput.point:.1f} [{standing.throughput.low:.1f}, {standing.throughput.high:.1f}] "
            f"units/s against {floor:g})")
    return (f"{cid}: short of the SLO's throughput floor after {standing.blocks} blocks{seen}; raced again at "
            f"{lift.describe()} instead of being dropped")


def slo_edge_notice(race: Race, cid: str) -> str:
    """What the event log says when a candidate at the SLO's edge measures on past max_blocks."""
    standing = race.standing(cid)
    throughput = standing.throughput
    floor = race.slo.throughput_min_units_per_s
    seen = "" if throughput is None else (
        f": {throughput.point:.1f} [{throughput.low:.1f}, {throughput.high:.1f}] units/s"
        + ("" if floor is None else f" against a floor of {floor:g}"))
    return (f"{cid}: its SLO is still undecided at {standing.blocks} blocks{seen}; certified, it would be chosen "
            f"over every certified candidate, so it measures on in further runs, to at most {race.block_cap(cid)} "
            f"blocks")


@dataclass(slots=True, eq=False)
class RaceState:
    """The race as the engine and the measuring both see it, and who gets instance time next. ``lock`` is held
    around every use of the race (its decisions run off the event loop)."""

    race: Race
    manifest: Manifest
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    finished: asyncio.Event = field(default_factory=asyncio.Event)   # the race is decided (or stopped): no more rents
    reason: str = "measuring"           # why the race ended, for the receipt
    ended: RaceEnd | None = None        # which of the race's rules ended it (None: it was stopped from outside)
    leader: str | None = None
    choice_now: str | None = None       # whom the decision would choose if taken at the last block
    news: Bulletin = field(default_factory=Bulletin)   # posted on every block decided and when the race ends
    rerun: frozenset[str] = frozenset()   # candidates the race asks for another independent run
    slo_edge: frozenset[str] = frozenset()   # candidates at the SLO's edge: they may measure past max_blocks
    past_max_blocks: set[str] = field(default_factory=set)   # edge candidates that went past it (said once)
    screening: Screening | None = None  # the knobs' screening (screening.py); None: the race keeps the first profile

    def block_cap(self, cid: str) -> int:
        """The most blocks ``cid`` measures (``Race.block_cap``): ``max_blocks``, more at the SLO's edge."""
        return self.race.block_cap(cid)

    def is_settled(self, slot: Slot) -> bool:
        """Whether ``slot``'s evidence is at the profile it is raced at: no screening pending, and measured (if at
        all) at what the screening says for it. Only then may it be tuned or ..."""
        screening = self.screening
        if screening is None or not screening.wanted:
            return True
        if screening.is_pending:
            return False
        profile = slot.run.race_profile
        return profile is None or profile == screening.profile_for(slot.run.candidate)

    def finish(self, reason: str, *, ended: RaceEnd | None = None) -> None:
        self.reason = reason
        if ended is not None:
            self.ended = ended
        self.finished.set()
        self.news.post()

    def rule_of(self, cid: str) -> MeasureRule:
        """The evidence rule a candidate is measured to: a re-verified host's own (campaign/repeat.py), else the
        manifest's."""
        return self.race.own_rule(cid) or self.manifest.measure

    def leader_may_tune(self, slot: Slot) -> bool:
        """The leader with the winner's minimum evidence stops measuring and tunes on its own instance (a later
        leader is tuned too, on its own instance: the chosen one's tuning is what counts): more blocks
        of one profile shrink only the within-run error, which the between-run part already outweighs, while
        tuning needs instance time the deadline would otherwise have spent on them.

        Only once the decision, taken now, would choose it: a leader by point whose interval is still wider than a
        rival's (the decision takes the lowest *upper* bound) measures on, or the rival, running on to its
        ``max_blocks`` while the leader tunes, would win on the narrower interval the leader gave up (seen in the
        decision benchmark: chosen 7-10 % dearer than the leader it stopped measuring)."""
        run = slot.run
        return (self.leader == slot.cid and self.choice_now == slot.cid and not slot.tuning_started
                and slot.cid not in self.rerun    # its runs disagree: another run first (docs/method.md, Stopping)
                and tuning_trials(self.manifest) > 0 and self.is_settled(slot)
                and len(run.blocks) >= self.rule_of(slot.cid).winner_min_blocks
                and slot.certified   # the SLO's evidence (e.g. p99's 459 steps) comes from blocks
                and run.measured_runs + 1 >= self.rule_of(slot.cid).min_runs)

    async def would_be_chosen(self, slot: Slot) -> bool:
        """Whether the decision, taken now, would choose ``slot``: the race's leader is the lowest cost point, the
        decision the lowest upper bound, and a candidate that ran on to max_blocks while the leader was tuned can
        end with the narrower interval and be chosen. It is tuned too, while its instance lives: a choice left at
        its first profile can be far from its best (a third of its speed, seen in the decision benchmark)."""
        if tuning_trials(self.manifest) <= 0 or slot.tuning_started or not self.is_settled(slot):
            return False
        async with self.lock:
            finalists = await asyncio.to_thread(self.race.finalists)
        return decide_profile(finalists, units=self.manifest.production_units).chosen == slot.cid

    def stop_reason(self, slot: Slot, *, now: float) -> MeasuringStop | None:
        """Why ``slot`` stops measuring now, or None while it measures on."""
        run = slot.run
        if len(run.blocks) >= (cap := self.block_cap(slot.cid)):
            return MeasuringStop(MeasuringEnded.MAX_BLOCKS, blocks=cap,
                                 slo_edge=cap > self.manifest.measure.max_blocks)
        if slot.tune_next or self.leader_may_tune(slot):
            # Once stopped for tuning it is tuned, though another block may have moved the lead meanwhile: its
            # measuring is over either way, and its instance's time is better spent on the trials than idle.
            slot.tune_next = True
            return MeasuringStop(MeasuringEnded.TO_TUNING, blocks=len(run.blocks))
        if slot.lift_due is not None:
            return MeasuringStop(MeasuringEnded.TO_LIFT, blocks=len(run.blocks))
        if slot.eliminated:
            return MeasuringStop(MeasuringEnded.ELIMINATED)
        if self.finished.is_set():
            return MeasuringStop(MeasuringEnded.RACE_DECIDED, race_reason=self.reason)
        if run.work_time_left_s(now) <= 0:
            return MeasuringStop(MeasuringEnded.DEADLINE)
        return self._screening_stop(slot)

    def _screening_stop(self, slot: Slot) -> MeasuringStop | None:
        """It goes to screen the knobs (the first with its minimum evidence), or the screening moved its race
        profile away from the one it measures at."""
        screening, run = self.screening, slot.run
        if screening is None:
            return None
        if slot.screen_next or (run.passed_gate is not False
                                and screening.may_claim(slot.cid, blocks=len(run.blocks), tuned=slot.tuning_started)):
            screening.claim(slot.cid)
            slot.screen_next = True
            return MeasuringStop(MeasuringEnded.TO_SCREENING, blocks=len(run.blocks))
        if (run.passed_gate is not False and len(run.blocks) >= self.rule_of(slot.cid).min_blocks
                and screening.wants_help(run)):
            # more blocks at a profile the screening may change would likely leave the race: its trial's pairs
            # are worth more now (campaign/tuning.py, TrialPool)
            return MeasuringStop(MeasuringEnded.TO_HELP_SCREENING, blocks=len(run.blocks))
        if not self.is_settled(slot) and not screening.is_pending:
            return MeasuringStop(MeasuringEnded.PROFILE_CHANGED)
        return None


class Measurer:
    """Measures each candidate for the race and feeds the race its blocks."""

    def __init__(self, *, ctx: CandidateContext, state: RaceState, slots: Sequence[Slot], ledger: Ledger) -> None:
        self.ctx = ctx
        self.state = state
        self.slots = slots
        self.ledger = ledger
        self.manifest = ctx.manifest
        self.clock = ctx.clock
        self.bus = ctx.bus

    async def measure(self, slot: Slot, conn: HostConnection, variant: Profile, *,
                      folded: FoldedCanary | None = None) -> None:
        """Blocks from at least ``min_runs`` independent runs (separate agent processes, each warmed up): the
        first runs stop after their share of the minimum evidence, the last one runs until the race says stop —
        or, once it gave a share too, asks this candidate for another run (``RaceState.rerun``): then one more.
        ``folded``: the first run starts with the canary, its gate passed before any block counts (folding.py)."""
        run = slot.run
        if folded is not None:
            folded.begin()
        else:
            self.ctx.phase(run, CandidatePhase.MEASURING)
        c = run.candidate
        stored = await self.ctx.store.start_run(
            campaign_id=self.ctx.campaign_id, instance_id=run.instance_id, machine_id=c.offer.machine_id,
            gpu_name=c.offer.gpu_name, num_gpus=c.gpu_count, workload_digest=self.manifest.digest,
            variant_json=variant.to_json(), started_at=self.clock.now())
        run.run_id = stored.run_id
        await self.ctx.store.record_run_phases(run_id=stored.run_id, pull_s=run.startup_s)
        rule = self.state.rule_of(run.cid)   # a re-verified host's is lighter (campaign/repeat.py)
        share = max(1, -(-rule.min_blocks // max(1, rule.min_runs)))   # blocks per run until min_runs are had
        ended = MeasuringStop(MeasuringEnded.STREAM_ENDED)
        warmups: list[float] = []
        index = 0
        while True:
            planned = index < max(1, rule.min_runs) - 1     # one of the first runs: it stops after its share
            try:
                ended = await self._one_run(slot, conn, variant, index=index, warmups=warmups,
                                            blocks_until=len(run.blocks) + share if planned else None, share=share,
                                            folded=folded if index == 0 else None)
            except CandidateFailed as exc:   # its folded canary failed: the stored run ends with it
                await self.ctx.store.finish_run(run_id=stored.run_id, status=RunStatus.ERROR, at=self.clock.now(),
                                                error=str(exc))
                raise
            except RemoteError as exc:
                if index == 0 or not run.blocks:
                    raise
                # A further run that would not start leaves the evidence already had standing (one run fewer).
                self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.ctx.campaign_id, level="warning",
                                        text=f"{run.cid}: run {index + 1} did not start ({exc}); keeping "
                                             f"{len(run.blocks)} blocks from {run.measured_runs} run(s)"))
                ended = MeasuringStop(MeasuringEnded.RUN_NOT_STARTED, run=index + 1)
                break
            if (self.state.stop_reason(slot, now=self.clock.now()) is not None
                    or ended.why not in (MeasuringEnded.SHARE_DONE, MeasuringEnded.RUN_ASKED)):
                break
            index += 1
        thetas = [b.throughput_units_per_s for b in run.blocks]
        await self.ctx.store.finish_run(
            run_id=stored.run_id, status=RunStatus.OK if thetas else RunStatus.ERROR, at=self.clock.now(),
            throughput_units_per_s=statistics.median(thetas) if thetas else None,
            stats_json=json.dumps({"blocks": len(thetas), "runs": run.measured_runs, "warmup_s": run.warmup_s,
                                   "startup_s": run.startup_s}),
            error=None if thetas else "no complete block")
        stop = self.state.stop_reason(slot, now=self.clock.now()) or ended
        reason = stop.describe()
        measured_again = stop.why in (MeasuringEnded.TO_SCREENING, MeasuringEnded.PROFILE_CHANGED,
                                      MeasuringEnded.TO_LIFT)
        if (len(run.blocks) < rule.min_blocks and run.phase is CandidatePhase.MEASURING
                and not measured_again):
            # Too little evidence to race on (a slow host hit its deadline): out of the race, data kept.
            async with self.state.lock:
                self.state.race.exclude(run.cid, reason=EliminationReason.FAILED,
                                  detail=f"only {len(run.blocks)} blocks before it stopped ({reason})")
        if run.phase is CandidatePhase.MEASURING:
            self.ctx.phase(run, CandidatePhase.DONE, f"{len(run.blocks)} blocks in {run.measured_runs} run(s); "
                                                     f"stopped: {reason}")

    async def _one_run(self, slot: Slot, conn: HostConnection, variant: Profile, *, index: int,
                       warmups: list[float], blocks_until: int | None, share: int,
                       folded: FoldedCanary | None = None) -> MeasuringStop:
        """One agent run's warm-up and blocks; says why it ended (``SHARE_DONE`` when it gave its share,
        ``RUN_ASKED`` when the race wants another run of this candidate and this one gave ``share`` blocks).
        With ``folded`` (the first run, its gate pending) the run starts with the canary, and fails as it would."""
        if folded is None:
            return await self._agent_run(slot, conn, variant, index=index, warmups=warmups,
                                         blocks_until=blocks_until, share=share, folded=None)
        try:
            stop = await self._agent_run(slot, conn, variant, index=index, warmups=warmups,
                                         blocks_until=blocks_until, share=share, folded=folded)
        except RemoteError as exc:
            if folded.passed:
                raise
            raise folded.lost(exc) from exc
        if not folded.passed:
            raise folded.unfinished()
        return stop

    async def _agent_run(self, slot: Slot, conn: HostConnection, variant: Profile, *, index: int,
                         warmups: list[float], blocks_until: int | None, share: int,
                         folded: FoldedCanary | None) -> MeasuringStop:
        """The run itself. While ``folded``'s gate is pending, its records go to the gate too and blocks are held
        (warm-up counts from the process's start); once the output passed, the held blocks count in order."""
        run = slot.run
        meter = BlockMeter(warmup=self.manifest.warmup, measure=self.manifest.measure, run=index)
        started_at, blocks_before = self.clock.now(), len(run.blocks)
        left_s = run.work_time_left_s(self.clock.now())
        argv = workload_argv(self.manifest, variant=variant, steps=0, seconds=max(left_s, 60.0),
                             canary_steps=folded.steps if folded is not None else 0)
        buffer: list[Record] = []
        held: list[MeasuredBlock] = []
        ended = MeasuringEnded.STREAM_ENDED
        async with conn.run_agent(argv) as session:
            async for record in session:
                note_record(self.ctx, run, record)
                buffer.append(record)
                block = meter.add(record)
                counted = [block] if block is not None else []
                if folded is not None and not folded.passed:
                    held, counted = held + counted, []
                    await folded.see(record)   # raises CandidateFailed when the canary failed
                    if folded.passed:          # the gate passed: the blocks held till now count, in order
                        held, counted = [], held
                        if run.run_id is not None:
                            await self.ctx.store.record_run_phases(run_id=run.run_id, pull_s=run.startup_s)
                if meter.warmup is not None and len(warmups) == index:
                    await self._warmed(run, meter.warmup, warmups, at=record.t)
                for block in counted:
                    run.blocks.append(block)
                    run.latencies_ms.extend(block.block.latencies_ms)
                    await self._reprice_warmup(run, meter)
                    await save_records(self.ctx, run, buffer)
                    buffer = []
                    if await self._block_done(slot, block):
                        if run.work_time_left_s(self.clock.now()) <= 0:
                            session.abandon()
                        ended = MeasuringEnded.RACE
                        break
                    if blocks_until is not None and len(run.blocks) >= blocks_until:
                        if self._another_run_fits(run, started_at=started_at, blocks_before=blocks_before):
                            ended = MeasuringEnded.SHARE_DONE
                            break
                        blocks_until = None   # no time for a fresh process: this run goes on (the prior covers)
                    elif blocks_until is None and self._run_asked(run, share=share, started_at=started_at,
                                                                  blocks_before=blocks_before):
                        ended = MeasuringEnded.RUN_ASKED
                        break
                    elif blocks_until is None and self._edge_run_over(run, share=share, blocks_before=blocks_before):
                        ended = MeasuringEnded.NO_RUN_FITS
                        break
                if ended is not MeasuringEnded.STREAM_ENDED:
                    break
                if isinstance(record, Result):
                    ended = MeasuringEnded.WORKLOAD_ENDED
                    break
                if run.work_time_left_s(self.clock.now()) <= 0:
                    session.abandon()   # the destroy comes next and ends it; stopping first would eat its margin
                    break  # the deadline is checked on every record: a block is no reason to outlive it
        await save_records(self.ctx, run, buffer)
        if meter.blocks:
            run.measured_runs += 1
        run.units_total += meter.units_total
        run.accepted_total += meter.accepted_total
        return MeasuringStop(ended, blocks=len(run.blocks))

    def _run_asked(self, run: CandidateRun, *, share: int, started_at: float, blocks_before: int) -> bool:
        """Whether this run ends for another: the race asks for one, this run gave its share of blocks, and a
        fresh run fits both the block cap and the deadline."""
        return (run.cid in self.state.rerun and len(run.blocks) - blocks_before >= share
                and len(run.blocks) < self.state.block_cap(run.cid)
                and self._another_run_fits(run, started_at=started_at, blocks_before=blocks_before))

    def _edge_run_over(self, run: CandidateRun, *, share: int, blocks_before: int) -> bool:
        """Whether this run of a candidate at the SLO's edge, past ``max_blocks``, gave its share and no further
        run was asked of it (none fits its deadline): more blocks of the same run would not narrow what keeps its
        interval across the floor (``Race.at_slo_edge``)."""
        return (run.cid in self.state.slo_edge and len(run.blocks) >= self.manifest.measure.max_blocks
                and len(run.blocks) - blocks_before >= share)

    def _another_run_fits(self, run: CandidateRun, *, started_at: float, blocks_before: int) -> bool:
        """Whether a fresh run (its start, warm-up and a share of blocks, as long as this one's took) and the
        remaining minimum evidence fit before the instance's deadline."""
        now = self.clock.now()
        this_run = run.blocks[blocks_before:]
        block_s = statistics.fmean(b.end_t - b.start_t for b in this_run) if this_run else self.manifest.measure.block_s
        needed = (now - started_at) + max(0, self.state.rule_of(run.cid).winner_min_blocks
                                          - len(run.blocks)) * block_s
        return run.work_time_left_s(now) >= needed

    async def _reprice_warmup(self, run: CandidateRun, meter: BlockMeter) -> None:
        """This run's warm-up priced again at the pace its blocks measured (``BlockMeter.warmup_lost_s``): the
        warm-up's own estimate may have had no settled marker to go by."""
        lost = meter.warmup_lost_s()
        if lost is None or not run.warmup_lost_s or lost == run.warmup_lost_s[-1]:
            return
        run.warmup_lost_s[-1] = lost     # this run's: appended when its warm-up ended
        async with self.state.lock:
            self.state.race.set_cost(run.cid, measured_cost_inputs(run, self.manifest))

    async def _warmed(self, run: CandidateRun, warmup: WarmupResult, warmups: list[float], *, at: float) -> None:
        """This run's warm-up ended: the candidate's warm-up figures, the event, the race's cost inputs."""
        warmups.append(warmup.warmup_s)
        run.warmup_s = statistics.fmean(warmups)   # production warms up once: the runs' mean
        run.warmup_lost_s.append(warmup.lost_s if warmup.lost_s is not None else warmup.warmup_s)
        settled = warmup.settled_steps
        run.warmup_steps = max(run.warmup_steps, warmup.steps if settled is None else settled)
        self.bus.publish(warmup_event(warmup, at=at, campaign_id=self.ctx.campaign_id, candidate=run.cid))
        await self._warm(run)

    async def _warm(self, run: CandidateRun) -> None:
        if run.run_id is not None:
            await self.ctx.store.record_run_phases(run_id=run.run_id, warmup_s=run.warmup_s)
        self.state.race.set_cost(run.cid, measured_cost_inputs(run, self.manifest))

    async def _block_done(self, slot: Slot, measured: MeasuredBlock) -> bool:
        """Feed the race; True when this candidate should stop measuring."""
        run, state = slot.run, self.state
        self.bus.publish(BlockMeasured(at=measured.end_t, campaign_id=self.ctx.campaign_id, candidate=run.cid,
                                       block_index=len(run.blocks), throughput_units_per_s=measured.
                                       throughput_units_per_s, data_wait_share=measured.data_wait_share,
                                       gpu_util_pct=measured.gpu_util_pct))
        async with state.lock:
            state.race.add_block(run.cid, measured.block, data_wait_share=measured.data_wait_share)
            # Tens of milliseconds of bootstrap: off the event loop, so records, polls and SSH keep flowing (on a
            # simulator's scaled clock a stalled loop is minutes of someone's deadline).
            spent = self.ledger.spent_usd()
            step, finalists = await asyncio.to_thread(lambda: (state.race.decide(spent_usd=spent),
                                                               state.race.finalists()))
            state.choice_now = decide_profile(finalists, units=self.manifest.production_units).chosen
            for elimination in step.eliminated:
                self.bus.publish(CandidateEliminated(at=self.clock.now(), campaign_id=self.ctx.campaign_id,
                                                     candidate=elimination.candidate_id,
                                                     reason=f"{elimination.reason}: {elimination.detail}"))
                for other in self.slots:
                    if other.cid == elimination.candidate_id:
                        other.eliminated = True
                        if other.run.phase is CandidatePhase.MEASURING:
                            self.ctx.phase(other.run, CandidatePhase.ELIMINATED, elimination.detail)
            for other in self.slots:
                if other.cid in step.lifted and other.lift is None:
                    state.race.release(other.cid)   # (none to race it at: the SLO's verdict stands)
                elif other.cid in step.lifted and other.lift is not None:
                    other.lift_due = lift_notice(state.race, other.cid, other.lift)
                    self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.ctx.campaign_id, level="info",
                                            text=other.lift_due))
            state.leader = step.leader
            state.rerun = frozenset(step.rerun)
            state.slo_edge = frozenset(step.slo_edge)
            for cid in sorted(state.slo_edge - state.past_max_blocks):
                if state.race.block_count(cid) >= self.manifest.measure.max_blocks:
                    state.past_max_blocks.add(cid)
                    self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.ctx.campaign_id, level="info",
                                            text=slo_edge_notice(state.race, cid)))
            standings = standings_event(state.race, step, at=self.clock.now(), campaign_id=self.ctx.campaign_id,
                                        spent_usd=self.ledger.spent_usd(),
                                        reserved_usd=self.ledger.reserved_usd(),
                                        budget_usd=self.manifest.budget.max_usd)
            certified = {row.candidate for row in standings.rows if row.slo == str(Verdict.MET)}
            for other in self.slots:
                other.certified = other.cid in certified
            self.bus.publish(standings)
            if step.finished:
                state.finish(step.reason, ended=step.ended)
        state.news.post()
        return state.stop_reason(slot, now=self.clock.now()) is not None
