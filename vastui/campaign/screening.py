"""Screening the knobs once, on the first machine with its minimum evidence, so the race compares every candidate
at the profile production will run (docs/method.md, Screening).

A knob's effect is mostly the workload's (bf16 on a compute-bound model, more loaders on an input-bound one): the
first rented candidate to reach its minimum evidence runs the same paired A/B trials as the leader's tuning on its
own instance, and the changes it keeps are the screened profile. Every candidate is then raced at it, except for the
batch size, which GPU memory bounds: a GPU class gets the largest screened batch it is known to hold, from the
offers' memory and the batches seen to fit or to fail on the screener (never from anything the marketplace hides).

What a screening kept is stored (``InheritedScreening``, the store's ``screenings``): a later campaign of the same
workload, within the manifest's ``reverify_max_age_days``, races at it from its first block instead of screening
again, and its re-verified hosts keep their earlier runs at that profile (docs/method.md, Repeat campaigns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vastui.bench.attribution import Bottleneck
from vastui.bench.manifest import Manifest
from vastui.bench.stats import Interval
from vastui.bench.tuning import AbVerdict, Knob, Profile, TuningStep, plan_tuning
from vastui.campaign.candidate import CandidateRun, first_profile
from vastui.campaign.inherited import BatchSeen, InheritedScreening, StoredTrial, largest_batch_held
from vastui.campaign.plan import Candidate, tuning_trials
from vastui.campaign.tuning import TrialPool, TuningOutcome, TuningTrial


@dataclass(frozen=True, slots=True)
class ScreenedKnob:
    """One screening trial: a knob's change, whether it was kept, and its paired gain with its interval."""

    knob: str
    baseline: str
    value: str
    kept: bool
    gain: Interval | None
    reason: str
    where: str = ""   # on which machines its pairs ran, when more than the screener's (TuningTrial.where)
    on_cost: bool = False   # judged by the cost of N units alone (a trim): its reason says the cost, not a gain

    def describe(self) -> str:
        """A kept change with its gain; one not kept with why, in the trial's own words (a clear gain is not kept
        when it is below the minimum or its steps break the latency SLO, and those words say so); and on which
        machines its pairs ran, when others than the screener's played some."""
        if not self.kept:
            return f"{self.knob} {self.baseline} -> {self.value}: not kept ({self.reason}{self.where})"
        if self.on_cost:   # a trim, kept for its cost at N: its words say so
            return f"{self.knob} {self.baseline} -> {self.value}: kept ({self.reason}{self.where})"
        gain = ("no gain measured" if self.gain is None
                else f"gain {self.gain.point:+.1%} [{self.gain.low:+.1%}, {self.gain.high:+.1%}]")
        return f"{self.knob} {self.baseline} -> {self.value}: kept ({gain}{self.where})"


