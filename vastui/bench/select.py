"""Selection: racing candidates measured in blocks, and the final decision by cost per accepted unit.

Every throughput interval carries the between-run error as well as the blocks' spread (``runs.py``), so
eliminations, SLO certification and the decision rest on what the next, independent run can do.

Racing (irace/LUCB style): after ``min_blocks`` blocks each, and after every block from then on, every challenger is
tested against the current best on the bootstrap distribution of C_i / C_best, one-sided, with Holm's step-down
correction at 95 %; a challenger is eliminated only when, at its Holm level, its cost interval also lies wholly above
the best's (docs/method.md, Select), or when its SLO cannot be met; one certified to meet the SLO is never
eliminated by a leader that is not (yet). The race stops when one candidate remains, when the leader is within the
indifference zone of every other, when every candidate reached ``max_blocks``, or when the benchmark budget is spent.

"Within the zone" is judged on the same run-aware intervals, not on the blocks alone: every remaining candidate has
its ``min_runs`` independent runs and their spread is no wider than the prior says, and for each of the m rivals the
(1 - confidence)/m lower percentile of C_i / C_leader is >= 1/(1 + epsilon). So when the race ends there, the chance
that any remaining candidate is in truth more than epsilon cheaper than the leader is at most 1 - confidence (5 %),
as far as the between-run model holds (docs/method.md, Stopping). A candidate whose runs are too few or disagree is
asked for another run (``RaceStep.rerun``) instead.

The decision takes the lowest *upper* bound of C(N) among SLO-certified profiles: conservative by design.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from vastui.bench.attribution import DATA_WAIT_SHARE_MAX, input_gain_bound
from vastui.bench.cost import CostInputs, break_even_units, cost_curve, cost_interval
from vastui.bench.manifest import MeasureRule, Slo
from vastui.bench.runs import observed_run_cv, run_aware_distribution, runs_of
from vastui.bench.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    Block,
    Interval,
    Verdict,
    floor_verdict,
    latency_plausible,
    latency_verdict,
    median,
    percentile,
    percentile_bounds,
)
from vastui.bench.tuning import plan_ab_pairs as plan_ab_pairs  # re-exported: A/B planning is part of selection

# Candidates whose costs are within 3 % are practically equal: telling them apart costs more than the difference.
INDIFFERENCE = 0.03
SLO_EDGE_CAP = 2          # a candidate at the SLO's edge measures to twice max_blocks (Race.at_slo_edge)
# A lift's reach from a machine's own wait for input (``Race._input_reach``) reads the wait as at most this share: a
# step that waited nearly all its time would otherwise promise an unbounded gain (x20 at most).
INPUT_WAIT_CAP = 0.95


class EliminationReason(StrEnum):
    COST = "cost"
    SLO = "slo"
    FAILED = "failed"
    THROTTLED = "throttled"


@dataclass(frozen=True, slots=True)
class RaceCandidate:
    """A candidate in the race; ``prior_throughput_units_per_s`` (dlperf-based) stands in until it is measured.

    A host re-verified from earlier campaigns (campaign/repeat.py) brings ``history``, blocks standing for its
    earlier runs (negative run numbers), counted with its fresh blocks as earlier independent runs once it has
    any, and its own evidence ``rule`` (fewer fresh blocks and runs); None: the race's."""

    candidate_id: str
    cost: CostInputs
    prior_throughput_units_per_s: float | None = None
    history: tuple[Block, ...] = ()
    rule: MeasureRule | None = None


@dataclass(frozen=True, slots=True)
class Elimination:
    candidate_id: str
    reason: EliminationReason
    detail: str


@dataclass(frozen=True, slots=True)
class Standing:
    candidate_id: str
    blocks: int
    throughput: Interval | None
    cost_per_unit: Interval | None
    slo: Verdict
    is_measured: bool
    elimination: Elimination | None


class LiftReason(StrEnum):
    """Why a candidate was held for a lift (``Race.lifted_for``) instead of being eliminated."""

    FLOOR = "floor"        # short of the SLO's throughput floor
    LATENCY = "latency"    # over the SLO's latency ceiling, its steps waiting for input
    COST = "cost"          # dearer than the leader


class RaceEnd(StrEnum):
    """Where the race stands after a step: still measuring, or which rule ended it."""

    MEASURING = "measuring"
    ALL_ELIMINATED = "all_eliminated"     # every candidate was eliminated
    BUDGET_SPENT = "budget_spent"         # the benchmark budget is spent
    MAX_BLOCKS = "max_blocks"             # every remaining candidate has its most blocks
    ONE_REMAINS = "one_remains"           # the others were eliminated; the one left has the winner's evidence
    WITHIN_MARGIN = "within_margin"       # the indifference stop: no rival is likely more than epsilon cheaper


