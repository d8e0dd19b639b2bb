"""Tune the leader, one variable at a time, in paired interleaved A/B runs on the same instance.

The knob order comes from the leader's bottleneck (input path first when data-wait dominates); each A/B pair is two
short runs (ABBA order, so a drifting host hits both arms alike); a change is kept only when its paired gain's
interval excludes zero, exceeds the minimum gain and the output still passes the correctness check.
"""

from __future__ import annotations

import asyncio
import enum
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from vastui.bench.attribution import DATA_WAIT_SHARE_MAX, Bottleneck, input_gain_bound
from vastui.bench.cost import cost_per_accepted_unit
from vastui.bench.stats import Interval, Verdict, latency_plausible, latency_verdict
from vastui.bench.tuning import AbVerdict, Arm, Knob, Profile, TuningStep, judge_ab, plan_ab_pairs, plan_tuning
from vastui.campaign.candidate import CandidateContext, CandidateRun
from vastui.campaign.charges import measured_cost_inputs
from vastui.campaign.live import band
from vastui.campaign.ports import HostConnection
from vastui.campaign.short_runs import DeadlineReached, RunTimes, ShortRun, run_times, short_run
from vastui.errors import RemoteError
from vastui.events import Notice
from vastui.events_live import TuningFinished, TuningTrialJudged, TuningTrialStarted

# A compute knob that moves nothing says the step waits elsewhere (a GPU as busy as its input path is fast reads
# as compute-bound): the input path is tried next.
COMPUTE_KNOBS = frozenset({Knob.BATCH_SIZE, Knob.PRECISION})


@dataclass(frozen=True, slots=True)
class PairPlayed:
    """One kept pair of a trial: the machine that played it (candidate id), each arm's throughput, and each as
    units per dollar of a production run on that machine, its warm-up included (None: the run did not say it)."""

    cid: str
    a: float
    b: float
    a_per_usd: float | None
    b_per_usd: float | None


@dataclass(frozen=True, slots=True)
class TuningTrial:
    knob: str
    baseline: str
    value: str
    verdict: AbVerdict
    change: Profile | None = None   # the profile the variant ran (its batch size fitted, or its output failed)
    # a pooled trial (a screening's, ``TrialPool``): the pairs each machine played (candidate id, pairs), and
    # each helper's GPU memory (MB) with whether the change's larger batch fitted it
    pairs_on: tuple[tuple[str, int], ...] = ()
    memory_seen: tuple[tuple[float, bool], ...] = ()
    base: Profile | None = None           # the profile the baseline ran (the tuned instance's)
    played: tuple[PairPlayed, ...] = ()   # every kept pair, on whichever machine
    carried: int = 0                      # of them, pairs the tuned instance played in an earlier trial

    @property
    def knobs(self) -> tuple[str, ...]:
        """The knobs the trial changed: one, or several for a joint trial (``knob`` joins them with "+")."""
        return tuple(self.knob.split("+"))

    @property
    def gains_on(self) -> dict[str, float]:
        """The median throughput gain (a fraction) of each machine's own pairs, by candidate id."""
        by: dict[str, list[float]] = {}
        for pair in self.played:
            if pair.a > 0:
                by.setdefault(pair.cid, []).append(pair.b / pair.a - 1.0)
        return {cid: statistics.median(gains) for cid, gains in by.items()}

    def describe(self) -> str:
        state = "accepted" if self.verdict.accepted else "rejected"
        carried = f"; {self.carried} of its pairs played in the screening" if self.carried else ""
        return (f"{self.knob} {self.baseline} -> {self.value}: {state} ({self.verdict.reason}){self.where()}"
                f"{carried}")

    def where(self) -> str:
        """On which machines the pairs ran, when more than one played them (empty otherwise)."""
        if len(self.pairs_on) < 2:
            return ""
        return "; pairs on " + ", ".join(f"{cid} ({n})" for cid, n in self.pairs_on)


class TuningStop(enum.StrEnum):
    """Why tuning stopped before it had tried everything it planned."""

    NO_ROOM = "no room"            # the deadline left no room for a trial (cheaper ones may have run)
    DEADLINE = "deadline"          # the instance reached its deadline during a trial: abandoned, not judged
    REMOTE_ERROR = "remote error"  # a short run failed on the host


@dataclass(frozen=True, slots=True)
class TuningStopped:
    """Why tuning stopped early (``why``) with its particulars; ``describe`` says it for people."""

    why: TuningStop
    knob: str = ""          # the trial it stopped at
    value: str = ""
    left_s: float = 0.0     # NO_ROOM: the work time the deadline left
    needed_s: float = 0.0   # NO_ROOM: what the trial would have taken
    error: str = ""         # REMOTE_ERROR: what the host said

    def describe(self) -> str:
        match self.why:
            case TuningStop.NO_ROOM:
                return (f"the instance's deadline leaves {max(self.left_s, 0.0) / 60:.1f} min; "
                        f"an A/B trial of {self.knob} -> {self.value} takes about {self.needed_s / 60:.1f} min")
            case TuningStop.DEADLINE:
                return (f"the instance reached its deadline during the trial {self.knob} -> {self.value} "
                        f"(abandoned, not judged)")
        return self.error


@dataclass(frozen=True, slots=True)
class TuningOutcome:
    trials: tuple[TuningTrial, ...]
    profile: Profile
    stopped: TuningStopped | None = None
    # the candidate whose screening settled the knobs this tuning did not try (campaign/screening.py): the
    # trials here only confirm what it could not settle for this GPU class; None: tuned from scratch
    screened_by: str | None = None
    # changes left untried because their gain is bounded below the minimum (``input_gain_bound``), for people
    not_tried: tuple[str, ...] = ()

    @property
    def stopped_early(self) -> str | None:
        """Why tuning stopped early, for people; None when it tried all it planned."""
        return self.stopped.describe() if self.stopped is not None else None

    @property
    def kept_gains(self) -> tuple[Interval, ...]:
        """The gain of every change kept, each relative to the profile it changed (they compound)."""
        return tuple(t.verdict.gain for t in self.trials if t.verdict.accepted and t.verdict.gain is not None)

    @property
    def profile_latencies_ms(self) -> tuple[float, ...]:
        """Every step seen at ``profile`` once it was kept: the last kept change's variant runs and the baseline
        runs of every trial after it (the evidence for its latency SLO). Empty when nothing was kept."""
        kept = [i for i, t in enumerate(self.trials) if t.verdict.accepted]
        if not kept:
            return ()
        last = kept[-1]
        return (*self.trials[last].verdict.variant_latencies_ms,
                *(ms for t in self.trials[last + 1:] for ms in t.verdict.baseline_latencies_ms))