@dataclass(frozen=True, slots=True)
class ScreeningOutcome:
    """What the screening found: on whose instance, from which profile, the trials, and the profile kept."""

    screener: str
    gpu_ram_mb: float | None
    start: Profile
    tuning: TuningOutcome

    @property
    def profile(self) -> Profile:
        return self.tuning.profile

    @property
    def knobs(self) -> tuple[ScreenedKnob, ...]:
        return tuple(ScreenedKnob(t.knob, t.baseline, t.value, t.verdict.accepted, t.verdict.gain, t.verdict.reason,
                                  t.where(), on_cost=t.verdict.on_cost) for t in self.tuning.trials)

    @property
    def pairs_on(self) -> dict[str, int]:
        """The trials' pairs by the machine that played them (the screener's alone when no other helped)."""
        played: dict[str, int] = {}
        for trial in self.tuning.trials:
            for cid, pairs in trial.pairs_on or ((self.screener, trial.verdict.pairs),):
                played[cid] = played.get(cid, 0) + pairs
        return played

    def batches_seen(self) -> list[BatchSeen]:
        """The batch sizes run, each with whether it fitted: on the screener, the start and the kept profile did,
        and every trial's change did unless its output failed; on a machine that played a trial's pairs, a larger
        batch fitted when its runs ended, and did not when they stopped short (out of memory)."""
        seen = []
        if self.gpu_ram_mb is not None:
            ram = self.gpu_ram_mb
            seen += [BatchSeen(p.batch_size, p.precision, ram, True) for p in (self.start, self.profile)
                     if p.batch_size is not None]
        for trial in self.tuning.trials:
            change = trial.change
            if change is None or change.batch_size is None:
                continue
            if self.gpu_ram_mb is not None:
                seen.append(BatchSeen(change.batch_size, change.precision, self.gpu_ram_mb,
                                      not trial.verdict.output_failed))
            seen += [BatchSeen(change.batch_size, change.precision, ram, fitted) for ram, fitted in trial.memory_seen]
        return seen

    def settles(self, knob: Knob, value: int | str, *, raced: Profile, gpu_ram_mb: float | None,
                min_gain: float) -> bool:
        """Whether the screening settled, for a candidate raced at ``raced`` (its class's screened profile) on GPUs
        with ``gpu_ram_mb`` each, that ``value`` of ``knob`` is not worth trying there: the screening moved off it
        on evidence, or its last trial (alone or joined) was kept, broke the latency SLO, made N units clearly
        dearer, or showed a gain whose interval cannot reach ``min_gain``. Not settled: a value never tried (the
        screening stopped first), one not kept whose gain's interval reaches past ``min_gain`` (straddling zero, or
        clear but with a median at or under the minimum: pooled machines that disagree), one judged on
        another GPU count, a batch the screener held that this GPU is not known to hold, and one that did not fit
        the screener's memory when this GPU has more (or does not say)."""
        if knob is Knob.GPU_COUNT and self.start.gpu_count != raced.gpu_count:
            return False
        # A joint trial not kept says nothing of each of its knobs alone: the one that made it dearer (a larger
        # batch's warm-up at a small N) may have hidden the one that pays on this class (more loaders). Such a
        # value is judged by its own trial; with none, it is not settled.
        verdicts = [t.verdict for t in self.tuning.trials
                    if t.change is not None and str(knob) in t.knobs and t.change.value(knob) == value
                    and (len(t.knobs) == 1 or t.verdict.accepted)]
        more_memory = _has_more(gpu_ram_mb, self.gpu_ram_mb)
        screened_batch = self.profile.batch_size
        if knob is Knob.BATCH_SIZE and isinstance(value, int) and screened_batch is not None:
            if raced.batch_size is not None and raced.batch_size < value <= screened_batch:
                return False   # this GPU's memory is the question, which the screener's cannot answer
            if screened_batch != self.start.batch_size and value < screened_batch:
                # A larger batch clearly helped: the search does not go back down — unless a trim (the batch
                # back down, judged by its cost at N) left open whether a production run is cheaper there.
                trims = [v for v in verdicts if v.on_cost]
                return not trims or _settled(trims[-1], min_gain=min_gain, more_memory=more_memory)
        if value == self.start.value(knob) and self.profile.value(knob) != value:
            return True        # a kept change moved off it
        if not verdicts:
            return False
        return _settled(verdicts[-1], min_gain=min_gain, more_memory=more_memory)

    def own_gain(self, knob: Knob, value: int | str, cid: str) -> float | None:
        """The median gain of ``cid``'s own pairs in the last trial of ``value`` of ``knob`` alone (None: it played
        none there)."""
        trials = [t for t in self.tuning.trials
                  if t.change is not None and t.knobs == (str(knob),) and t.change.value(knob) == value]
        return trials[-1].gains_on.get(cid) if trials else None

    def open_gain(self, knob: Knob, value: int | str) -> Interval | None:
        """The throughput gain measured for ``value`` of ``knob`` by its last trial of that knob alone, or None when
        no such trial measured one."""
        gains = [t.verdict.gain for t in self.tuning.trials
                 if t.change is not None and t.knobs == (str(knob),) and t.change.value(knob) == value
                 and t.verdict.gain is not None]
        return gains[-1] if gains else None