@dataclass(frozen=True, slots=True)
class RaceStep:
    eliminated: tuple[Elimination, ...]
    ended: RaceEnd
    reason: str        # ``ended`` in words, for people
    leader: str | None
    active: tuple[str, ...]
    # Candidates whose runs are too few or disagree: each needs another independent run before the race can end
    # within the margin (more blocks of the runs it has cannot tell how far its next run lands).
    rerun: tuple[str, ...] = ()
    # Candidates at the SLO's edge (``Race.at_slo_edge``): each may measure past max_blocks, in further runs.
    slo_edge: tuple[str, ...] = ()
    # Candidates short of the SLO's throughput floor by less than an open change could lift them (``may_lift``,
    # ``could_lift``), or dearer than the leader by less (``could_lift_on_cost``): held, not eliminated, for the
    # caller to race them at that change.
    lifted: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.ended is not RaceEnd.MEASURING


@dataclass(slots=True)
class _Entry:
    candidate: RaceCandidate
    blocks: list[Block] = field(default_factory=list)
    elimination: Elimination | None = None
    held: bool = False                                      # its blocks are not at its race profile yet
    earlier: list[Block] = field(default_factory=list)      # blocks at an earlier profile, out of the race
    lift: float | None = None                               # the most an open change could raise it (``may_lift``)
    lift_on_cost: bool = False                              # ... and it may save it from a cost elimination too
    lift_widening: float | None = None                      # ... and widens the input path: n/m loaders
    waits: list[float] = field(default_factory=list)        # each block's share of time waiting for input
    lifted_for: LiftReason | None = None                    # why it was last held for a lift


