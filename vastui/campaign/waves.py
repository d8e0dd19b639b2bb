"""Renting the shortlist in waves: the first wave by prior, the rest by their chance of beating the leader.

Every rented candidate pays its pull, readiness, canary and warm-up whatever the race then decides, and racing
saves only blocks, the cheap part. So the plan's first wave (``Plan.first_wave``: the best priors, at least two
GPU models) is rented at once; once every candidate rented so far has its minimum evidence (or has ended), the
campaign fits the calibrated prior (``vastui.bench.calibration``) to what it measured and to the store's history of
this workload, and gives each waiting candidate its probability of beating the measured leader. One below the
manifest's ``[race] miss_probability`` is passed over, unrented, with that probability in the receipt; of the rest,
the likeliest winners form the next wave. docs/method.md, Waves.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from vastui.bench.calibration import Calibration, Observation, Prediction, needed_throughput, normal_quantile
from vastui.bench.cost import CostInputs, cost_curve, cost_per_accepted_unit
from vastui.bench.manifest import Manifest
from vastui.bench.stats import Interval
from vastui.campaign.candidate import CandidatePhase, CandidateRun
from vastui.campaign.charges import prior_cost_inputs
from vastui.campaign.plan import Candidate, model_key
from vastui.campaign.slots import Slot


@dataclass(frozen=True, slots=True)
class WinChance:
    """A waiting candidate's chance of beating the measured leader, and what it rests on."""

    probability: float
    needed_units_per_s: float        # the throughput it would need: the leader's cost, the SLO floor
    predicted: Prediction            # its throughput as the calibrated prior predicts it
    leader: str | None               # whom it would have to beat (None: only the SLO floor, or nothing, yet)

    def describe(self) -> str:
        against = f"beating {self.leader}'s measured cost" if self.leader is not None else "meeting the SLO floor"
        need = (f"needs > {self.needed_units_per_s:.3g} units/s" if math.isfinite(self.needed_units_per_s)
                else "no throughput would do")
        return (f"{100 * self.probability:.1f} % chance of {against} ({need}; calibrated prior "
                f"{self.predicted.median_units_per_s:.3g} units/s, spread x{math.exp(self.predicted.sigma):.2f})")


def warmup_units(slots: Sequence[Slot]) -> float | None:
    """The work production's warm-up costs, in units, as the rented candidates lost it: the median over the
    measured candidates of their runs' mean warm-up loss (time beyond the work it did) times their measured pace.
    None before any candidate has both.

    A waiting candidate's prior prices warm-up at the manifest's measuring floor (``[warmup] min_s``), which is how
    long vastui *measures* warm-up, not what production loses to it: against a leader priced on its measured loss
    that floor made every waiting candidate look dearer than it is, most where the production run is short.
    Warm-up is a number of steps (compilation and caches settle per step), so its cost in seconds falls with the
    pace: counted in units it carries from one machine to another (docs/method.md, Waves)."""
    per_candidate = []
    for slot in slots:
        run = slot.run
        if not run.warmup_lost_s or not run.blocks:
            continue
        pace = _pace(run)
        lost = statistics.fmean(run.warmup_lost_s)
        if pace > 0.0 and math.isfinite(lost) and lost >= 0.0:
            per_candidate.append(lost * pace)
    return statistics.median(per_candidate) if per_candidate else None


def _pace(run: CandidateRun) -> float:
    """The candidate's measured throughput: its blocks' median (0 without blocks)."""
    return statistics.median(b.throughput_units_per_s for b in run.blocks) if run.blocks else 0.0


def _cost_at(inputs: CostInputs, *, units: float, warmup_units: float | None) -> Callable[[float], float]:
    """C(N) as a function of throughput, the warm-up (when ``warmup_units`` says what it is) that much work at the
    throughput's own pace."""
    if warmup_units is None:
        return cost_curve(inputs, units=units)

    def at(theta: float) -> float:
        if theta <= 0.0:
            return math.inf
        return cost_per_accepted_unit(replace(inputs, warmup_s=warmup_units / theta), units=units,
                                      throughput_units_per_s=theta)

    return at