@dataclass(frozen=True, slots=True)
class Lift:
    """A change the screening left open for a candidate's GPU class (its gain straddles zero) that could carry the
    candidate over the SLO's throughput floor it misses at its class's screened profile: it is raced at
    ``profile`` instead of being dropped (docs/method.md, Screening)."""

    knob: Knob
    value: int | str
    profile: Profile
    gain: Interval | None   # None: more loaders the screening never tried (``Screening._untried_loaders``)
    # worth a run to save the candidate from a cost elimination too (``Race.could_lift_on_cost``): its own pairs
    # in the trial gained more than ``min_gain`` at the median, or (it played none) the pooled pairs did
    on_cost: bool = False
    own: float | None = None   # the median gain of the candidate's own pairs in that trial (None: it played none)
    widening: float | None = None   # more loaders: n where it was raced with m, n / m (None: another knob)
    why: str = ""   # once applied (``Screening.lift``): the candidate's shortfall, in words, for the receipt

    @property
    def reach(self) -> float:
        """The most the change could raise the candidate's throughput (a fraction): the pooled gain's upper bound,
        or its own pairs' median gain where that is higher (a machine whose input path the change widens); 0 for
        loaders never tried, whose reach is the candidate's own wait for input (``Race.may_lift``)."""
        pooled = 0.0 if self.gain is None else self.gain.high
        return pooled if self.own is None else max(pooled, self.own)

    def describe(self) -> str:
        if self.gain is None:
            return (f"{self.knob} -> {self.value}, not tried by the screening (as far as this machine's own wait "
                    f"for input says it may gain)")
        mine = "" if self.own is None else f"; its own pairs {self.own:+.1%}"
        return (f"{self.knob} -> {self.value}, left open by the screening (gain {self.gain.point:+.1%} "
                f"[{self.gain.low:+.1%}, {self.gain.high:+.1%}]{mine})")


# The knobs a lift may change: precision and the input path raise throughput on the GPUs it has; a larger batch is a
# question of this GPU's memory (lifted only between the batch a GPU is known to hold and the screened one:
# ``Screening._batch_lift``), and more GPUs another price.
LIFTING_KNOBS = (Knob.PRECISION, Knob.LOADERS)


def _widening(raced: Profile, knob: Knob, value: int | str) -> float | None:
    """How many times as many loaders ``value`` is as the raced profile's (``Lift.widening``); infinite where a
    count is not a number; None for a knob that does not widen the input path."""
    if knob is not Knob.LOADERS:
        return None
    if isinstance(value, int) and isinstance(raced.loaders, int) and raced.loaders > 0:
        return value / raced.loaders
    return math.inf


def _has_more(gpu_ram_mb: float | None, than_mb: float | None) -> bool:
    """Whether a GPU with ``gpu_ram_mb`` may hold more than one with ``than_mb`` (unknown: it may)."""
    return gpu_ram_mb is None or than_mb is None or gpu_ram_mb > than_mb


def _settled(verdict: AbVerdict, *, min_gain: float, more_memory: bool) -> bool:
    if verdict.output_failed:
        return not more_memory   # out of memory on the screener, perhaps not on a larger GPU
    if verdict.accepted or verdict.breaks_slo or (verdict.dearer_at_n and not verdict.on_cost):
        return True   # (clearly faster, and N units dearer with it: the cost vetoed it)
    gain = verdict.cost_gain if verdict.on_cost else verdict.gain   # the measure the change was judged by
    # Not kept, yet its interval reaches past the minimum: open, whether it straddles zero (a noisy host) or not.
    # A pooled trial's median can be small and clear while its interval reaches far (2 of 3 machines gain nothing
    # from more loaders, the third +50 %: median +1.7 % [+0.4 %, +50 %]); settled, it hid the loaders from a
    # leader that gained 160 % from them.
    return gain is not None and gain.high <= min_gain


def inherited_from(outcome: ScreeningOutcome, *, campaign_id: str, at: float) -> InheritedScreening:
    """What a later campaign of the workload inherits of this campaign's screening (the store keeps it)."""
    trials = tuple(StoredTrial(
        knob=t.knob, baseline=t.baseline, value=t.value, change=t.change, accepted=t.verdict.accepted,
        gain=None if t.verdict.gain is None else (t.verdict.gain.point, t.verdict.gain.low, t.verdict.gain.high),
        pairs=t.verdict.pairs, reason=t.verdict.reason, output_failed=t.verdict.output_failed,
        breaks_slo=t.verdict.breaks_slo, on_cost=t.verdict.on_cost, memory_seen=t.memory_seen)
        for t in outcome.tuning.trials)
    return InheritedScreening(campaign_id=campaign_id, screened_at=at, start=replace(outcome.start, gpu_count=None),
                              profile=replace(outcome.profile, gpu_count=None), batches=tuple(outcome.batches_seen()),
                              knobs=tuple(k.describe() for k in outcome.knobs), trials=trials,
                              screener=outcome.screener, screener_gpu_ram_mb=outcome.gpu_ram_mb,
                              screener_gpus=outcome.start.gpu_count)