class Race:
    """The racing state over a fixed set of candidates. Feed blocks with ``add_block``, then ask ``decide``."""

    def __init__(self, candidates: Sequence[RaceCandidate], *, units: int, slo: Slo | None = None,
                 measure: MeasureRule | None = None, budget_usd: float | None = None,
                 indifference: float = INDIFFERENCE, confidence: float = DEFAULT_CONFIDENCE,
                 resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> None:
        if len({c.candidate_id for c in candidates}) != len(candidates):
            raise ValueError("candidate ids must be unique")
        self._entries = {c.candidate_id: _Entry(c) for c in candidates}
        self.units = units
        self.slo = slo or Slo()
        self.measure = measure or MeasureRule()
        self.budget_usd = budget_usd
        self.indifference = indifference
        self.confidence = confidence
        self.resamples = resamples
        self.seed = seed
        self._costs: dict[tuple[str, int], tuple[float, ...]] = {}
        self._thetas_cache: dict[tuple[str, int], tuple[float, ...]] = {}
        self._edge: frozenset[str] = frozenset()   # at the SLO's edge as of the last ``decide``

    # --- feeding -----------------------------------------------------------------------------------------------
    def add_block(self, candidate_id: str, block: Block, *, data_wait_share: float | None = None) -> None:
        """Record one measured block (with the share of its time its steps waited for input, when known); blocks
        for an eliminated candidate are kept but change nothing."""
        entry = self._entries[candidate_id]
        entry.blocks.append(block)
        if data_wait_share is not None:
            entry.waits.append(data_wait_share)

    def set_cost(self, candidate_id: str, cost: CostInputs, *, prior_throughput_units_per_s: float | None = None
                 ) -> None:
        """Replace a candidate's cost inputs (measured startup, acceptance rate) as they become known; with a prior
        throughput too when another offer takes the candidate's place (a reserve)."""
        entry = self._entries[candidate_id]
        if prior_throughput_units_per_s is None:
            entry.candidate = replace(entry.candidate, cost=cost)
        else:   # another offer: the earlier one's history and rule are not its
            entry.candidate = RaceCandidate(candidate_id, cost, prior_throughput_units_per_s)
        self._costs = {key: value for key, value in self._costs.items() if key[0] != candidate_id}

    def hold(self, candidate_id: str) -> None:
        """Its evidence is not (yet) at the profile it will be raced at (the knobs are being screened, or it has
        blocks only at the first profile): it is neither eliminated (on the SLO or on cost) nor used to eliminate,
        and the race does not end while it is in it (docs/method.md, Screening)."""
        self._entries[candidate_id].held = True

    def release(self, candidate_id: str) -> None:
        """Its evidence stands as it is: it races again like any other."""
        self._entries[candidate_id].held = False

    def may_lift(self, candidate_id: str, gain: float | None, *, on_cost: bool = False,
                 widening: float | None = None) -> None:
        """A change left open (its measured gain straddles zero) could raise ``candidate_id``'s throughput by up to
        ``gain`` (a fraction; None: no such change). While this stands, a candidate whose evidence falls short of
        the SLO's throughput floor by less than that (``could_lift``) is not eliminated: it is held and named in
        ``RaceStep.lifted`` (once), for the caller to race it at that change (docs/method.md, Screening). With
        ``on_cost`` (the change's point gain is worth having), the same when its cost is what would eliminate it
        (``could_lift_on_cost``). With ``widening`` (more loaders: n where it ran m, n/m), steps that broke the
        latency ceiling while they waited for input may come under it there (``_steps_may_shorten``), and its
        reach is the candidate's own once its blocks say how long their steps waited for input (``_reach``)."""
        entry = self._entries[candidate_id]
        entry.lift, entry.lift_on_cost = gain, on_cost and gain is not None
        entry.lift_widening = widening if gain is not None else None

    def _input_reach(self, entry: _Entry) -> float | None:
        """For a lift that widens the input path (more loaders): the most it could raise this machine's
        throughput, from the share of time its own blocks' steps waited for input (median; ``input_gain_bound``:
        more loaders gain at most the wait they remove, and n where there were m at most n/m - 1); None when it
        does not widen the input path or the blocks do not say."""
        if entry.lift_widening is None or not entry.waits:
            return None
        return input_gain_bound(min(median(entry.waits), INPUT_WAIT_CAP), widening=entry.lift_widening)

    def _reach(self, entry: _Entry, gain: float | None) -> float | None:
        """The most the armed lift could raise ``entry``'s throughput: ``gain`` (what the screening measured on
        other machines), or for more loaders the candidate's own bound (``_input_reach``), which supersedes it
        either way: a screener whose steps never waited leaves more loaders untried (``gain`` 0) or measured at a
        few percent while a machine with a slower input path gains tens of percent from them, and pooled pairs
        that gained +290 % on one host's input path promise nothing to a machine whose steps never wait."""
        own = self._input_reach(entry)
        return gain if gain is None or own is None else own

    def _waits_for_input(self, entry: _Entry) -> bool:
        """Whether the armed lift widens the input path and the candidate's steps waited for input (median share
        over ``DATA_WAIT_SHARE_MAX``): worth a run on cost too, where its reach could undercut the leader."""
        return entry.lift_widening is not None and bool(entry.waits) and median(entry.waits) > DATA_WAIT_SHARE_MAX

    def could_lift(self, candidate_id: str, *, gain: float | None) -> bool:
        """Whether ``candidate_id``, with its minimum evidence, falls short of the SLO on its throughput floor alone
        (its latencies, if the SLO has a ceiling, do not break it) and a change that raises throughput by up to
        ``gain`` (None: no change) could carry its throughput's upper bound over the floor. Short: its verdict
        violated, or still undecided with its median under the floor once it has all its blocks, while certified
        it would be chosen (it would stay uncertified, and a dearer certified rival be chosen: an RTX 5060 Ti at
        39.0 [36.3, 41.6] units/s against a floor of 40 after 8 blocks, in the decision benchmark, left one 37 %
        dearer). Or: its steps broke the latency ceiling while they waited for input, a wider input path may bring
        them under it (``_steps_may_shorten``), and with the gain it could undercut the leader."""
        entry = self._entries[candidate_id]
        floor = self.slo.throughput_min_units_per_s
        gain = self._reach(entry, gain)
        if gain is None or gain <= 0.0 or len(entry.blocks) < self.rule_of(candidate_id).min_blocks:
            return False
        throughput = self._throughput(entry)
        if self._latency_broken(entry):
            # over the ceiling: only a wider input path for steps that waited for input may bring it under, and
            # then only for a candidate that could matter (under the leader's cost with the gain)
            return (self._steps_may_shorten(entry) and throughput is not None
                    and (floor is None or throughput.high * (1.0 + gain) >= floor)
                    and self._could_undercut(candidate_id, gain=gain, confidence=self.confidence))
        if floor is None or throughput is None or throughput.point >= floor:
            return False
        verdict = floor_verdict(throughput, floor=floor)
        if verdict is Verdict.MET or (verdict is Verdict.UNDECIDED and (
                len(entry.blocks) < self.block_cap(candidate_id)
                or not self._chosen_if_certified(self._standing(candidate_id)))):
            return False
        return throughput.high * (1.0 + gain) >= floor

    def _latency_broken(self, entry: _Entry) -> bool:
        if self.slo.latency is None:
            return False
        latencies = [ms for block in entry.blocks for ms in block.latencies_ms]
        return latency_verdict(latencies, percentile_q=self.slo.latency.percentile,
                               max_ms=self.slo.latency.max_ms) is Verdict.VIOLATED

    def _steps_may_shorten(self, entry: _Entry) -> bool:
        """Whether a wider input path (``may_lift``'s ``widening``) may bring steps that broke the latency
        ceiling under it: its blocks' steps waited for input (median share over ``DATA_WAIT_SHARE_MAX``) and,
        that wait taken out of each, the percentile would be under the ceiling. Seen in the decision benchmark:
        an RTX 4080S over the ceiling at batch 256 with 4 loaders, its steps waiting for input, was the cheapest
        machine of its market at 8."""
        ceiling = self.slo.latency
        if ceiling is None or not self._waits_for_input(entry):
            return False
        wait = median(entry.waits)
        latencies = [ms * (1.0 - wait) for block in entry.blocks for ms in block.latencies_ms]
        return latency_verdict(latencies, percentile_q=ceiling.percentile,
                               max_ms=ceiling.max_ms) is not Verdict.VIOLATED

    def _could_undercut(self, candidate_id: str, *, gain: float, confidence: float) -> bool:
        """Whether ``candidate_id``'s cost's lower bound with its throughput raised by ``gain`` (each bootstrap draw
        raised; the startup and warm-up stay what they are) is at or under the leader's upper bound, both at
        ``confidence``. True when no other candidate leads."""
        entry = self._entries[candidate_id]
        leader = self._leader([cid for cid in self.active if self._eligible(cid) and cid != candidate_id])
        if leader is None:
            return True
        at = cost_curve(entry.candidate.cost, units=self.units)
        low, _ = percentile_bounds([at(theta * (1.0 + gain)) for theta in self._thetas(entry)],
                                   confidence=confidence)
        _, leader_high = percentile_bounds(self._cost_distribution(self._entries[leader]), confidence=confidence)
        return low <= leader_high

    def could_lift_on_cost(self, candidate_id: str, *, gain: float | None, level: float | None = None) -> bool:
        """Whether ``candidate_id``, with its minimum evidence and dearer than the leader, could come under the
        leader's cost with its throughput raised by up to ``gain`` (None: no change): its cost's lower bound at
        that throughput (each bootstrap draw raised by ``gain``; the startup and warm-up stay what they are) at
        or under the leader's upper bound, both at confidence ``1 - level`` (the race's own when None). The open
        change is then worth its runs: dropped on its cost at its class's screened profile, a machine that is the
        cheapest at the change (more loaders on its slow input path, say) is never measured there."""
        entry = self._entries[candidate_id]
        leader = self._leader([cid for cid in self.active if self._eligible(cid)])
        gain = self._reach(entry, gain)
        if (gain is None or gain <= 0.0 or leader is None or leader == candidate_id
                or len(entry.blocks) < self.rule_of(candidate_id).min_blocks
                or (self._latency_broken(entry) and not self._steps_may_shorten(entry))):
            return False
        return self._could_undercut(candidate_id, gain=gain,
                                    confidence=self.confidence if level is None else 1.0 - level)

    def lifted_for(self, candidate_id: str) -> LiftReason | None:
        """Why ``candidate_id`` was last held for a lift; None when it never was."""
        return self._entries[candidate_id].lifted_for

    def restart(self, candidate_id: str) -> None:
        """Its blocks so far (measured at another profile) leave the race, kept apart (``earlier_blocks``); its
        evidence starts again from nothing, and it is no longer held. A re-verified host's history (its earlier
        campaigns' runs, at the first profile) goes too, and it is held to the race's full rule."""
        entry = self._entries[candidate_id]
        entry.earlier.extend(entry.blocks)
        entry.blocks = []
        entry.candidate = replace(entry.candidate, history=(), rule=None)
        entry.held = False
        entry.lift, entry.lift_on_cost, entry.lift_widening, entry.waits = None, False, None, []
        for cache in (self._costs, self._thetas_cache):
            for key in [key for key in cache if key[0] == candidate_id]:
                del cache[key]

    def earlier_blocks(self, candidate_id: str) -> tuple[Block, ...]:
        """The blocks a restart took out of the race (kept for the record)."""
        return tuple(self._entries[candidate_id].earlier)

    def exclude(self, candidate_id: str, *, reason: EliminationReason, detail: str) -> Elimination:
        """Take a candidate out for a reason found outside the race (failed gate or readiness, throttling).

        The first elimination of a candidate stands; excluding it again returns that one.
        """
        entry = self._entries[candidate_id]
        if entry.elimination is None:
            entry.elimination = Elimination(candidate_id, reason, detail)
        return entry.elimination

    # --- reading -----------------------------------------------------------------------------------------------
    @property
    def active(self) -> tuple[str, ...]:
        return tuple(cid for cid, e in self._entries.items() if e.elimination is None)

    def rule_of(self, candidate_id: str) -> MeasureRule:
        """The evidence rule this candidate is held to: its own (a re-verified host's) or the race's."""
        return self.own_rule(candidate_id) or self.measure

    def own_rule(self, candidate_id: str) -> MeasureRule | None:
        """The candidate's own evidence rule (a re-verified host's), None when it has none or the race does not
        hold it."""
        entry = self._entries.get(candidate_id)
        return entry.candidate.rule if entry is not None else None

    def block_count(self, candidate_id: str) -> int:
        """How many blocks ``candidate_id`` has in the race (at its race profile)."""
        return len(self._entries[candidate_id].blocks)

    def block_cap(self, candidate_id: str) -> int:
        """The most blocks ``candidate_id`` measures: the rule's ``max_blocks``, or ``SLO_EDGE_CAP`` times that
        while it is at the SLO's edge (as of the last ``decide``; see ``at_slo_edge``)."""
        cap = self.measure.max_blocks
        return SLO_EDGE_CAP * cap if candidate_id in self._edge else cap

    def at_slo_edge(self, cid: str) -> bool:
        """Whether the decision hinges on ``cid``'s SLO: its verdict is still undecided though its measurements,
        at face value, meet the SLO, and its cost's upper bound is below that of every certified candidate still in
        the race (below every other's when none is certified). Certified, it would be chosen; left undecided at
        ``max_blocks``, a dearer certified rival would be (seen in the decision benchmark: an RTX 5060 Ti at
        42.8 [39.9, 45.7] units/s against a floor of 40 left a certified machine 3.2 times dearer). What keeps such
        an interval across the floor is mostly the between-run error, so it is measured on in further runs
        (``decide`` asks for them) up to ``block_cap`` (docs/method.md, Stopping)."""
        entry = self._entries.get(cid)
        if entry is None or entry.elimination is not None or entry.held or not entry.blocks:
            return False
        standing = self._standing(cid)
        if (standing.slo is not Verdict.UNDECIDED or standing.cost_per_unit is None
                or not self._slo_plausible(entry, standing.throughput)):
            return False
        return self._chosen_if_certified(standing)

    def _chosen_if_certified(self, standing: Standing) -> bool:
        """Whether ``standing``'s cost upper bound is below that of every certified candidate still in the race
        (below every other usable one's when none is certified): certified, it would be chosen."""
        if standing.cost_per_unit is None:
            return False
        others = [self._standing(other) for other in self.active if other != standing.candidate_id]
        usable = [o for o in others if o.is_measured and o.cost_per_unit is not None and o.slo is not Verdict.VIOLATED
                  and not self._entries[o.candidate_id].held]
        certified = [o for o in usable if o.slo is Verdict.MET]
        rivals = certified or usable
        return all(standing.cost_per_unit.high < o.cost_per_unit.high for o in rivals
                   if o.cost_per_unit is not None)

    def standings(self) -> tuple[Standing, ...]:
        return tuple(self._standing(cid) for cid in self._entries)

    def standing(self, cid: str) -> Standing:
        """One candidate's standing now (a bootstrap: tens of milliseconds)."""
        return self._standing(cid)

    def _standing(self, cid: str) -> Standing:
        entry = self._entries[cid]
        throughput = self._throughput(entry)
        cost = None
        if throughput is not None:
            cost = cost_interval(entry.candidate.cost, units=self.units, throughput=throughput)
        return Standing(cid, len(entry.blocks), throughput, cost, self._slo_verdict(entry, throughput),
                        bool(entry.blocks), entry.elimination)

    def _throughput(self, entry: _Entry) -> Interval | None:
        if entry.blocks:
            values = [b.throughput_units_per_s for b in (*entry.candidate.history, *entry.blocks)]
            low, high = percentile_bounds(self._thetas(entry), confidence=self.confidence)
            return Interval(point=median(values), low=low, high=high, confidence=self.confidence, n=len(values))
        prior = entry.candidate.prior_throughput_units_per_s
        if prior is None:
            return None
        return Interval(point=prior, low=prior, high=prior, confidence=self.confidence, n=0)

    def _thetas(self, entry: _Entry) -> tuple[float, ...]:
        """Bootstrap medians of block throughput with the between-run error (``runs.py``), seeded per candidate and
        block count: reproducible, cached."""
        key = (entry.candidate.candidate_id, len(entry.blocks))
        if key not in self._thetas_cache:
            rng = random.Random(f"{self.seed}:{key[0]}:{key[1]}")
            self._thetas_cache[key] = run_aware_distribution([*entry.candidate.history, *entry.blocks],
                                                             resamples=self.resamples, rng=rng,
                                                             cv_prior=self.measure.run_cv_prior)
        return self._thetas_cache[key]

    def _cost_distribution(self, entry: _Entry) -> tuple[float, ...]:
        key = (entry.candidate.candidate_id, len(entry.blocks))
        if key not in self._costs:
            at = cost_curve(entry.candidate.cost, units=self.units)
            self._costs[key] = tuple(at(theta) for theta in self._thetas(entry))
        return self._costs[key]

    def _slo_verdict(self, entry: _Entry, throughput: Interval | None) -> Verdict:
        verdicts = []
        if self.slo.throughput_min_units_per_s is not None:
            verdicts.append(Verdict.UNDECIDED if throughput is None
                            else floor_verdict(throughput, floor=self.slo.throughput_min_units_per_s))
        if self.slo.latency is not None:
            latencies = [ms for block in entry.blocks for ms in block.latencies_ms]
            verdicts.append(latency_verdict(latencies, percentile_q=self.slo.latency.percentile,
                                            max_ms=self.slo.latency.max_ms))
        if Verdict.VIOLATED in verdicts:
            return Verdict.VIOLATED
        return Verdict.MET if all(v is Verdict.MET for v in verdicts) else Verdict.UNDECIDED

    # --- deciding ----------------------------------------------------------------------------------------------
    def decide(self, *, spent_usd: float = 0.0) -> RaceStep:
        """Eliminate what the evidence allows, then say whether the race is over and why."""
        short, lifted = self._eliminate_slo()
        dear, lifted_on_cost = self._eliminate_cost()
        eliminated, lifted = short + dear, lifted + lifted_on_cost
        active = self.active
        leader = self._leader(active)
        # Asked as soon as a candidate has the finalists' blocks, not only once the stop is tested: by then a
        # run that started early may have gone on to max_blocks, leaving no room for another.
        self._edge = frozenset(cid for cid in active if self.at_slo_edge(cid))
        # An edge candidate past max_blocks is asked for further runs: its between-run error is what more blocks
        # of the runs it has cannot narrow.
        rerun = tuple(cid for cid in active if self._eligible(cid) and (
            not self._runs_agree(cid)
            or (cid in self._edge and len(self._entries[cid].blocks) >= self.measure.max_blocks)))
        ended, reason = self._stop(active, leader, spent_usd, rerun=rerun)
        measuring = ended is RaceEnd.MEASURING
        return RaceStep(eliminated=eliminated, ended=ended, reason=reason, leader=leader, active=active,
                        rerun=rerun if measuring else (), slo_edge=tuple(sorted(self._edge)) if measuring else (),
                        lifted=lifted)

    def _eligible(self, cid: str) -> bool:
        entry = self._entries[cid]
        return not entry.held and len(entry.blocks) >= self.rule_of(cid).min_blocks

    def _eliminate_slo(self) -> tuple[tuple[Elimination, ...], tuple[str, ...]]:
        """The candidates that cannot meet the SLO, eliminated; and those an open change could lift over its floor
        (``may_lift``), held instead (once each)."""
        out, lifted = [], []
        for cid in self.active:
            entry = self._entries[cid]
            if not self._eligible(cid):
                continue
            if self.could_lift(cid, gain=entry.lift):
                entry.lifted_for = LiftReason.LATENCY if self._latency_broken(entry) else LiftReason.FLOOR
                entry.lift, entry.lift_on_cost, entry.held = None, False, True
                lifted.append(cid)
            elif self._slo_verdict(entry, self._throughput(entry)) is Verdict.VIOLATED:
                out.append(self.exclude(cid, reason=EliminationReason.SLO,
                                        detail=f"SLO cannot be met after {len(entry.blocks)} blocks"))
        return tuple(out), tuple(lifted)

    def _leader(self, active: Sequence[str]) -> str | None:
        """The lowest cost point among the measured, counting first those whose measurements so far would meet
        the SLO: a cheap candidate on its way to failing the SLO (its verdict still undecided for want of blocks)
        must neither lead, be tuned as the leader, nor eliminate the others. All of them when none would."""
        scored = []
        for index, cid in enumerate(active):
            standing = self._standing(cid)
            if standing.cost_per_unit is not None and standing.is_measured:
                scored.append((not self._slo_plausible(self._entries[cid], standing.throughput),
                               standing.cost_per_unit.point, index, cid))
        return min(scored)[3] if scored else None

    def slo_miss_chance(self, cid: str) -> float:
        """How likely ``cid`` is, in truth, to miss the SLO: 0 when certified, 1 when it cannot meet it; in between,
        the chance its throughput lies under the floor (its interval read as a log-normal's), and all of it when its
        latencies so far, at face value, miss the ceiling (docs/method.md, Waves)."""
        entry = self._entries[cid]
        throughput = self._throughput(entry)
        verdict = self._slo_verdict(entry, throughput)
        if verdict is not Verdict.UNDECIDED:
            return 0.0 if verdict is Verdict.MET else 1.0
        if not self._slo_plausible(entry, throughput) and self.slo.latency is not None:
            latencies = [ms for block in entry.blocks for ms in block.latencies_ms]
            if not latency_plausible(latencies, percentile_q=self.slo.latency.percentile,
                                     max_ms=self.slo.latency.max_ms):
                return 1.0
        floor = self.slo.throughput_min_units_per_s
        if floor is None or throughput is None:
            return 0.0
        if throughput.point <= floor:
            return 1.0 if throughput.high <= floor else 0.5
        if throughput.low <= 0.0 or throughput.low >= throughput.point:
            return 0.0 if throughput.low >= floor else 0.5
        sigma = math.log(throughput.point / throughput.low) / 1.959964
        return 0.5 * math.erfc(math.log(throughput.point / floor) / sigma / math.sqrt(2.0))

    def _slo_plausible(self, entry: _Entry, throughput: Interval | None) -> bool:
        """Whether the point estimates meet the SLO: the median throughput at or above the floor, and no more
        latencies over the ceiling than its percentile allows."""
        floor = self.slo.throughput_min_units_per_s
        if floor is not None and (throughput is None or throughput.point < floor):
            return False
        if self.slo.latency is not None:
            latencies = [ms for block in entry.blocks for ms in block.latencies_ms]
            return latency_plausible(latencies, percentile_q=self.slo.latency.percentile,
                                     max_ms=self.slo.latency.max_ms)
        return True

    def _ratios(self, cid: str, best: str) -> list[float]:
        mine = self._cost_distribution(self._entries[cid])
        theirs = self._cost_distribution(self._entries[best])
        return [_safe_ratio(c, b) for c, b in zip(mine, theirs, strict=True)]

    def _eliminate_cost(self) -> tuple[tuple[Elimination, ...], tuple[str, ...]]:
        """The candidates clearly dearer than the leader, eliminated (Holm over one-sided bootstrap tests); and
        those an open change could bring under it (``may_lift`` with ``on_cost``), held instead (once each)."""
        eligible = [cid for cid in self.active if self._eligible(cid)]
        best = self._leader(eligible)
        if best is None or len(eligible) < 2:
            return (), ()
        alpha = 1.0 - self.confidence
        tests = []
        for cid in eligible:
            if cid != best:
                ratios = self._ratios(cid, best)
                p_value = (1 + sum(1 for r in ratios if r <= 1.0)) / (len(ratios) + 1)
                tests.append((p_value, cid))
        tests.sort()
        out, lifted = [], []
        best_certified = self._certified(best)
        for rank, (p_value, cid) in enumerate(tests):  # Holm: the j-th smallest p against alpha / (m - j)
            level = alpha / (len(tests) - rank)
            if p_value > level or not self._separated(cid, best, level=level):
                break
            if not best_certified and self._certified(cid):
                # Cheaper, but not yet shown to meet the SLO: a knife-edge leader that never certifies would
                # leave the decision nothing certified to choose. The certified one stays until the leader is.
                continue
            entry = self._entries[cid]
            # worth a run on cost: the change's own gain, or its own steps' wait for input, says it may pay
            on_cost = entry.lift_on_cost or self._waits_for_input(entry)
            if on_cost and self.could_lift_on_cost(cid, gain=entry.lift, level=level):
                entry.lift, entry.lift_on_cost, entry.held, entry.lifted_for = None, False, True, LiftReason.COST
                lifted.append(cid)
                continue
            out.append(self.exclude(cid, reason=EliminationReason.COST, detail=(
                f"cost above {best}'s (one-sided p={p_value:.4f} <= Holm level {level:.4f}, intervals apart)")))
        return tuple(out), tuple(lifted)

    def _certified(self, cid: str) -> bool:
        return self._slo_verdict(entry := self._entries[cid], self._throughput(entry)) is Verdict.MET

    def _separated(self, cid: str, best: str, *, level: float) -> bool:
        """C_i's lower bound above C_best's upper bound, both at confidence 1 - level."""
        low_i, _ = percentile_bounds(self._cost_distribution(self._entries[cid]), confidence=1.0 - level)
        _, high_best = percentile_bounds(self._cost_distribution(self._entries[best]), confidence=1.0 - level)
        return low_i > high_best

    def _stop(self, active: Sequence[str], leader: str | None, spent_usd: float, *, rerun: Sequence[str]
              ) -> tuple[RaceEnd, str]:
        """Which rule ends the race now (``RaceEnd.MEASURING`` when none), and why in words; ``rerun``: the
        candidates whose runs are too few or disagree."""
        if not active:
            return RaceEnd.ALL_ELIMINATED, "every candidate was eliminated"
        if self.budget_usd is not None and spent_usd >= self.budget_usd:
            return RaceEnd.BUDGET_SPENT, f"benchmark budget spent (${spent_usd:.2f} of ${self.budget_usd:.2f})"
        blocks = {cid: len(self._entries[cid].blocks) for cid in active}
        if all(n >= self.block_cap(cid) for cid, n in blocks.items()):
            return RaceEnd.MAX_BLOCKS, f"every remaining candidate reached {self.measure.max_blocks} blocks" + (
                f" ({', '.join(sorted(self._edge & blocks.keys()))} more: its SLO at the edge)"
                if self._edge & blocks.keys() else "")
        if leader is None or blocks[leader] < self.rule_of(leader).winner_min_blocks:
            return RaceEnd.MEASURING, "measuring"
        if any(self._entries[cid].held for cid in active):
            return RaceEnd.MEASURING, "measuring"   # one's evidence is not at its race profile yet
        if blocks[leader] < self.block_cap(leader) and not self._certified(leader):
            # The decision chooses among SLO-certified profiles only: a race ended on a leader whose SLO is still
            # undecided (a re-verified host's few fresh blocks hold too few steps for the latency percentile)
            # hands the choice to a dearer certified rival. It measures on until certified or at max_blocks.
            return RaceEnd.MEASURING, "measuring"
        if len(active) == 1:
            return RaceEnd.ONE_REMAINS, "one candidate remains"
        if rerun or not all(n >= self.rule_of(cid).min_blocks for cid, n in blocks.items()):
            return RaceEnd.MEASURING, "measuring"
        return self._margin(active, leader)

    def _runs_agree(self, cid: str) -> bool:
        """At least ``min_runs`` independent runs, their medians no further apart than the prior between-run CV
        says: only then may the prior stand in for how far this host's next run can land. A re-verified host's
        earlier runs (its history) count among them."""
        entry = self._entries[cid]
        blocks = [*entry.candidate.history, *entry.blocks]
        if len(runs_of(blocks)) < self.measure.min_runs:
            return False
        observed = observed_run_cv(blocks)
        return observed is None or observed <= self.measure.run_cv_prior

    def _margin(self, active: Sequence[str], leader: str) -> tuple[RaceEnd, str]:
        """The indifference stop (docs/method.md, Stopping), on intervals that carry the between-run error, once
        every remaining candidate's runs are enough and agree (``_stop`` saw to that).

        Each rival's ratio C_i / C_leader must have its lower percentile at (1 - confidence) / m, m rivals
        (Bonferroni), at or above 1 / (1 + epsilon): then the chance that any of them is in truth more than
        epsilon cheaper than the leader is at most 1 - confidence."""
        rivals = [cid for cid in active if cid != leader]
        level = (1.0 - self.confidence) / len(rivals)
        floor = 1.0 / (1.0 + self.indifference)
        if any(percentile(self._ratios(cid, leader), 100.0 * level) < floor for cid in rivals):
            return RaceEnd.MEASURING, "measuring"
        return RaceEnd.WITHIN_MARGIN, (
            f"the leader is within {100 * self.indifference:g} % of every remaining candidate (run-aware intervals, "
            f"every candidate's runs agreeing: at most {100 * (1.0 - self.confidence):g} % chance that one is more "
            f"than {100 * self.indifference:g} % cheaper)")

    def finalists(self) -> tuple[Finalist, ...]:
        """What is known of every candidate still in the race, and of those eliminated on cost (marked
        ``is_eliminated``): they cannot be chosen but can be the runner-up, for the margin and break-even N."""
        out = []
        for cid, entry in self._entries.items():
            if entry.elimination is not None and entry.elimination.reason is not EliminationReason.COST:
                continue
            standing = self._standing(cid)
            if standing.throughput is not None and standing.cost_per_unit is not None:
                out.append(Finalist(cid, entry.candidate.cost, standing.throughput, standing.cost_per_unit,
                                    standing.slo, standing.is_measured, entry.elimination is not None))
        return tuple(out)


def _safe_ratio(top: float, bottom: float) -> float:
    if math.isinf(top) and math.isinf(bottom):
        return 1.0
    if bottom == 0.0:
        return math.inf
    return top / bottom


@dataclass(frozen=True, slots=True)
class Finalist:
    candidate_id: str
    cost: CostInputs
    throughput: Interval
    cost_per_unit: Interval
    slo: Verdict
    is_measured: bool = True
    is_eliminated: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """The choice, its runner-up and why.

    ``margin`` is the runner-up's upper bound over the chosen's, minus one (0.12: 12 % dearer at worst).
    ``break_even_units`` is the N at which the two swap places (None when the chosen wins at every N).
    ``provisional`` when any finalist's throughput is a provider dlperf prior rather than a measurement.
    """

    chosen: str | None
    runner_up: str | None
    units: int
    chosen_cost: Interval | None
    runner_up_cost: Interval | None
    margin: float | None
    break_even_units: float | None
    slo_met: bool
    provisional: bool
    reason: str
    # The runner-up could have been chosen in the chosen's place (same SLO standing, still in the race): only then
    # is the margin sure to be >= 0; an uncertified or earlier-eliminated runner-up may be cheaper at worst.
    runner_up_comparable: bool = False


def decide_profile(finalists: Sequence[Finalist], *, units: int) -> Decision:
    """Lowest upper bound of C(N) among SLO-certified finalists; if none is certified, among the undecided ones
    (``slo_met`` False). SLO-violating and failed (infinite-cost) finalists are never chosen, nor eliminated ones;
    the runner-up is the next best of the rest, certified ones first."""
    provisional = any(not f.is_measured for f in finalists)
    usable = [f for f in finalists if f.slo is not Verdict.VIOLATED and math.isfinite(f.cost_per_unit.point)]
    choosable = [f for f in usable if not f.is_eliminated]
    certified = [f for f in choosable if f.slo is Verdict.MET]
    pool = certified or choosable
    if not pool:
        return Decision(None, None, units, None, None, None, None, False, provisional,
                        "no finalist has a finite cost and an SLO that can be met")

    def rank(f: Finalist) -> tuple[bool, float, float, str]:
        return (f.slo is not Verdict.MET, f.cost_per_unit.high, f.cost_per_unit.point, f.candidate_id)

    chosen = min(pool, key=rank)
    rest = sorted((f for f in usable if f is not chosen), key=rank)
    runner = rest[0] if rest else None
    margin = break_even = None
    if runner is not None:
        margin = _safe_ratio(runner.cost_per_unit.high, chosen.cost_per_unit.high) - 1.0
        break_even = break_even_units(first=chosen.cost, first_throughput_units_per_s=chosen.throughput.point,
                                      second=runner.cost, second_throughput_units_per_s=runner.throughput.point)
    slo_met = bool(certified)
    reason = ("lowest upper bound of cost per accepted unit among SLO-certified profiles" if slo_met
              else "no profile certified the SLO yet: lowest upper bound among the undecided")
    comparable = runner is not None and not runner.is_eliminated and (runner.slo is Verdict.MET) == slo_met
    return Decision(chosen.candidate_id, runner.candidate_id if runner else None, units, chosen.cost_per_unit,
                    runner.cost_per_unit if runner else None, margin, break_even, slo_met, provisional, reason,
                    comparable)