def value_order(knob: Knob, values: Sequence[int | str], current: int | str | None) -> list[int | str]:
    """The order a knob's values are tried in. A batch size goes to the largest allowed first, then down: the gain
    per step shrinks as the batch grows (64 -> 128 may gain 6 %, 128 -> 256 3 %, within the noise five pairs can
    see), so the far value is both the likely best and the easiest to tell apart; one that does not help (or does
    not fit in memory, which fails its output) gives way to the next smaller. Then the values below the current
    one, nearest first. Other knobs keep the manifest's order."""
    if knob is not Knob.BATCH_SIZE or not isinstance(current, int):
        return list(values)
    numbers = [v for v in values if isinstance(v, int)]
    return [*sorted((v for v in numbers if v > current), reverse=True),
            *sorted((v for v in numbers if v < current), reverse=True)]


def _above(value: int | str, current: int | str | None) -> bool:
    return isinstance(value, int) and isinstance(current, int) and value > current


def _on_gpus(profile: Profile, fallback: Profile) -> Profile:
    """``profile`` on ``fallback``'s GPU count when it names none."""
    return replace(profile, gpu_count=profile.gpu_count or fallback.gpu_count)


class _PairEnd(enum.StrEnum):
    """How one machine's pair of a trial ended."""

    KEPT = "kept"                # both arms ran and passed: the pair counts
    DROPPED = "dropped"          # cut short (no throughput, the machine stopped, the trial was judged meanwhile)
    BROKE = "broke"              # an output failed the correctness check: the change is rejected
    UNFIT = "unfit"              # a helper's GPU did not hold the change's larger batch: about its memory, not the gain
    LEFT = "left"                # a helper's run failed otherwise (its baseline, or a run that did not end): about
                                 # that machine, which leaves the screening


@dataclass(slots=True)
class _Player:
    """One machine's part in a trial: its instance, the trial's two profiles on its own GPU count, its run times
    and its runs' latencies. Each machine keeps its own ABBA order, so a drift on its host hits both arms alike."""

    ctx: CandidateContext
    run: CandidateRun
    conn: HostConnection
    base: Profile
    change: Profile
    times: RunTimes
    played: int = 0
    first: tuple[Arm, Arm] = (Arm.BASELINE, Arm.VARIANT)   # its first pair's order; then it alternates
    a_latencies: list[float] = field(default_factory=list)
    b_latencies: list[float] = field(default_factory=list)

    def next_order(self) -> tuple[Arm, Arm]:
        self.played += 1
        order = plan_ab_pairs(pairs=self.played)[-1]
        return order if self.first[0] is Arm.BASELINE else (order[1], order[0])

    def pair_estimate_s(self) -> float:
        return self.times.trial_estimate_s(1, self.base, self.change)