def outcome_of(inherited: InheritedScreening) -> ScreeningOutcome:
    """An earlier campaign's screening as this campaign's own would be: its trials' verdicts settle for each GPU
    class what they settled there (``ScreeningOutcome.settles``), so the leader confirms only the rest. The
    screener is named with its campaign (it is none of this campaign's candidates)."""
    confidence = 0.95
    trials = tuple(TuningTrial(
        t.knob, t.baseline, t.value,
        AbVerdict(t.accepted, None if t.gain is None else Interval(*t.gain, confidence=confidence, n=t.pairs),
                  t.pairs, t.reason, output_failed=t.output_failed, breaks_slo=t.breaks_slo, on_cost=t.on_cost),
        t.change, memory_seen=t.memory_seen) for t in inherited.trials)
    return ScreeningOutcome(screener=f"{inherited.screener or 'its screener'} of campaign {inherited.campaign_id}",
                            gpu_ram_mb=inherited.screener_gpu_ram_mb,
                            start=replace(inherited.start, gpu_count=inherited.screener_gpus),
                            tuning=TuningOutcome(trials, replace(inherited.profile, gpu_count=inherited.screener_gpus)))


class Screening:
    """The campaign's screening: who screens (one at a time; another may take over when the screener fails), and
    the profile each candidate is raced at once it is done."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.wanted = tuning_trials(manifest) > 0     # nothing to screen when every knob has one value
        self.screener: str | None = None
        self.designate: str | None = None              # measuring to screen next (``measures_first``)
        self.outcome: ScreeningOutcome | None = None
        self.given_up: str | None = None               # why no screening will come (its profile is the first)
        self.pool: TrialPool | None = None             # its trials, open to the others' pairs (the engine's)
        self.inherited: InheritedScreening | None = None   # an earlier campaign's, raced at instead of screening
        self.lifted: dict[str, Lift] = {}              # candidates raced at an open change the SLO needed (``lift``)

    @property
    def is_pending(self) -> bool:
        return self.wanted and self.outcome is None and self.given_up is None

    def inherit(self, inherited: InheritedScreening) -> None:
        """Race at what an earlier campaign's screening kept: no screening in this campaign, its outcome taken as
        this campaign's own (``outcome_of``): each candidate raced at its class's kept profile, and the leader
        confirming only what those trials left unsettled for its class, as after a screening of its own."""
        if self.wanted and self.outcome is None:
            self.inherited = inherited
            self.outcome = outcome_of(inherited)

    def may_claim(self, cid: str, *, blocks: int, tuned: bool) -> bool:
        """Whether ``cid`` should stop measuring and screen now: screening is pending, nobody else screens, and it
        has its minimum evidence (and was not tuned: its instance's trials are spent)."""
        return (self.is_pending and self.screener in (None, cid) and not tuned
                and blocks >= self.manifest.measure.min_blocks)

    def wants_help(self, run: CandidateRun) -> bool:
        """Whether the screening's current trial wants a pair ``run``'s instance may play (``TrialPool``)."""
        return self.is_pending and self.pool is not None and self.pool.has_pair_for(run)

    def measures_first(self, cid: str) -> bool:
        """Whether ``cid``, not measured yet, measures now at the profile it is at. While a screening is pending
        only one candidate does: the first to ask, nobody screening yet, measures its minimum evidence to screen
        next (the designate); the others play the screening's pairs or wait for its verdict, since blocks at a
        profile the screening is about to change leave the race when it does, and an instance at hand from the
        first trial on lets each trial end in fewer rounds (``TrialPool``)."""
        if not self.is_pending:
            return True
        if self.screener is None and self.designate in (None, cid):
            self.designate = cid
            return True
        return False

    def waits_for_screener(self) -> bool:
        """Whether a candidate with no blocks has a screening to wait for: someone screens or measures to."""
        return self.screener is not None or self.designate is not None

    def claim(self, cid: str) -> None:
        self.screener = cid

    def lost(self, cid: str) -> bool:
        """``cid`` stopped measuring or ended before the screening did: another candidate may screen in its
        place (the ones waiting for it measure instead). True when it was the screener or the designate."""
        was = self.outcome is None and cid in (self.screener, self.designate)
        if self.screener == cid and self.outcome is None:
            self.screener = None
        if self.designate == cid:
            self.designate = None
        return was

    def finish(self, outcome: ScreeningOutcome) -> None:
        self.outcome = outcome

    def give_up(self, why: str) -> None:
        if self.outcome is None:
            self.given_up = why

    def profile_for(self, candidate: Candidate) -> Profile:
        """The profile ``candidate`` is raced at: the first profile until the screening is done, then the screened
        one on its GPUs, with the largest screened batch its GPU class is known to hold; for a lifted candidate, the
        open change its SLO needed (``lift``)."""
        start = first_profile(candidate, self.manifest)
        if self.outcome is None:
            return start
        if (lifted := self.lifted.get(candidate.candidate_id)) is not None:
            return lifted.profile
        screened = self.outcome.profile
        batch = screened.batch_size
        if batch is not None and candidate.candidate_id != self.outcome.screener:
            batch = largest_batch_held(gpu_ram_mb=candidate.offer.gpu_ram, precision=screened.precision,
                                       wanted=batch, fallback=start.batch_size, seen=self.outcome.batches_seen())
        return replace(screened, batch_size=batch, gpu_count=start.gpu_count)

    def left_to_confirm(self, candidate: Candidate, *, raced: Profile,
                        bottleneck: Bottleneck) -> tuple[TuningStep, ...] | None:
        """What tuning ``candidate`` (raced at ``raced``) on its own instance should still try: the knob values
        the screening did not settle for its GPU class (``ScreeningOutcome.settles``), in the bottleneck's order;
        empty when it settled them all (the candidate's production profile is the one it was raced at). None
        when the screening does not speak for it (not done, or the candidate was raced at another profile than
        its class's screened one): it is tuned from its profile like any leader."""
        outcome = self.outcome
        if outcome is None or raced != self.profile_for(candidate):
            return None
        lifted = self.lifted.get(candidate.candidate_id)
        left = []
        for step in plan_tuning(self.manifest.tuning, bottleneck=bottleneck, baseline=raced,
                                max_gpus=candidate.offer.num_gpus):
            values = tuple(v for v in step.values
                           if not outcome.settles(step.knob, v, raced=raced, gpu_ram_mb=candidate.offer.gpu_ram,
                                                  min_gain=self.manifest.tuning.min_gain)
                           # lifted off it: its own blocks missed the SLO there
                           and not (lifted is not None and lifted.knob is step.knob
                                    and v == outcome.profile.value(step.knob)))
            if values:
                left.append(TuningStep(step.knob, values))
        return tuple(left)

    def lift_for(self, candidate: Candidate, *, raced: Profile) -> Lift | None:
        """The open change that could carry ``candidate`` (raced at its class's screened profile ``raced``) over
        the SLO's throughput floor should its blocks miss it there: among the values of the lifting knobs the
        screening did not settle for its class (``left_to_confirm``), the one whose measured gain reaches
        highest (above zero); worth a run against a cost elimination too when the candidate's own pairs there (or,
        with none, the pooled ones) gained more than ``min_gain`` at the median: pooled machines that disagree
        leave a small median whose interval reaches far (more loaders pay on one host's input path, not on
        another's). None when the screening is not done, the candidate was lifted already, or nothing open was
        measured to gain."""
        if self.outcome is None or candidate.candidate_id in self.lifted:
            return None
        best: Lift | None = None
        for step in self.left_to_confirm(candidate, raced=raced, bottleneck=Bottleneck.UNDETERMINED) or ():
            if step.knob is Knob.BATCH_SIZE:
                lift = self._batch_lift(candidate, raced=raced, values=step.values)
                if lift is not None and (best is None or lift.reach > best.reach):
                    best = lift
                continue
            if step.knob not in LIFTING_KNOBS:
                continue
            for value in step.values:
                gain = self.outcome.open_gain(step.knob, value)
                if gain is None and step.knob is Knob.LOADERS and best is None:
                    lift = self._untried_loaders(raced=raced, values=step.values)
                    if lift is not None:
                        best = lift
                    continue
                if gain is None or gain.high <= 0.0:
                    continue
                own = self.outcome.own_gain(step.knob, value, candidate.candidate_id)
                worth = (gain.point if own is None else own) > self.manifest.tuning.min_gain
                lift = Lift(step.knob, value, raced.with_value(step.knob, value), gain, on_cost=worth, own=own,
                            widening=_widening(raced, step.knob, value))
                if best is None or lift.reach > best.reach:
                    best = lift
        return best

    def _untried_loaders(self, *, raced: Profile, values: Sequence[int | str]) -> Lift | None:
        """More loaders than the raced profile's that the screening never tried (mostly because its screener's steps
        did not wait for input, so they could not gain there; or its time ran out first): the most of ``values``,
        with no measured gain. Its reach is the candidate's own: the share of time its blocks' steps wait for input
        bounds what a wider input path can gain, and so does the number of loaders (``Race.may_lift``), so it lifts
        only a machine whose steps do wait (an RTX 4080S over the latency ceiling at 4 loaders, its steps waiting
        40 % of their time, cheapest of its market at 8, in the decision benchmark). Not armed on cost by itself:
        the race's own rule says when that wait makes it worth a run on cost (``Race._waits_for_input``)."""
        outcome = self.outcome
        if outcome is None or not isinstance(raced.loaders, int):
            return None
        value = max((v for v in values if isinstance(v, int) and v > raced.loaders
                     and outcome.open_gain(Knob.LOADERS, v) is None), default=None)
        if value is None:
            return None
        return Lift(Knob.LOADERS, value, raced.with_value(Knob.LOADERS, value), None,
                    widening=_widening(raced, Knob.LOADERS, value))

    def _batch_lift(self, candidate: Candidate, *, raced: Profile,
                    values: Sequence[int | str]) -> Lift | None:
        """A larger batch for a GPU class that could not be shown to hold the screened one: the largest of
        ``values`` (those the screening left open for it) above the raced batch and below the screened batch that
        no GPU with as much memory or more failed to hold at the raced precision, carried by the gain the
        screening measured for a batch at least as large (a batch's gain grows with it, shrinking per step: what a
        smaller step gains is mostly in the larger's interval). Its output failing there (out of memory) ends the
        candidate, which missed the floor without it. None when nothing measured a larger batch to gain."""
        outcome = self.outcome
        screened = outcome.profile.batch_size if outcome is not None else None
        if outcome is None or raced.batch_size is None or screened is None or candidate.offer.gpu_ram is None:
            return None
        refused = [s.batch_size for s in outcome.batches_seen()
                   if not s.fitted and s.precision == raced.precision and s.gpu_ram_mb >= candidate.offer.gpu_ram]
        value = max((v for v in values if isinstance(v, int) and raced.batch_size < v < screened
                     and all(v < f for f in refused)), default=None)
        if value is None:
            return None
        # the nearest batch at least as large whose trial measured a gain that may be above zero
        gain = next((g for size in sorted(v for v in self.manifest.tuning.batch_sizes if v >= value)
                     if (g := outcome.open_gain(Knob.BATCH_SIZE, size)) is not None and g.high > 0.0), None)
        if gain is None:
            return None
        return Lift(Knob.BATCH_SIZE, value, raced.with_value(Knob.BATCH_SIZE, value), gain,
                    on_cost=gain.point > self.manifest.tuning.min_gain)

    def lift(self, cid: str, lift: Lift, *, why: str) -> None:
        """From now on ``cid`` is raced at ``lift``'s profile: it missed the SLO's floor at its class's (``why``,
        in words, for the receipt)."""
        self.lifted[cid] = replace(lift, why=why)