def win_chance(candidate: Candidate, manifest: Manifest, calibration: Calibration, *, leader: str | None,
               leader_cost: Interval | None, leader_misses_slo: float,
               warmup_units: float | None = None) -> WinChance:
    """An upper bound on P(the candidate meets the SLO floor and is cheaper than the leader or the leader, in
    truth, misses the SLO): the smaller of P(it meets the floor) and P(its true cost per unit, at its prior cost
    inputs, comes under the leader's) + ``leader_misses_slo``.

    The leader's cost is known only to its interval: its spread (the interval read as a log-normal's) is added to
    the candidate's own, so a leader measured loosely rules out less. A leader on the SLO's knife-edge
    (``leader_misses_slo`` near 1) rules out nothing on cost: it may never be certified, and what it passed over
    could have been. ``warmup_units``: the warm-up the rented candidates lost, in units (``warmup_units``); the
    candidate's warm-up is priced as that much work at its own pace instead of at the prior's floor."""
    predicted = calibration.predict(model_key(candidate), candidate.prior_throughput_units_per_s,
                                    prior_is_measured=candidate.prior_is_measured)
    floor = manifest.slo.throughput_min_units_per_s or 0.0
    probability, needed, against = predicted.probability_above(floor), floor, None
    if (leader is not None and leader_misses_slo < 1.0 and leader_cost is not None
            and math.isfinite(leader_cost.point) and leader_cost.point > 0.0):
        at = _cost_at(prior_cost_inputs(candidate, manifest), units=manifest.production_units,
                      warmup_units=warmup_units)
        to_beat = needed_throughput(at, target_cost=leader_cost.point)
        z = normal_quantile(0.5 + leader_cost.confidence / 2.0)
        leader_sigma = math.log(max(leader_cost.high, leader_cost.point) / leader_cost.point) / z \
            if math.isfinite(leader_cost.high) else 1.0
        widened = Prediction(predicted.median_units_per_s, math.hypot(predicted.sigma, leader_sigma))
        probability = min(probability, widened.probability_above(to_beat) + leader_misses_slo)
        needed, against = max(floor, to_beat), leader
    return WinChance(probability, needed, predicted, against)


def observations(slots: Sequence[Slot]) -> list[Observation]:
    """What the campaign measured, against the dlperf prior: one per candidate with blocks whose prior was the
    dlperf one (a host measured before has its own measurement as prior: no evidence about dlperf)."""
    out = []
    for slot in slots:
        run = slot.run
        if not run.blocks or run.candidate.prior_is_measured or run.candidate.prior_throughput_units_per_s <= 0:
            continue
        median = _pace(run)
        if median > 0:
            out.append(Observation(model_key(run.candidate), run.candidate.prior_throughput_units_per_s, median))
    return out


_ENDED = frozenset({CandidatePhase.DONE, CandidatePhase.ELIMINATED, CandidatePhase.FAILED, CandidatePhase.SKIPPED,
                    CandidatePhase.ABORTED, CandidatePhase.TUNING})


def has_spoken(slot: Slot, *, min_blocks: int) -> bool:
    """Whether a rented candidate has said what it will say before the next wave is chosen: its minimum evidence,
    or its end (failed, eliminated, done)."""
    return len(slot.run.blocks) >= min_blocks or slot.eliminated or slot.run.phase in _ENDED


class Bulletin:
    """News for the waiting: each ``post`` wakes everyone waiting on ``next`` (a block decided, a candidate
    ended). Take ``current`` before checking, then wait on it: no post between the two is lost."""

    def __init__(self) -> None:
        self.current = asyncio.Event()

    def post(self) -> None:
        event, self.current = self.current, asyncio.Event()
        event.set()