class _PairedTrial:
    """One A/B trial of ``change`` against ``base``: interleaved pairs on the tuned instance and, when the trial is
    pooled (a screening's, ``TrialPool``), on the instances of the candidates that would otherwise wait for its
    verdict. Each pair's gain is a ratio within one machine, so a machine's speed cancels and the pairs pool; the
    spread of the gain between machines is part of the interval, as it should be when the verdict speaks for every
    machine. What the pairs gave so far: throughputs, the variant's input waits, whether every output was
    correct."""

    def __init__(self, ctx: CandidateContext, run: CandidateRun, conn: HostConnection, base: Profile,
                 change: Profile, times: RunTimes, *, pool: TrialPool | None = None, on_cost: bool = False) -> None:
        self.ctx = ctx
        self.base, self.change = base, change
        self.on_cost = on_cost   # a trim (``TuningSearch._trim``): judged by its cost at N alone
        self.own = _Player(ctx, run, conn, base, change, times)
        self.pool = pool
        self.a_values: list[float] = []
        self.b_values: list[float] = []
        # the same pairs as units per dollar of a production run on their machine, warm-up included (None: a run
        # that could not say its warm-up; the trial is then judged on throughput alone)
        self.a_per_usd: list[float | None] = []
        self.b_per_usd: list[float | None] = []
        self.b_waits: dict[str, list[float]] = {}   # the variant's input waits, by machine (candidate id)
        self.correct = True
        self.helpers: dict[str, _Player] = {}
        self.pairs_on: dict[str, int] = {}           # pairs kept, by machine (candidate id)
        self.played: list[PairPlayed] = []           # the pairs kept, each with its machine
        self.carried = 0                             # of them, pairs carried over from an earlier trial (``carry``)
        self.unfit_on: list[float] = []   # the GPU memory of each helper whose memory did not hold the change
        self.target = 0
        self.ends: dict[object, float] = {}   # each pair in flight: when it is expected to land (campaign clock)
        self.is_open = False
        self.landed = asyncio.Event()

    async def judge(self, *, room_for: Callable[[int], bool]) -> AbVerdict:
        """``min_pairs`` interleaved pairs, judged; when that leaves a promising change undecided (its point gain
        above the minimum, its interval still reaching below zero: a noisy host) and ``room_for`` says the deadline
        allows as many again, those too, judged once more over all of them. Two looks, not one per pair: each extra
        look would raise the chance of keeping a change that gains nothing. A change whose steps break the latency
        SLO, or whose output failed, gets no second look: no number of pairs makes it a profile production runs
        (one whose own first pair already breaks it clearly is judged then: ``_over_ceiling_clearly``);
        nor does one whose pairs already find N units clearly dearer with it (the cost vetoes a clearer speed)."""
        tuning = self.ctx.manifest.tuning
        try:
            # (pairs carried over: at least one of its own now, so its steps at the change meet the SLO's ceiling
            # on this instance's evidence, as when it plays every pair)
            await self._fill(max(self._in_rounds(tuning.min_pairs), self.carried + 1 if self.carried else 0))
            verdict = self._judged()
            looked = verdict.cost_gain if self.on_cost else verdict.gain   # the measure the change claims
            if (not verdict.accepted and not verdict.breaks_slo and not verdict.output_failed
                    and looked is not None and looked.point > tuning.min_gain
                    and looked.low < 0 < looked.high):
                dearer = None if self.on_cost else self._clearly_dearer_at_n()
                if dearer is not None:
                    verdict = replace(verdict, cost_gain=dearer, reason=(
                        f"{verdict.reason}; no more pairs: at N = {self.ctx.manifest.production_units:,} units, "
                        f"its warm-up included, a production run is clearly dearer with it (cost gain "
                        f"{dearer.point:+.1%} [{dearer.low:+.1%}, {dearer.high:+.1%}]), which a clearer speed "
                        f"would not change"))
                elif room_for(tuning.min_pairs):
                    await self._fill(len(self.a_values) + self._in_rounds(tuning.min_pairs))
                    verdict = self._judged()
        finally:
            self._close()
        return verdict

    def _in_rounds(self, pairs: int) -> int:
        """``pairs``, or more when the trial is pooled: whole rounds of one pair a machine at hand, since a round
        takes as long whether every machine plays in it or some wait for the last pair."""
        machines = 1 + (self.pool.helpers if self.pool is not None else 0)
        return machines * math.ceil(pairs / machines)

    async def _fill(self, target: int) -> None:
        """Pairs until ``target`` are in (any machine's): this instance plays one whenever none is left to a helper,
        and otherwise waits for the helpers' pairs to land (or to be dropped, when it plays them itself)."""
        self.target = target
        self._open()
        tries = self.own.played + target   # a pair cut short is played again, a bounded number of times
        while self.correct and (len(self.a_values) < target or self.in_flight > 0):
            if self._over_ceiling_clearly():
                break   # rejected whatever the other pairs say: they are not waited for (docs/method.md, Tune)
            if len(self.a_values) + self.in_flight < target or self.spare_fits(self.own.pair_estimate_s()):
                if self.own.played >= tries:
                    break   # judged on what it has (too few pairs: not enough evidence)
                await self._pair(self.own, keep_going=lambda: True)
            else:
                self.landed.clear()
                await self.landed.wait()

    def _over_ceiling_clearly(self) -> bool:
        """Whether this instance's own steps at the change already break the latency SLO beyond doubt: the
        percentile is over the ceiling at the stats' confidence (``latency_verdict``) and so is the median step, so
        no more pairs could make the change a profile production may run. Only a rejection is taken early; an
        acceptance still waits for its pairs, so the early look adds no chance of keeping a change that gains
        nothing."""
        ceiling = self.ctx.manifest.slo.latency
        steps = self.own.b_latencies
        if ceiling is None or not steps or statistics.median(steps) <= ceiling.max_ms:
            return False
        return latency_verdict(steps, percentile_q=ceiling.percentile, max_ms=ceiling.max_ms) is Verdict.VIOLATED

    def _open(self) -> None:
        self.is_open = True
        if self.pool is not None:
            self.pool.opened(self)

    def _close(self) -> None:
        self.is_open = False
        if self.pool is not None:
            self.pool.closed(self)

    @property
    def in_flight(self) -> int:
        """Pairs being played now, on any machine."""
        return len(self.ends)

    @property
    def wants_pair(self) -> bool:
        """Open, not failed, and a pair not yet played or claimed."""
        return self.is_open and self.correct and len(self.a_values) + self.in_flight < self.target

    def spare_fits(self, pair_s: float) -> bool:
        """Every pair to the target is played or claimed, yet some are still in flight: a machine that would wait
        for them (billed all the same) plays one more, a spare, when it expects to land it (``pair_s`` from now)
        before the last of them is expected to. The verdict waits for every pair in flight and counts them all,
        so a trial is judged on more pairs, and more often decided, in the same time. How many pairs a look has
        depends on the machines' speed, never on what the pairs measured."""
        return (self.is_open and self.correct and bool(self.ends)
                and self.ctx.clock.now() + pair_s <= max(self.ends.values()))

    async def _pair(self, player: _Player, *, keep_going: Callable[[], bool]) -> _PairEnd:
        key = object()
        self.ends[key] = self.ctx.clock.now() + player.pair_estimate_s()
        try:
            return await self._play_pair(player, keep_going)
        finally:
            del self.ends[key]
            self.landed.set()

    async def _play_pair(self, player: _Player, keep_going: Callable[[], bool]) -> _PairEnd:
        """One pair on ``player``'s instance, in its ABBA order. A helper that may not go on (eliminated, out of
        time) between its arms drops its half pair; a pair that lands after the verdict is dropped too."""
        ctx = self.ctx
        got: dict[Arm, float | None] = {}
        lost: dict[Arm, float | None] = {}
        waits: list[float] = []
        for arm in player.next_order():
            if not keep_going() or not self.is_open:
                return _PairEnd.DROPPED   # (judged meanwhile: its other arm would be billed for nothing)
            variant = player.base if arm is Arm.BASELINE else player.change
            started = ctx.clock.now()
            done = await short_run(ctx, player.run, player.conn, variant)
            player.times.add(variant, ctx.clock.now() - started, done.work_s)
            (player.b_latencies if arm is Arm.VARIANT else player.a_latencies).extend(done.latencies_ms)
            if not done.passed:
                return self._failed(player, arm, done)
            got[arm] = done.units_per_s
            lost[arm] = done.warmup_lost_s
            if arm is Arm.VARIANT and done.data_wait_share is not None:
                waits.append(done.data_wait_share)
        if not self.is_open:
            return _PairEnd.DROPPED
        a, b = got.get(Arm.BASELINE), got.get(Arm.VARIANT)
        if a is None or b is None:
            if player is self.own and b is None:
                self.correct = False   # the variant's run came up short on the tuned instance: not trusted
                return _PairEnd.BROKE
            return _PairEnd.DROPPED
        self.a_values.append(a)
        self.b_values.append(b)
        self.a_per_usd.append(self._units_per_usd(player, a, lost.get(Arm.BASELINE)))
        self.b_per_usd.append(self._units_per_usd(player, b, lost.get(Arm.VARIANT)))
        self.b_waits.setdefault(player.run.cid, []).extend(waits)
        self.pairs_on[player.run.cid] = self.pairs_on.get(player.run.cid, 0) + 1
        self.played.append(PairPlayed(player.run.cid, a, b, self.a_per_usd[-1], self.b_per_usd[-1]))
        return _PairEnd.KEPT

    def carry(self, pairs: Sequence[PairPlayed]) -> None:
        """Pairs this instance played of the same change from the same baseline in an earlier trial (the
        screening's, pooled with other machines' pairs that left it undecided): A/B pairs on the same instance,
        as good as those it would play now, so the trial starts with them (``TuningSearch.carried``)."""
        for pair in pairs:
            self.a_values.append(pair.a)
            self.b_values.append(pair.b)
            self.a_per_usd.append(pair.a_per_usd)
            self.b_per_usd.append(pair.b_per_usd)
            self.pairs_on[pair.cid] = self.pairs_on.get(pair.cid, 0) + 1
            self.played.append(pair)
        self.carried += len(pairs)

    def _failed(self, player: _Player, arm: Arm, done: ShortRun) -> _PairEnd:
        """An output failed. On the tuned instance it rejects the change, as does a helper's variant that ran to
        its end with a wrong output. A helper's variant that did not run to its end at a larger batch than its
        baseline did not fit that GPU's memory: evidence about its class's batch, not the change's gain. A
        helper's failed baseline, or a variant that did not end at the same batch, says something about that
        machine only."""
        if player is self.own:
            self.correct = False
            return _PairEnd.BROKE
        if arm is Arm.VARIANT and done.ran_to_end:
            if self.is_open:
                self.correct = False
            return _PairEnd.BROKE
        if arm is Arm.VARIANT and self._grows_batch(player):
            ram = player.run.candidate.offer.gpu_ram
            if ram is not None:
                self.unfit_on.append(ram)
            return _PairEnd.UNFIT
        return _PairEnd.LEFT

    @staticmethod
    def _grows_batch(player: _Player) -> bool:
        base, change = player.base.batch_size, player.change.batch_size
        return base is not None and change is not None and change > base

    @property
    def memory_seen(self) -> tuple[tuple[float, bool], ...]:
        """What the helpers' runs say of their GPUs' memory at the change's larger batch: (GPU memory in MB, held).
        A helper held it when it kept a pair of the trial; only when its variant's steps also met the latency SLO,
        though, since this evidence lifts its GPU class to that batch, and a batch whose steps are too slow there is
        not one its class should be raced at. Nothing when the change keeps the batch."""
        if not self.change.batch_size or not self.base.batch_size or self.change.batch_size <= self.base.batch_size:
            return ()
        ceiling = self.ctx.manifest.slo.latency
        held = sorted({ram for cid, p in self.helpers.items()
                       if (ram := p.run.candidate.offer.gpu_ram) is not None and self.pairs_on.get(cid, 0) > 0
                       and (ceiling is None or latency_plausible(p.b_latencies, percentile_q=ceiling.percentile,
                                                                 max_ms=ceiling.max_ms))})
        return (*((ram, True) for ram in held), *((ram, False) for ram in sorted(set(self.unfit_on))))

    def _units_per_usd(self, player: _Player, units_per_s: float, warmup_lost_s: float | None) -> float | None:
        """1 / C(N) of a production run on ``player``'s machine at this throughput and this run's warm-up."""
        if warmup_lost_s is None or units_per_s <= 0:
            return None
        inputs = replace(measured_cost_inputs(player.run, self.ctx.manifest), warmup_s=warmup_lost_s)
        cost = cost_per_accepted_unit(inputs, units=self.ctx.manifest.production_units,
                                      throughput_units_per_s=units_per_s)
        return 1.0 / cost if 0.0 < cost < math.inf else None

    def _judged(self) -> AbVerdict:
        verdict = self._judged_on_speed()
        if self.on_cost:
            return self._judged_on_cost(verdict)
        by_cost = self._by_cost() if verdict.accepted else None
        if by_cost is None:
            return verdict
        if by_cost.gain is None or by_cost.gain.point > 0.0:
            return replace(verdict, cost_gain=by_cost.gain)
        # Clearly faster in steady state, yet its warm-up (a bigger batch's longer steps, say) makes a production
        # run of N units estimated dearer: not a profile to run production at (docs/method.md, Tune). The speed
        # verdict has already asked for a clear gain; the cost only vetoes it, on its point estimate, so a change
        # whose warm-up costs a little of its gain is still kept.
        units = self.ctx.manifest.production_units
        return replace(verdict, accepted=False, cost_gain=by_cost.gain, dearer_at_n=True, reason=(
            f"not kept: at N = {units:,} units, its warm-up included, a production run is dearer with it: cost gain "
            f"{by_cost.gain.point:+.1%} [{by_cost.gain.low:+.1%}, {by_cost.gain.high:+.1%}]; as to speed, "
            f"{verdict.reason}"))

    def _clearly_dearer_at_n(self) -> Interval | None:
        """The pairs' cost gain at N when its whole interval is below zero (a production run of N units is clearly
        dearer with the change, its warm-up included); None otherwise, or when the runs could not say their
        warm-up."""
        by_cost = self._by_cost()
        gain = by_cost.gain if by_cost is not None else None
        return gain if gain is not None and gain.high < 0.0 else None

    def _by_cost(self) -> AbVerdict | None:
        """The pairs judged as units per dollar of a production run of N units (``judge_ab``), each run's warm-up
        included; None when a run could not say its warm-up."""
        a, b = self.a_per_usd, self.b_per_usd
        if not a or any(v is None for v in (*a, *b)):
            return None
        tuning = self.ctx.manifest.tuning
        return judge_ab(baseline_units_per_s=[v for v in a if v is not None],
                        variant_units_per_s=[v for v in b if v is not None], correctness_ok=True,
                        min_gain=tuning.min_gain, min_pairs=tuning.min_pairs, seed=self.own.run.cid)

    def _judged_on_cost(self, speed: AbVerdict) -> AbVerdict:
        """A trim's verdict: kept when a production run of N units is clearly cheaper with it (``judge_ab`` on the
        pairs' units per dollar, each run's warm-up included: an interval above zero, a gain above the minimum),
        its output correct and its steps within the SLO, whatever its speed: a trim gives up a little steady-state
        speed for a shorter warm-up. Like any change it must show its gain on the measure it claims; a tie keeps
        the profile as it is. Its ``gain`` stays the speed's (the tuned throughput compounds it)."""
        speed = replace(speed, on_cost=True)
        if speed.output_failed or speed.breaks_slo:
            return replace(speed, accepted=False)
        by_cost = self._by_cost()
        if by_cost is None:
            return replace(speed, accepted=False, reason=(
                f"not kept: its runs did not say their warm-up, so its cost at N is not known; as to speed, "
                f"{speed.reason}"))
        if by_cost.gain is None:
            return replace(speed, accepted=False, reason=by_cost.reason)
        units = self.ctx.manifest.production_units
        cheaper = by_cost.accepted
        return replace(speed, accepted=cheaper, cost_gain=by_cost.gain, dearer_at_n=by_cost.gain.point <= 0.0,
                       reason=(f"{'kept' if cheaper else 'not kept'}: at N = {units:,} units, its warm-up included, "
                               f"a production run is {'clearly cheaper' if cheaper else 'not clearly cheaper'} with "
                               f"it: cost gain {by_cost.gain.point:+.1%} [{by_cost.gain.low:+.1%}, "
                               f"{by_cost.gain.high:+.1%}]; as to speed, {speed.reason}"))

    def _judged_on_speed(self) -> AbVerdict:
        tuning = self.ctx.manifest.tuning
        own = self.own
        waits = [w for on_one in self.b_waits.values() for w in on_one]
        verdict = replace(judge_ab(baseline_units_per_s=self.a_values, variant_units_per_s=self.b_values,
                                   correctness_ok=self.correct, min_gain=tuning.min_gain,
                                   min_pairs=tuning.min_pairs, seed=own.run.cid),
                          variant_data_wait=statistics.median(waits) if waits else None,
                          variant_data_wait_high=max((statistics.median(w) for w in self.b_waits.values() if w),
                                                     default=None),
                          baseline_latencies_ms=tuple(own.a_latencies),
                          variant_latencies_ms=tuple(own.b_latencies))
        ceiling = self.ctx.manifest.slo.latency
        # The tuned instance's own steps against the SLO, as when it plays every pair: a helper's steps are its
        # own GPU's (a slower one's may break the SLO where the screener's class does not); they bound only what
        # its own class is raced at (``memory_seen``).
        if ceiling is not None and not latency_plausible(own.b_latencies, percentile_q=ceiling.percentile,
                                                         max_ms=ceiling.max_ms):
            # Perhaps more units a second, but its steps (a larger batch's, say) are too slow for the SLO: not a
            # profile production may run, alone or joined with another knob.
            over = sum(1 for ms in own.b_latencies if ms > ceiling.max_ms)
            return replace(verdict, accepted=False, breaks_slo=True, reason=(
                f"rejected: {over} of {len(own.b_latencies)} steps over the latency SLO's {ceiling.max_ms:g} ms "
                f"(p{ceiling.percentile:g}); as to speed, {verdict.reason}"))
        return verdict

    async def help(self, player: _Player, *, keep_going: Callable[[], bool]) -> _PairEnd:
        """One pair on a helper's instance (``TrialPool.help``). A machine new to the trial starts with the order
        the trial has played less (its own pairs then alternate), so the pool's pairs stay about as often AB as
        BA as well."""
        if player.run.cid not in self.helpers:
            self.helpers[player.run.cid] = player
            started = [p.played for p in (self.own, *self.helpers.values())]
            ab = sum((n + 1) // 2 if p.first[0] is Arm.BASELINE else n // 2
                     for p, n in zip((self.own, *self.helpers.values()), started, strict=True))
            if ab > sum(started) - ab:
                player.first = (Arm.VARIANT, Arm.BASELINE)
        return await self._pair(player, keep_going=keep_going)


class TrialPool:
    """A screening's current trial, open to the candidates that would otherwise wait for its verdict: each plays
    the trial's pairs (the same change, on its own instance, at its own GPU count), so a trial needs its pairs in
    all rather than on one machine, and ends about as many times sooner as machines help. ``on_change`` is told
    when a trial opens (the helpers wake)."""

    def __init__(self, *, on_change: Callable[[], None]) -> None:
        self.on_change = on_change
        self.trial: _PairedTrial | None = None
        self.out: set[str] = set()              # machines out of the screening: a run of theirs failed
        self.at_hand: set[str] = set()          # machines waiting for the screening's verdict, so free to help
        self._unfit: dict[str, _PairedTrial] = {}   # the trial whose change a helper's memory did not hold

    @property
    def helpers(self) -> int:
        """How many machines are at hand to play a trial's pairs besides the tuned one."""
        return len(self.at_hand - self.out)

    def opened(self, trial: _PairedTrial) -> None:
        self.trial = trial
        self.on_change()

    def closed(self, trial: _PairedTrial) -> None:
        if self.trial is trial:
            self.trial = None

    def describe(self) -> str:
        """The current trial for people: whose screening, and the change its pairs try."""
        trial = self.trial
        return "" if trial is None else f"the screening on {trial.own.run.cid}: {trial.change.describe()}"

    def has_pair_for(self, run: CandidateRun) -> bool:
        """Whether the current trial wants a pair that ``run``'s instance may play: a change that keeps the GPU
        count (a GPU-count trial is about the screener's GPUs), and neither this machine nor its memory ruled out."""
        trial = self.trial
        if not (trial is not None and run.cid != trial.own.run.cid and run.cid not in self.out
                and self._unfit.get(run.cid) is not trial and trial.change.gpu_count == trial.base.gpu_count):
            return False
        # a spare only for a machine that already played in this trial (its pairs' time is known there)
        player = trial.helpers.get(run.cid)
        return trial.wants_pair or (player is not None and trial.spare_fits(player.pair_estimate_s()))

    async def help(self, ctx: CandidateContext, run: CandidateRun, conn: HostConnection, *, gpu_count: int | None,
                   time_left_s: Callable[[], float], keep_going: Callable[[], bool]) -> bool:
        """Play one pair of the current trial on ``run``'s instance when it wants one and the instance has the
        time for it; False when it played none (nothing wanted, or no time)."""
        trial = self.trial
        if trial is None or not self.has_pair_for(run):
            return False
        if run.cid not in trial.helpers and not run.blocks:
            # not measured yet (it helps before measuring: engine.py): it skips the steps the screener's runs took
            # to settle, as it would its own (warm-up is counted in steps, mostly the workload's)
            run.warmup_steps = max(run.warmup_steps, trial.own.run.warmup_steps)
        player = trial.helpers.get(run.cid) or _Player(
            ctx, run, conn, replace(trial.base, gpu_count=gpu_count), replace(trial.change, gpu_count=gpu_count),
            run_times(run))
        if time_left_s() < player.pair_estimate_s():
            return False
        try:
            end = await trial.help(player, keep_going=keep_going)
        except (DeadlineReached, RemoteError):
            self.out.add(run.cid)   # its half pair is dropped; the others play on
            return True
        if end is _PairEnd.LEFT:
            self.out.add(run.cid)
        elif end is _PairEnd.UNFIT:
            self._unfit[run.cid] = trial
        return True


async def tune(ctx: CandidateContext, run: CandidateRun, conn: HostConnection, *, start: Profile,
               bottleneck: Bottleneck, time_left_s: Callable[[], float],
               steps: Sequence[TuningStep] | None = None, screened_by: str | None = None,
               pool: TrialPool | None = None, earlier: Sequence[TuningTrial] = ()) -> TuningOutcome:
    """Tune ``run``'s instance from ``start`` (``TuningSearch``): every allowed knob, or only ``steps`` (what
    the screening on ``screened_by`` left to confirm, its trials ``earlier``: their pairs on this instance carry
    over); each trial open to ``pool``'s helpers when given (a screening)."""
    search = TuningSearch(ctx, run, conn, start=start, bottleneck=bottleneck, time_left_s=time_left_s, steps=steps,
                          screened_by=screened_by, pool=pool, earlier=earlier)
    return await search.tune()


class TuningSearch:
    """Try each allowed knob from the bottleneck's order (the input path moved up when a compute knob gains
    nothing, or its steps wait for input; a starved compute knob joined with the loaders at once where they cannot
    pay alone); keep what clearly helps; then the knobs that might have helped, together (they may only pay
    jointly); stop when time runs out. One search per tuned candidate; its state is what the steps share
    (docs/method.md, Tune one variable at a time)."""

    def __init__(self, ctx: CandidateContext, run: CandidateRun, conn: HostConnection, *, start: Profile,
                 bottleneck: Bottleneck, time_left_s: Callable[[], float],
                 steps: Sequence[TuningStep] | None = None, screened_by: str | None = None,
                 pool: TrialPool | None = None, earlier: Sequence[TuningTrial] = ()) -> None:
        self.ctx, self.run, self.conn = ctx, run, conn
        self.earlier = tuple(earlier)   # the screening's trials, whose pairs on this instance carry over
        self.screened_by = screened_by
        self.pool = pool
        self.time_left_s = time_left_s
        self.best = start
        self.trials: list[TuningTrial] = []
        self.times = run_times(run)
        self.pairs = ctx.manifest.tuning.min_pairs
        self.unfit: TuningStopped | None = None   # the first trial the deadline had no room for (a cheaper may fit)
        self.steps = list(steps if steps is not None else plan_tuning(
            ctx.manifest.tuning, bottleneck=bottleneck, baseline=start, max_gpus=run.candidate.offer.num_gpus))
        self.joint_tried = len(self.steps) < 2   # one knob alone has nothing to be joined with
        self.joints: list[dict[Knob, int | str]] = []   # the joint changes tried (each once)
        self.waited: list[TuningStep] = []   # compute knobs that gained nothing, perhaps for want of input: again after
        self.retried: set[Knob] = set()      # an accepted input-path change (once each)
        self.hopeful: dict[Knob, int | str] = {}   # unproven gains: knob -> the value that may have gained
        self.too_big: list[int] = []   # batch sizes whose output failed (out of memory?): again once precision changes
        # values whose steps broke the latency ceiling without waiting for input: a wider input path cannot help
        self.over_ceiling: set[tuple[Knob, int | str]] = set()
        # the share of step time ``best``'s steps waited for input, as measured: the median of the race's blocks
        # at the start profile, then of the kept change's variant runs, on the machine that waited most when the
        # trial was pooled (its profile is every class's: a machine whose input is slower may gain where the
        # median one cannot); None when not known (nothing is then left untried)
        self.wait: float | None = (statistics.median(b.data_wait_share for b in run.blocks)
                                   if run.blocks and run.race_profile in (None, start) else None)
        self.not_tried: list[str] = []

    async def tune(self) -> TuningOutcome:
        while True:
            if self.steps:
                stop = await self._step(self.steps.pop(0))
            else:
                joint = _joint_change(self.best, self.hopeful) if not self.joint_tried else None
                if joint is None or joint in self.joints:
                    break
                self.joint_tried = True
                stop = await self._joint(joint)
            if stop is not None:
                return stop
        return self._stopped(self.unfit) if self.unfit is not None else self._finished(None)

    async def _joint(self, joint: dict[Knob, int | str]) -> TuningOutcome | None:
        """The knobs that might have gained, tried together; the outcome when tuning must stop."""
        self.joints.append(dict(joint))
        knobs = sorted(joint, key=str)
        change = _on_gpus(_with_values(self.best, joint), self.best)
        got = await self._trial("+".join(str(k) for k in knobs),
                                "/".join(str(self.best.value(k)) for k in knobs),
                                "/".join(str(joint[k]) for k in knobs), change)
        if isinstance(got, TuningOutcome):
            return got
        if got is not None and got.accepted:
            previous = self.best
            self.best = change
            self.wait = got.variant_data_wait_high
            for knob in joint:
                self.hopeful.pop(knob, None)
            if set(joint) != {Knob.LOADERS}:
                self.over_ceiling.clear()
            if Knob.PRECISION in joint and self.too_big:
                self.steps.append(TuningStep(Knob.BATCH_SIZE, tuple(self.too_big)))
                self.too_big = []
            return await self._trim(previous, joint, got)
        return None

    async def _trim(self, previous: Profile, joint: dict[Knob, int | str], kept: AbVerdict) -> TuningOutcome | None:
        """After a joint change is kept: its larger batch back at the batch before, judged by the cost of N units
        alone. A joint change is kept whole, but a batch that never helped alone can ride on another knob's gain
        (more loaders that pay on this host): a larger batch's warm-up steps are each that much longer, so at a
        small N the joint change without it is cheaper still (docs/method.md, Tune). Tried only when the joint
        trial's runs said their warm-up; the outcome when tuning must stop."""
        batch, was = joint.get(Knob.BATCH_SIZE), previous.batch_size
        if not isinstance(batch, int) or was is None or batch <= was or kept.cost_gain is None:
            return None
        trimmed = _on_gpus(self.best.with_value(Knob.BATCH_SIZE, was), self.best)
        got = await self._trial(str(Knob.BATCH_SIZE), str(batch), str(was), trimmed, on_cost=True)
        if isinstance(got, TuningOutcome):
            return got
        if got is not None and got.accepted:
            self.best = trimmed
            self.wait = got.variant_data_wait_high
        return None

    async def _step(self, step: TuningStep) -> TuningOutcome | None:
        """One knob's values, from the likeliest (``value_order``); the outcome when tuning must stop."""
        flat = starved = bounded = False
        was = self.best.value(step.knob)
        for value in value_order(step.knob, step.values, was):
            if value == self.best.value(step.knob):
                continue
            if step.knob is Knob.BATCH_SIZE and value in self.too_big:
                continue   # its output failed (out of memory?) at this precision: it would again
            if (step.knob, value) in self.over_ceiling:
                continue   # its steps broke the latency ceiling, none of their time waiting for input: they would again
            if step.knob is Knob.LOADERS and _above(value, was) and self._input_bounded(str(was), str(value)):
                bounded = True
                continue
            change = _on_gpus(self.best.with_value(step.knob, value), self.best)
            # A smaller batch is slower in steady state and warms up sooner: like a trim (``_trim``), it is judged
            # by the cost of N units (a leader confirms a trim its screening left open this way).
            smaller = step.knob is Knob.BATCH_SIZE and isinstance(value, int) and isinstance(was, int) and value < was
            got = await self._trial(str(step.knob), str(self.best.value(step.knob)), str(value), change,
                                    on_cost=smaller)
            if got is None:
                continue   # a nearer value of the same knob may be cheaper to try
            if isinstance(got, TuningOutcome):
                return got
            verdict = got
            if verdict.accepted:
                self._keep(step.knob, change, verdict)
                if step.knob in COMPUTE_KNOBS and self.wait is not None and self.wait > DATA_WAIT_SHARE_MAX:
                    # Kept, and its steps now wait for input (on the machine that waited most, as the loaders'
                    # bound reads it): the input path is tried next (stable sort), as a compute knob tried at this
                    # input path would be judged starved (seen: two batch trials of 12 pairs each after bf16, one
                    # flat and one +4 %, before four loaders gained 12 %).
                    self.steps.sort(key=lambda s: s.knob is not Knob.LOADERS)
                if step.knob is Knob.BATCH_SIZE:
                    break   # the largest batch that clearly helps (larger ones were tried first)
                continue
            if verdict.output_failed and step.knob is Knob.BATCH_SIZE and isinstance(value, int):
                self.too_big.append(value)
            if verdict.may_gain:
                self.hopeful.setdefault(step.knob, value)   # the first: a batch's largest (tried first) that may gain
            wider = (_wider_input(self.ctx.manifest.tuning.loaders, self.best, verdict)
                     if step.knob in COMPUTE_KNOBS else None)
            if wider is not None and not verdict.output_failed and not verdict.breaks_slo:
                # Faster steps that now wait for input: the change pays only with a wider input path, so both
                # are tried together (neither alone may move anything).
                self.hopeful.setdefault(step.knob, value)
                self.hopeful.setdefault(Knob.LOADERS, wider)
                starved = True
            if verdict.breaks_slo:
                # Its steps broke the latency ceiling: a wider input path shortens them only where they waited for
                # input, so only then is it flat "for want of input" (and tried again after the loaders); else the
                # next smaller batch, whose steps are shorter, is tried at once (seen: batch 256 rejected on the
                # latency twice in one screening, the loaders kept between, its steps never waiting for input).
                waited = verdict.variant_data_wait_high
                if waited is not None and waited > DATA_WAIT_SHARE_MAX:
                    flat = True
                else:
                    self.over_ceiling.add((step.knob, value))
            else:
                flat = flat or (verdict.gain is not None and verdict.gain.point < self.ctx.manifest.tuning.min_gain)
            growing = step.knob is Knob.BATCH_SIZE and _above(value, was)
            if growing and flat:
                break   # the largest batch gains nothing: a smaller step gains less still
            if (step.knob is not Knob.PRECISION and not growing and verdict.gain is not None
                    and verdict.gain.point < 0):
                break  # worse in this direction: the next value of the same knob goes further that way
        if (flat or starved) and step.knob in COMPUTE_KNOBS:
            # It gained nothing, or its steps waited for input: perhaps for want of input either way. The input
            # path is tried next (stable sort: the rest after), and this knob again, alone, should that widen
            # the input by itself (the joint trial with the most loaders stays planned for when it does not).
            self.steps.sort(key=lambda s: s.knob is not Knob.LOADERS)
            if step.knob not in self.retried and any(s.knob is Knob.LOADERS for s in self.steps):
                self.waited.append(step)
        if bounded and Knob.LOADERS in self.hopeful:
            # More loaders alone cannot pay (the steps at ``best`` hardly wait for input), yet a compute change's
            # steps waited for them: only together can the two pay, and any other compute knob tried at this
            # narrow input path would starve the same way (seen: a batch trial of 10 pairs flat for want of input,
            # then a trim of 8 to take it back out of the joint change). The joint trial goes next.
            joint = _joint_change(self.best, self.hopeful)
            if joint is not None and Knob.LOADERS in joint and joint not in self.joints:
                return await self._joint(joint)
        return None

    def _input_bounded(self, was: str, value: str) -> bool:
        """Whether more loaders (``was`` -> ``value``) cannot gain the minimum at ``best``: its steps' measured wait
        for input bounds what any input path can gain (``input_gain_bound``). Noted for the receipt when so."""
        wait, min_gain = self.wait, self.ctx.manifest.tuning.min_gain
        if wait is None or input_gain_bound(wait) >= min_gain:
            return False
        self.not_tried.append(f"{Knob.LOADERS} {was} -> {value}: not tried; the steps at "
                              f"{self.best.describe()} waited for input {wait:.1%} of their time (median run), so more "
                              f"loaders can gain at most {input_gain_bound(wait):.1%} (< {min_gain:.0%})")
        return True

    def _keep(self, knob: Knob, change: Profile, verdict: AbVerdict) -> None:
        """``change`` clearly helped: it is the profile from now on, and what waited for it is planned again."""
        self.best = change
        self.wait = verdict.variant_data_wait_high
        self.hopeful.pop(knob, None)
        if knob is not Knob.LOADERS:
            self.over_ceiling.clear()   # shorter steps (bf16, say): a value over the ceiling may now be under it
        if knob is Knob.LOADERS and self.waited:
            self.steps[:0] = self.waited   # with the input path widened, a compute knob may now pay: again, first
            self.retried.update(w.knob for w in self.waited)
            self.waited = []
        if knob is Knob.PRECISION and self.too_big:
            self.steps.insert(0, TuningStep(Knob.BATCH_SIZE, tuple(self.too_big)))   # less memory a step: again
            self.too_big = []

    async def _trial(self, knob: str, was: str, value: str, change: Profile, *,
                     on_cost: bool = False) -> AbVerdict | TuningOutcome | None:
        """One A/B trial of ``change`` against ``best``: its verdict, the outcome when tuning must stop, or None
        when the deadline has no room for it (noted; a cheaper trial may still fit). ``on_cost``: judged by the
        cost of N units alone (a trim)."""
        ctx, run, best = self.ctx, self.run, self.best
        carried = self.carried(best, change)
        left, needed = self.time_left_s(), self.times.trial_estimate_s(
            self._own_pairs(max(1, self.pairs - len(carried))), best, change)
        if left <= 0 or left < needed:
            self.unfit = self.unfit or TuningStopped(TuningStop.NO_ROOM, knob=knob, value=value, left_s=left,
                                                     needed_s=needed)
            return None
        ctx.bus.publish(TuningTrialStarted(at=ctx.clock.now(), campaign_id=ctx.campaign_id, candidate=run.cid,
                                           knob=knob, baseline=was, value=value))
        trial = _PairedTrial(ctx, run, self.conn, best, change, self.times, pool=self.pool, on_cost=on_cost)
        trial.carry(carried)
        try:
            verdict = await trial.judge(room_for=lambda more: self.time_left_s() >= self.times.trial_estimate_s(
                self._own_pairs(more), best, change) + self._reserve_s(change))
        except DeadlineReached:
            return self._stopped(TuningStopped(TuningStop.DEADLINE, knob=knob, value=value))
        except RemoteError as exc:
            return self._stopped(TuningStopped(TuningStop.REMOTE_ERROR, knob=knob, value=value, error=str(exc)),
                                 level="warning")
        self.trials.append(TuningTrial(knob, was, value, verdict, change, pairs_on=tuple(trial.pairs_on.items()),
                                       memory_seen=tuple(trial.memory_seen), base=best,
                                       played=tuple(trial.played), carried=trial.carried))
        ctx.bus.publish(TuningTrialJudged(at=ctx.clock.now(), campaign_id=ctx.campaign_id, candidate=run.cid,
                                          knob=knob, baseline=was, value=value, accepted=verdict.accepted,
                                          gain=band(verdict.gain), pairs=verdict.pairs, reason=verdict.reason))
        ctx.bus.publish(Notice(at=ctx.clock.now(), campaign_id=ctx.campaign_id, level="info",
                               text=f"{run.cid}: tuning {self.trials[-1].describe()}"))
        return verdict

    def _reserve_s(self, change: Profile) -> float:
        """Time the trials still planned need, each priced at what it would run (one per knob left, at the value it
        tries first; and the joint one, with ``change`` in it): a trial's extra pairs come only out of what is
        left over. A loaders trial at batch 64 is not priced like the batch-256 trial now being judged."""
        best = self.best
        current = best
        planned = [_on_gpus(current.with_value(s.knob, first), best) for s in self.steps
                   if (first := next((v for v in value_order(s.knob, s.values, current.value(s.knob))
                                      if v != current.value(s.knob) and v not in self.too_big), None)) is not None]
        if not self.joint_tried:
            planned.append(_on_gpus(_with_values(_with_values(current, self.hopeful), _changed(current, change)),
                                    best))
        return sum(self.times.trial_estimate_s(self._own_pairs(self.pairs), best, v) for v in planned)

    def carried(self, base: Profile, change: Profile) -> list[PairPlayed]:
        """The pairs this instance played of ``change`` from ``base`` in an earlier trial (``earlier``: the
        screening's), compared at this instance's GPU count: its confirming trial starts with them. A screening
        that left a change open for the leader to confirm had the leader play some of its pairs, often; played
        again from nothing, the trial may not fit the leader's deadline (seen: 20.2 min needed, 20.1 left, a
        change worth 30 % left untried). A trial that is not one knob's (a joint one, a trim) carries nothing."""
        def at_mine(profile: Profile) -> Profile:
            return replace(profile, gpu_count=base.gpu_count)

        return [pair for trial in self.earlier
                if trial.base is not None and trial.change is not None and len(trial.knobs) == 1
                and at_mine(trial.base) == base and at_mine(trial.change) == change
                for pair in trial.played if pair.cid == self.run.cid]

    def _own_pairs(self, pairs: int) -> int:
        """How many of a trial's ``pairs`` this instance can expect to play: all, unless the trial is pooled, then
        its share among the machines at hand to help (``TrialPool.helpers``)."""
        return math.ceil(pairs / (1 + (self.pool.helpers if self.pool is not None else 0)))

    def _finished(self, stopped: TuningStopped | None) -> TuningOutcome:
        ctx = self.ctx
        outcome = TuningOutcome(tuple(self.trials), self.best, stopped, screened_by=self.screened_by,
                                not_tried=tuple(self.not_tried))
        ctx.bus.publish(TuningFinished(at=ctx.clock.now(), campaign_id=ctx.campaign_id, candidate=self.run.cid,
                                       profile=self.best.describe(), trials=len(self.trials),
                                       stopped_early=outcome.stopped_early))
        return outcome

    def _stopped(self, stopped: TuningStopped, level: str = "info") -> TuningOutcome:
        ctx = self.ctx
        ctx.bus.publish(Notice(at=ctx.clock.now(), campaign_id=ctx.campaign_id, level=level,
                               text=f"{self.run.cid}: tuning stopped: {stopped.describe()}"))
        return self._finished(stopped)


def _joint_change(best: Profile, hopeful: dict[Knob, int | str]) -> dict[Knob, int | str] | None:
    """The knobs that might have gained (judged, not shown worse) set together, each at the value that might have,
    when there are two or more still away from ``best``: knobs can pay only jointly (more loaders help only once bf16
    makes the step wait for input; a larger batch only once the input path keeps up). None otherwise."""
    current = best
    joint = {knob: value for knob, value in hopeful.items() if current.value(knob) != value}
    return joint if len(joint) >= 2 else None


def _changed(current: Profile, change: Profile) -> dict[Knob, int | str]:
    """The knobs ``change`` sets away from ``current``."""
    other = change
    return {knob: value for knob in Knob if (value := other.value(knob)) is not None and value != current.value(knob)}


def _wider_input(loaders: Sequence[int], best: Profile, verdict: AbVerdict) -> int | None:
    """The most loaders allowed, when a compute change's steps wait for input (more than the attribution's
    threshold) and the current profile has fewer; None otherwise."""
    wait = verdict.variant_data_wait
    most = max(loaders, default=None)
    if wait is None or wait <= DATA_WAIT_SHARE_MAX or most is None or best.loaders is None or most <= best.loaders:
        return None
    return most


def _with_values(profile: Profile, values: dict[Knob, int | str]) -> Profile:
    for knob, value in values.items():
        profile = profile.with_value(knob, value)
    return profile
