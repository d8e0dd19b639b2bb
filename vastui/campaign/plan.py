"""Plan: shortlist offers for coverage and expected value, each with a hypothesis, and price the campaign.

No money is spent here. The prior throughput is dlperf scaled by what earlier runs of this workload taught us
(1 when unknown), so any decision that rests on it is provisional until measured.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from vastui.bench.calibration import (
    HOST_SIGMA_PRIOR,
    MODEL_TAU_PRIOR,
    Calibration,
    Observation,
    Prediction,
    needed_throughput,
)
from vastui.bench.cost import cost_curve, cost_per_accepted_unit
from vastui.bench.manifest import Manifest
from vastui.bench.tuning import Profile
from vastui.campaign.inherited import InheritedScreening
from vastui.campaign.prior import (
    DISK_GIB,
    MULTI_GPU_EFFICIENCY_PRIOR,
    SLO_SHORTFALL_PRIOR,
    compressed_dlperf,
    dlperf_pivot,
    moved_gb,
    precision_lift_prior,
    predicted_pull_s,
    prior_inputs,
    workload_scale,
)
from vastui.campaign.repeat import (
    KnownHost,
    Reverification,
    known_host,
    last_profile_throughputs,
    observation,
    reverification,
    throughputs_at,
)
from vastui.campaign.startup import rates_of
from vastui.store.records import BadHost, HostKnowledge
from vastui.vast.models import Offer
from vastui.vast.query import parse_query

# Headroom over the nominal measurement plan (blocks end at the first marker past block_s and block_min_steps,
# so they run long on a slow host), in the per-instance time cap.
MEASURE_SLACK = 1.0
# Work on an instance stops this long before its deadline, so the destroy lands before it: the approval said
# "for at most N min", and the leak watcher flags an instance past its deadline.
DESTROY_MARGIN_S = 120.0
# The canary (the correctness gate) runs this many workload steps on the pinned inputs.
CANARY_STEPS = 40
# A tuning run: its warm-up (skipped: the race measures it; 20 steps, the method's default warm-up minimum, before
# that) and TUNING_TIMED_STEPS timed steps, plus the per-run cost of starting the agent and the workload (the canary pays
# it too).
TUNING_TIMED_STEPS = 10
TUNING_RUN_STEPS = 20 + TUNING_TIMED_STEPS
TUNING_RUN_OVERHEAD_PRIOR_S = 15.0
# Earlier campaigns' measurements of the workload calibrate the prior from this many on (a smaller first wave, the
# SLO shortfall judged by the calibrated chance).
CALIBRATED_AT = 3
# The worst case is priced 10 % above list: billing granularity and the seconds a destroy takes to land.
SPEND_SAFETY = 1.1

# The first wave's places after the first: among the candidates whose prior cost per unit is within this share of
# the one rank order would take, the lowest price per hour. Every first-wave machine is billed while the knobs are
# screened, however fast it is, and a prior this close is a tie well inside its spread (docs/method.md, Waves).
FIRST_WAVE_PRIOR_TIE = 0.10


@dataclass(frozen=True, slots=True)
class Candidate:
    """One offer to rent and measure, with why it is worth it and what it may cost at most."""

    candidate_id: str
    offer: Offer
    hypothesis: str
    gpu_count: int
    prior_throughput_units_per_s: float
    prior_is_measured: bool
    predicted_pull_s: float
    prior_cost_per_unit_usd: float
    expected_spend_usd: float
    max_spend_usd: float
    time_cap_s: float
    # measured recently in an earlier campaign: re-verified (canary and a few blocks), not raced from scratch
    reverified: Reverification | None = None
    # its prior misses the SLO's throughput floor at the profile it would be raced at: ranked after those that do not
    short_of_slo: bool = False

    @property
    def profile_name(self) -> str:
        return f"{self.offer.gpu_name} x{self.gpu_count} @ machine {self.offer.machine_id}"


def model_key(candidate: Candidate) -> str:
    """The calibrated prior's model: GPU model and count (a pair of GPUs scales by its own, unknown, factor)."""
    return f"{candidate.offer.gpu_name} x{candidate.gpu_count}"


@dataclass(frozen=True, slots=True)
class WaveOutlook:
    """What the wave plan expects before anything is measured: its spend and its time to a decision (market
    seconds), and the share of the later candidates it expects to rent."""

    expected_spend_usd: float
    expected_decision_s: float
    expected_later_rents: float
    later: int

    def describe(self) -> str:
        return (f"waves: expected spend ${self.expected_spend_usd:.2f}, decision in ~{self.expected_decision_s / 60:.0f}"
                f" min (expects to rent {self.expected_later_rents:.1f} of the {self.later} later candidates; each "
                f"is rented only while its chance of beating the measured leader stays above the miss probability)")


@dataclass(frozen=True, slots=True)
class Excluded:
    offer_id: int
    machine_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    campaign_id: str
    manifest_digest: str
    query: str
    candidates: tuple[Candidate, ...]
    reserves: tuple[Candidate, ...]
    excluded: tuple[Excluded, ...]
    budget_usd: float
    max_instances: int
    expected_spend_usd: float
    spend_upper_bound_usd: float
    # earlier campaigns' measurements of this workload, for the calibrated prior (vastui.bench.calibration)
    history: tuple[Observation, ...] = ()
    # rented at once; the rest in later waves by their chance of beating the leader (campaign/waves.py)
    first_wave: tuple[str, ...] = ()
    outlook: WaveOutlook | None = None
    # what earlier campaigns of this workload measured, host by host, and the hosts flagged bad now
    known: tuple[KnownHost, ...] = ()
    bad_hosts: tuple[BadHost, ...] = ()
    reverify_max_age_days: float | None = None
    # an earlier campaign's screening of this workload: raced at from the first block, no screening (inherited.py)
    inherited: InheritedScreening | None = None
    inherited_note: str = ""   # why a stored screening is not inherited (empty: none stored, or it is)

    @property
    def offer_ids(self) -> frozenset[int]:
        return frozenset(c.offer.id for c in (*self.candidates, *self.reserves))


def readiness_deadline_s(manifest: Manifest, *, predicted_pull: float) -> float:
    return max(manifest.budget.readiness_min_s, manifest.budget.readiness_pull_factor * predicted_pull)


def _step_prior_s(manifest: Manifest) -> float:
    """A workload step's time before anything is measured: the slowest step a block still accepts (errs long)."""
    return manifest.measure.block_s / max(1, manifest.measure.block_min_steps)


def tuning_trials(manifest: Manifest) -> int:
    """How many A/B trials the manifest allows at most: each allowed value but one, per knob, and with two or more
    knobs to turn, the joint trial of those that might have gained (docs/method.md, Tune)."""
    t = manifest.tuning
    per_knob = [max(0, len(values) - 1) for values in (t.batch_sizes, t.precisions, t.loaders, t.gpu_counts)]
    return sum(per_knob) + (sum(1 for n in per_knob if n) >= 2)


def tuning_allowance_s(manifest: Manifest) -> float:
    """Time for every A/B trial the manifest allows (any candidate may lead), from a step-time prior.

    Each trial is ``2 x min_pairs`` tuning runs. Before anything is measured the step time is unknown; the
    prior is the slowest step a block still accepts (``block_s / block_min_steps``), so the allowance errs long.
    The engine re-estimates from the leader's own runs and starts no trial that would outlive the deadline.
    """
    t = manifest.tuning
    return tuning_trials(manifest) * 2 * t.min_pairs * (TUNING_RUN_STEPS * _step_prior_s(manifest) + TUNING_RUN_OVERHEAD_PRIOR_S)


def candidate_time_cap_s(manifest: Manifest, *, predicted_pull: float) -> float:
    """The hard deadline of one benchmark instance: readiness, the canary, a warm-up per independent run, every
    block, the tuning trials and the destroy margin; at most the manifest's max_instance_lifetime_s."""
    measure = manifest.measure
    canary_s = CANARY_STEPS * _step_prior_s(manifest) + TUNING_RUN_OVERHEAD_PRIOR_S
    runs = max(1, measure.min_runs)      # each independent run starts its own process and warms up again
    plan_s = (canary_s + runs * manifest.warmup.cap_s + (runs - 1) * TUNING_RUN_OVERHEAD_PRIOR_S
              + measure.max_blocks * measure.block_s * (1.0 + MEASURE_SLACK)
              + tuning_allowance_s(manifest) + DESTROY_MARGIN_S)
    return min(manifest.budget.max_instance_lifetime_s, readiness_deadline_s(manifest, predicted_pull=predicted_pull)
               + plan_s)


_OPS = {"eq": lambda a, b: a == b, "neq": lambda a, b: a != b, "gt": lambda a, b: a > b,
        "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b}


def numeric_filters(query: str) -> list[tuple[str, str, float]]:
    """The query's numeric comparisons as (field, op, value), in the API's units (MB, seconds, ...)."""
    out = []
    for field, ops in parse_query(query).items():
        for op, value in ops.items():
            if op not in _OPS or isinstance(value, bool) or value is None:
                continue
            try:
                out.append((field, op, float(value)))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
    return out


def _failed_filter(offer: Offer, filters: Sequence[tuple[str, str, float]]) -> str | None:
    """Server-side filters have been seen to drop silently: check the numeric ones again on what came back."""
    for field, op, value in filters:
        actual = getattr(offer, field, None)
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            continue
        if not _OPS[op](float(actual), value):
            return f"query filter {field} {op} {value:g} fails: the offer has {actual:g}"
    return None


def _rejection(offer: Offer, manifest: Manifest, bad: dict[int, BadHost],
               filters: Sequence[tuple[str, str, float]] = ()) -> str | None:
    shortlist = manifest.shortlist
    if offer.machine_id in bad:
        return f"bad host: {bad[offer.machine_id].reason}"
    if offer.reliability is not None and offer.reliability < shortlist.min_reliability:
        return f"reliability {offer.reliability:.3f} < {shortlist.min_reliability}"
    if shortlist.max_dph is not None and offer.dph_total > shortlist.max_dph:
        return f"${offer.dph_total:.2f}/h over the ${shortlist.max_dph:.2f}/h cap"
    if offer.rentable is False:
        return "not rentable"
    if offer.disk_space is not None and offer.disk_space < DISK_GIB:
        return f"{offer.disk_space:g} GB of free disk, less than the {DISK_GIB:g} GiB a rental takes"
    failed = _failed_filter(offer, filters)
    if failed:
        return failed
    if offer.dph_total <= 0 or not offer.dlperf:
        return "no price or no dlperf to form a prior"
    return None


def _gpu_count(offer: Offer, manifest: Manifest) -> int:
    allowed = manifest.tuning.gpu_counts
    return offer.num_gpus if offer.num_gpus in allowed else 1


@dataclass(frozen=True, slots=True)
class _Scored:
    offer: Offer
    gpu_count: int
    theta: float
    measured: bool
    pull_s: float
    cost: float
    note: str
    short_of_slo: bool = False   # ranked after every machine that is not (docs/method.md, Shortlist)
    reverified: Reverification | None = None


def dlperf_prior_units_per_s(offer: Offer, *, gpus: int, pivot: float) -> float:
    """What the dlperf prior says of ``offer`` run on ``gpus`` GPUs, before any learned scale or measurement:
    compressed per-GPU dlperf, times the GPUs at the assumed multi-GPU scaling."""
    per_gpu = (offer.dlperf or 0.0) / max(offer.num_gpus, 1)
    scaling = MULTI_GPU_EFFICIENCY_PRIOR ** math.log2(gpus) if gpus > 1 else 1.0
    return compressed_dlperf(per_gpu, pivot=pivot) * gpus * scaling


def _raced_at(offer: Offer, gpus: int, manifest: Manifest, inherited: InheritedScreening | None) -> Profile:
    """The profile a host's first blocks are raced at in this plan: the inherited screening's for its GPU class, else
    the manifest's first. Only earlier runs at it say how fast the host is here."""
    return (inherited.profile_for(gpu_ram_mb=offer.gpu_ram, gpu_count=gpus) if inherited is not None
            else Profile.first(manifest.tuning, gpu_count=gpus))


def _score(offer: Offer, manifest: Manifest, knowledge: dict[int, HostKnowledge], scale: float | None, *,
           pivot: float, now: float | None = None, calibration: Calibration | None = None,
           inherited: InheritedScreening | None = None) -> _Scored:
    pull = predicted_pull_s(offer, image_size_gb=manifest.workload.image_size_gb)
    gpus = _gpu_count(offer, manifest)
    # the profile its first blocks are raced at: only earlier runs at it re-verify it
    raced = _raced_at(offer, gpus, manifest, inherited)
    known = knowledge.get(offer.machine_id)
    reverified = None
    # a measurement is the prior of the profile it was taken at only: bf16 may run twice what fp32 did here
    here = throughputs_at(known, raced) if known is not None else ()
    if known is not None and here and max(here) > 0.0:
        theta, measured = max(here), True
        note = f"measured {theta:.0f} u/s here before ({known.n_ok} of {known.n_runs} runs ok)"
        at_its_word = theta
        if known.num_gpus == gpus:
            reverified = reverification(known, now=now, max_age_days=manifest.race.reverify_max_age_days,
                                        profile=raced)
        if reverified is not None:
            note += f"; {reverified.describe()}: canary and a few blocks"
    else:
        per_gpu = (offer.dlperf or 0.0) / max(offer.num_gpus, 1)
        scaling = MULTI_GPU_EFFICIENCY_PRIOR ** math.log2(gpus) if gpus > 1 else 1.0
        compressed = compressed_dlperf(per_gpu, pivot=pivot)
        theta, measured = dlperf_prior_units_per_s(offer, gpus=gpus, pivot=pivot) * (scale or 1.0), False
        note = f"dlperf prior {per_gpu:.0f}/GPU, {compressed:.0f} compressed" + (
            f" x learned scale {scale:.2f}" if scale else "")
        if known is not None and known.best is not None:
            note += f"; measured here before at another profile only, not at {raced.describe()}"
        at_its_word = theta * per_gpu / compressed if compressed > 0 else 0.0
        if gpus > 1:
            note += f"; {gpus} GPUs at an assumed {scaling:.0%} scaling — measuring tests whose scaling holds"
    floor = manifest.slo.throughput_min_units_per_s
    # unmeasured, a half precision the screening may find could lift it over the floor (docs/method.md, Shortlist)
    lift = 1.0 if measured else precision_lift_prior(offer, manifest)
    short = floor is not None and at_its_word * lift < (1.0 if measured else SLO_SHORTFALL_PRIOR) * floor
    if floor is not None and not measured and calibration is not None:
        # Earlier campaigns calibrated the prior: the SLO shortfall is judged by the calibrated chance, not by a
        # single learned scale (which, for a workload that does not follow dlperf, wrongs the slow GPUs).
        chance = calibration.predict(f"{offer.gpu_name} x{gpus}", theta).probability_above(floor / lift)
        short = chance < manifest.race.miss_probability
        if short:
            note += (f"; calibrated on {calibration.observations} earlier measurements: {100 * chance:.1f} % chance "
                     f"of the SLO floor of {floor:g}: ranked after the machines that are not")
    elif short:
        note += (f"; {'measured' if measured else 'dlperf taken at its word'}: {at_its_word:.0f} u/s, short of the "
                 f"SLO floor of {floor:g}: ranked after the machines that are not")
    elif floor is not None and lift > 1.0 and at_its_word < SLO_SHORTFALL_PRIOR * floor:
        note += (f"; dlperf taken at its word: {at_its_word:.0f} u/s, short of the SLO floor of {floor:g} at the "
                 f"first profile, kept in line for a half precision (prior lift x{lift:g})")
    cost = cost_per_accepted_unit(prior_inputs(offer, pull_s=pull, manifest=manifest),
                                  units=manifest.production_units, throughput_units_per_s=max(theta, 1e-9))
    return _Scored(offer, gpus, theta, measured, pull, cost, note, short, reverified)


def _one_per_machine(items: Sequence[_Scored], *, taken: set[int]) -> list[_Scored]:
    """The cheapest entry per machine (a machine offered as several GPU bundles is one host), unused ones only."""
    seen = set(taken)
    out = []
    for item in sorted(items, key=lambda s: (s.short_of_slo, s.cost)):
        if item.offer.machine_id not in seen:
            seen.add(item.offer.machine_id)
            out.append(item)
    return out


def _pick(scored: list[_Scored], *, max_candidates: int, min_hosts: int) -> tuple[list[_Scored], list[_Scored]]:
    """Machines by prior cost; a model comes in with its ``min_hosts`` best machines together (fewer only when the
    market has fewer), so host luck is not mistaken for GPU quality, or not at all when the slots left cannot hold
    them; a further host of a model already in comes in alone, at its own prior cost. (Models used to be taken whole
    in the order of their best machine, skipping one that no longer fit: the next that did could be a far worse
    prior than a third host of a model already in; docs/method.md, Shortlist.)"""
    machines = _one_per_machine(scored, taken=set())
    by_model: dict[str, list[_Scored]] = defaultdict(list)
    for item in machines:
        by_model[item.offer.gpu_name].append(item)
    chosen: list[_Scored] = []
    used: set[int] = set()
    for item in machines:
        if len(chosen) >= max_candidates:
            break
        if item.offer.machine_id in used:
            continue
        model = item.offer.gpu_name
        have = sum(1 for c in chosen if c.offer.gpu_name == model)
        group = [i for i in by_model[model] if i.offer.machine_id not in used]
        need = min(len(group), max(1, min_hosts - have))
        if need > max_candidates - len(chosen):
            continue    # the model does not fit whole: a cheaper-by-prior machine further on may
        for taken in group[:need]:
            chosen.append(taken)
            used.add(taken.offer.machine_id)
    return chosen, [item for item in machines if item.offer.machine_id not in used]


def _cover_gpu_counts(chosen: list[_Scored], rest: list[_Scored], *, counts: Sequence[int], max_candidates: int,
                      min_hosts: int) -> tuple[list[_Scored], list[_Scored]]:
    """When the workload may scale, measure at least one configuration of each allowed GPU count > 1 the market
    offers (the cheapest by prior). A full shortlist gives up its worst single-GPU choice from a model that keeps
    ``min_hosts`` hosts without it (else the worst single-GPU choice)."""
    for count in sorted(c for c in set(counts) if c > 1):
        if any(item.gpu_count == count for item in chosen):
            continue
        machines = {item.offer.machine_id for item in chosen}
        best = next((item for item in rest if item.gpu_count == count and item.offer.machine_id not in machines),
                    None)
        if best is None:
            continue
        if len(chosen) >= max_candidates:
            worst = _expendable(chosen, min_hosts=min_hosts)
            if worst is None:
                continue
            chosen = [item for item in chosen if item is not worst]
            rest = [*rest, worst]
        chosen.append(best)
        rest = [item for item in rest if item.offer.machine_id != best.offer.machine_id]
    return chosen, sorted(rest, key=lambda s: s.cost)


def _incumbent_first(chosen: list[_Scored], rest: list[_Scored], *, max_candidates: int,
                     min_hosts: int) -> tuple[list[_Scored], list[_Scored]]:
    """The cheapest host re-verifiable at the profile this campaign races at (measured there recently: most often
    the last campaign's choice) is shortlisted, first, so the first wave re-verifies it: its measurement is known,
    its re-verification cheap, and a leader measured early lets later waves pass over the unknown hosts that cannot
    beat it. Ranked by prior cost alone, it can fall off the shortlist behind unknown hosts whose prior, scaled by
    the very measurements it took part in, promises more than it measured (docs/method.md, Repeat campaigns)."""
    known = [item for item in (*chosen, *rest) if item.reverified is not None]
    if not known:
        return chosen, rest
    best = min(known, key=lambda item: item.cost)
    if any(item is best for item in chosen):
        return [best, *(item for item in chosen if item is not best)], rest
    if len(chosen) >= max_candidates:
        worst = _expendable(chosen, min_hosts=min_hosts) or max(chosen, key=lambda item: item.cost)
        chosen = [item for item in chosen if item is not worst]
        rest = [*rest, worst]
    return [best, *chosen], sorted((item for item in rest if item is not best), key=lambda item: item.cost)


def _expendable(chosen: Sequence[_Scored], *, min_hosts: int) -> _Scored | None:
    singles = sorted((item for item in chosen if item.gpu_count == 1), key=lambda s: s.cost, reverse=True)
    per_model: dict[str, int] = defaultdict(int)
    for item in chosen:
        per_model[item.offer.gpu_name] += 1
    spare = [item for item in singles if per_model[item.offer.gpu_name] > min_hosts]
    pool = spare or singles
    return pool[0] if pool else None


def _spend(offer: Offer, manifest: Manifest, *, seconds: float) -> float:
    """What renting ``offer`` for ``seconds`` costs: GPU time, its disk, and pulling the image and inputs."""
    storage_per_h = rates_of(offer, disk_gib=DISK_GIB).storage_usd_per_hour
    return (offer.dph_total + storage_per_h) * seconds / 3600.0 + moved_gb(manifest) * (offer.inet_down_cost or 0.0)


def _candidate(index: int, item: _Scored, manifest: Manifest, *, rank_note: str) -> Candidate:
    cap_s = candidate_time_cap_s(manifest, predicted_pull=item.pull_s)
    measure = manifest.measure
    expected_s = item.pull_s + manifest.warmup.min_s + measure.min_blocks * measure.block_s * 2
    dph = item.offer.dph_total
    return Candidate(
        candidate_id=f"c{index}", offer=item.offer, gpu_count=item.gpu_count,
        hypothesis=(f"{item.offer.gpu_name} x{item.gpu_count} at ${dph:.3f}/h, {rank_note}; {item.note}; "
                    f"pull ~{item.pull_s / 60:.1f} min"),
        prior_throughput_units_per_s=item.theta, prior_is_measured=item.measured, predicted_pull_s=item.pull_s,
        prior_cost_per_unit_usd=item.cost, expected_spend_usd=_spend(item.offer, manifest, seconds=min(expected_s, cap_s)),
        max_spend_usd=_spend(item.offer, manifest, seconds=cap_s) * SPEND_SAFETY, time_cap_s=cap_s,
        reverified=item.reverified, short_of_slo=item.short_of_slo,
    )


def first_wave(candidates: Sequence[Candidate], *, manifest: Manifest, calibrated: bool) -> tuple[str, ...]:
    """The candidates rented at once, ``[race] first_wave`` of them (by default three, two when earlier campaigns
    calibrated the prior), at most ``max_instances``: the best prior first; each later place to the lowest price per
    hour among the candidates whose prior cost is within ``FIRST_WAVE_PRIOR_TIE`` of the next in rank order (the
    wave's machines are all billed through the screening: at a tied prior, a cheaper hour teaches as much for
    less); its last place to a second GPU model when the places before it hold only one (one model's hosts tell
    nothing of how far the prior is off between models)."""
    size = manifest.race.first_wave or (2 if calibrated else 3)
    size = max(1, min(size, manifest.budget.max_instances, len(candidates)))
    chosen: list[Candidate] = []
    left = list(candidates)
    while left and len(chosen) < size:
        models = {c.offer.gpu_name for c in chosen}
        eligible = left
        if len(chosen) == size - 1 and len(models) == 1 and any(c.offer.gpu_name not in models for c in left):
            eligible = [c for c in left if c.offer.gpu_name not in models]
        pick = eligible[0]
        if chosen and math.isfinite(pick.prior_cost_per_unit_usd):
            tie = pick.prior_cost_per_unit_usd * (1.0 + FIRST_WAVE_PRIOR_TIE)
            ties = [c for c in eligible
                    if c.prior_cost_per_unit_usd <= tie and (pick.short_of_slo or not c.short_of_slo)]
            pick = min(ties, key=lambda c: c.offer.dph_total)   # ties holds pick itself
        chosen.append(pick)
        left.remove(pick)
    return tuple(c.candidate_id for c in chosen)


def wave_outlook(candidates: Sequence[Candidate], wave: Sequence[str], *, manifest: Manifest) -> WaveOutlook:
    """Before anything is measured: the first wave is rented; each later candidate with its chance of beating the
    first wave's best prior, relative to it (the workload's overall scale cancels; what remains is the spread
    between hosts, and between GPU models when they differ: vastui.bench.calibration's priors)."""
    first = [c for c in candidates if c.candidate_id in wave]
    later = [c for c in candidates if c.candidate_id not in wave]
    measure = manifest.measure

    def life_s(c: Candidate) -> float:   # to its minimum evidence: pull, canary, warm-ups, the first blocks
        canary_s = CANARY_STEPS * _step_prior_s(manifest) + TUNING_RUN_OVERHEAD_PRIOR_S
        return (c.predicted_pull_s + canary_s + max(1, measure.min_runs) * manifest.warmup.min_s
                + measure.min_blocks * measure.block_s)

    if not first:
        return WaveOutlook(0.0, 0.0, 0.0, len(later))
    best = min(first, key=lambda c: c.prior_cost_per_unit_usd)
    chances = []
    for c in later:
        at = cost_curve(prior_inputs(c.offer, pull_s=c.predicted_pull_s, manifest=manifest),
                        units=manifest.production_units)
        needed = needed_throughput(at, target_cost=best.prior_cost_per_unit_usd)
        spread = 2 * HOST_SIGMA_PRIOR ** 2 + (2 * MODEL_TAU_PRIOR ** 2 if model_key(c) != model_key(best) else 0.0)
        chances.append(Prediction(c.prior_throughput_units_per_s, math.sqrt(spread)).probability_above(needed))
    expected = sum(chances)
    waves_after = math.ceil(expected / max(1, len(first)) - 0.5) if expected > 0 else 0
    decision_s = (max(life_s(c) for c in first) + waves_after * statistics.median(life_s(c) for c in candidates)
                  + max(0, measure.winner_min_blocks - measure.min_blocks) * measure.block_s)
    spend = sum(c.expected_spend_usd for c in first) + sum(p * c.expected_spend_usd for p, c in zip(chances, later,
                                                                                                   strict=True))
    return WaveOutlook(spend, decision_s, expected, len(later))


def _history(knowledge: Sequence[HostKnowledge], offers: Sequence[Offer], *, pivot: float, scale: float | None,
             now: float | None, inherited: InheritedScreening | None = None) -> tuple[Observation, ...]:
    """Earlier campaigns' measurements of this workload for the calibrated prior: per known host with an offer in
    ``offers``, its median measured throughput against the dlperf prior its offer would carry in this plan were it
    unknown (compressed dlperf x GPUs x the assumed scaling x the plan's learned scale): the same prior the
    unmeasured candidates carry and the campaign's own observations are taken against (campaign/waves.py), so the
    calibration fits one relation, not two. Weighted down with age (campaign/repeat.py); a host with no offer in ``offers``
    (not listed now, nor seen before) has no dlperf to relate its measurement to and is left out. Raced at an
    ``inherited`` screening, a host counts only by its runs at the profile it would be raced at now: its runs at the
    first profile, before that screening, say what fp32 did where this campaign measures bf16."""
    by_machine: dict[int, list[Offer]] = defaultdict(list)
    for offer in offers:
        by_machine[offer.machine_id].append(offer)
    out = []
    for host in knowledge:
        listed = by_machine.get(host.machine_id, [])
        match = next((o for o in listed if o.gpu_name == host.gpu_name and o.num_gpus == host.num_gpus),
                     next((o for o in listed if o.gpu_name == host.gpu_name), None))
        if match is None or not match.dlperf:
            continue    # no offer of it known: no dlperf to relate its measurement to
        prior = dlperf_prior_units_per_s(match, gpus=host.num_gpus, pivot=pivot) * (scale or 1.0)
        at = (inherited.profile_for(gpu_ram_mb=match.gpu_ram, gpu_count=host.num_gpus) if inherited is not None
              else None)
        seen = observation(host, prior_units_per_s=prior, now=now, at=at)
        if seen is not None:
            out.append(seen)
    return tuple(out)


def _known(knowledge: Sequence[HostKnowledge], offers: Sequence[Offer], manifest: Manifest, *,
           candidates: Sequence[Candidate], now: float | None) -> tuple[KnownHost, ...]:
    """Each host this workload ran on before: its measurements, and its cost per unit at today's price."""
    by_machine = {o.machine_id: o for o in offers}
    reverified = {c.offer.machine_id for c in candidates if c.reverified is not None}
    out = []
    for host in knowledge:
        offer = by_machine.get(host.machine_id)
        thetas = last_profile_throughputs(host)
        cost = None
        if offer is not None and thetas and offer.dph_total > 0:
            pull = predicted_pull_s(offer, image_size_gb=manifest.workload.image_size_gb)
            cost = cost_per_accepted_unit(prior_inputs(offer, pull_s=pull, manifest=manifest),
                                          units=manifest.production_units,
                                          throughput_units_per_s=statistics.median(thetas))
        out.append(known_host(host, now=now, listed=offer is not None, cost_per_unit_usd=cost,
                              reverified=host.machine_id in reverified))
    return tuple(sorted(out, key=lambda k: (k.cost_per_unit_usd is None, k.cost_per_unit_usd or 0.0,
                                            k.machine_id)))


def build_plan(*, campaign_id: str, manifest: Manifest, offers: Sequence[Offer], knowledge: Sequence[HostKnowledge],
               bad_hosts: Sequence[BadHost], now: float | None = None,
               inherited: InheritedScreening | None = None, inherited_note: str = "",
               seen: Sequence[Offer] = ()) -> Plan:
    """Shortlist ``offers`` for ``manifest``: filters re-checked client-side, bad hosts shown and skipped.

    ``knowledge`` is what earlier campaigns measured of this workload (the store's ``host_knowledge``): a known
    host's prior is its measurement, the plan lists what is known, and with ``now`` (the market's clock) a host
    measured within the manifest's ``reverify_max_age_days`` is re-verified rather than raced from scratch and
    older measurements count for less in the calibrated prior's history (campaign/repeat.py). Without ``now``
    nothing is re-verified and history counts in full. ``inherited``: an earlier campaign's screening of the
    workload, raced at instead of screening (dropped, with why in ``inherited_note``, when the manifest no longer
    allows it); a host is re-verified only on earlier runs at the profile it is raced at. ``seen``: the last offer
    an earlier campaign saw of a known host that is not listed now (the store's offer snapshots): its dlperf still
    relates the host's measurements to the prior, so the calibration keeps them (it is never rented from them)."""
    if inherited is not None and (why := inherited.unusable(manifest)) is not None:
        inherited, inherited_note = None, f"not inherited: {why}"
    bad = {b.machine_id: b for b in bad_hosts if not b.is_expired}
    known = {k.machine_id: k for k in knowledge}
    filters = numeric_filters(manifest.shortlist.query)
    excluded: list[Excluded] = []
    kept: list[Offer] = []
    for offer in offers:
        reason = _rejection(offer, manifest, bad, filters)
        if reason:
            excluded.append(Excluded(offer.id, offer.machine_id, reason))
        else:
            kept.append(offer)
    pivot = dlperf_pivot(kept)
    listed = {o.machine_id for o in offers}
    described = [*offers, *(o for o in seen if o.machine_id not in listed)]   # for dlperf only
    scale = workload_scale(knowledge, {o.machine_id: o for o in described}, pivot=pivot,
                           profile_of=lambda offer, gpus: _raced_at(offer, gpus, manifest, inherited))
    history = _history(knowledge, described, pivot=pivot, scale=scale, now=now, inherited=inherited)
    calibration = Calibration.fit(history) if len(history) >= CALIBRATED_AT else None
    scored = [_score(offer, manifest, known, scale, pivot=pivot, now=now, calibration=calibration,
                     inherited=inherited) for offer in kept]
    chosen, rest = _pick(scored, max_candidates=manifest.shortlist.max_candidates,
                         min_hosts=manifest.shortlist.min_hosts_per_model)
    chosen, rest = _cover_gpu_counts(chosen, rest, counts=manifest.tuning.gpu_counts,
                                     max_candidates=manifest.shortlist.max_candidates,
                                     min_hosts=manifest.shortlist.min_hosts_per_model)
    chosen, rest = _incumbent_first(chosen, rest, max_candidates=manifest.shortlist.max_candidates,
                                    min_hosts=manifest.shortlist.min_hosts_per_model)
    candidates = tuple(_candidate(i + 1, item, manifest, rank_note=f"prior rank {i + 1}")
                       for i, item in enumerate(chosen))
    reserves = tuple(_candidate(len(candidates) + i + 1, item, manifest, rank_note="reserve")
                     for i, item in enumerate(rest[:manifest.shortlist.max_candidates]))
    wave = first_wave(candidates, manifest=manifest, calibrated=len(history) >= CALIBRATED_AT)
    return Plan(
        campaign_id=campaign_id, manifest_digest=manifest.digest, query=manifest.shortlist.query,
        candidates=candidates, reserves=reserves, excluded=tuple(excluded), budget_usd=manifest.budget.max_usd,
        max_instances=manifest.budget.max_instances,
        expected_spend_usd=sum(c.expected_spend_usd for c in candidates),
        spend_upper_bound_usd=min(manifest.budget.max_usd, sum(c.max_spend_usd for c in candidates)),
        history=history, first_wave=wave, outlook=wave_outlook(candidates, wave, manifest=manifest),
        known=_known(knowledge, offers, manifest, candidates=candidates, now=now),
        bad_hosts=tuple(bad.values()), reverify_max_age_days=manifest.race.reverify_max_age_days,
        inherited=inherited, inherited_note=inherited_note,
    )


def render_plan(plan: Plan) -> str:
    """The plan as the operator approves it: candidates, $/h, spend expected and capped, deadlines."""
    lines = [f"campaign {plan.campaign_id}  workload {plan.manifest_digest[:19]}  query: {plan.query or '(none)'}",
             f"{'id':<4} {'offer':>9} {'machine':>8} {'gpu':<14} {'$/h':>7} {'prior u/s':>10} {'cap':>7}  hypothesis"]
    for c in plan.candidates:
        lines.append(f"{c.candidate_id:<4} {c.offer.id:>9} {c.offer.machine_id:>8} {c.offer.gpu_name:<14} "
                     f"{c.offer.dph_total:>7.3f} {c.prior_throughput_units_per_s:>10.0f} {c.time_cap_s / 60:>5.0f}m"
                     f"  {c.hypothesis}")
    lines.extend(render_known(plan))
    if plan.reserves:
        lines.append(f"reserves (rented only in a candidate's place: its offer vanished, or it was passed over): "
                     f"{', '.join(str(r.offer.id) for r in plan.reserves)}")
    if plan.excluded:
        lines.append(f"excluded: {len(plan.excluded)} offers, e.g. "
                     + "; ".join(f"{e.offer_id}: {e.reason}" for e in plan.excluded[:3]))
    if plan.first_wave and plan.outlook is not None:
        lines.append(f"first wave: {', '.join(plan.first_wave)}; {plan.outlook.describe()}")
    lines.append(f"expected benchmark spend ${plan.expected_spend_usd:.2f}, at most ${plan.spend_upper_bound_usd:.2f}"
                 f" (budget ${plan.budget_usd:.2f}, {plan.max_instances} instances at once); every instance is "
                 f"destroyed by its deadline and at the end")
    return "\n".join(lines)


KNOWN_SHOWN = 12    # hosts listed by name in the plan's "known" section (the rest counted)
BAD_SHOWN = 5


def render_known(plan: Plan) -> list[str]:
    """The plan's "known from earlier campaigns" section: hosts measured for this workload (runs, median
    throughput, cost per unit at today's price, age of the last measurement, re-verified or not) and bad hosts."""
    age_rule = (f"re-verified when last measured within {plan.reverify_max_age_days:g} days"
                if plan.reverify_max_age_days is not None else "")
    if not plan.known:
        lines = ["known from earlier campaigns of this workload: no host measured yet (every candidate is raced "
                 "from scratch)"]
    else:
        reverified = {c.offer.machine_id: c.candidate_id for c in plan.candidates if c.reverified is not None}
        lines = [f"known from earlier campaigns of this workload: {len(plan.known)} host(s) measured, "
                 f"{sum(k.listed for k in plan.known)} listed now, {len(reverified)} re-verified in this plan"
                 + (f" ({age_rule})" if age_rule else ""),
                 f"  {'machine':>8} {'gpu':<18} {'ok/runs':>7} {'median u/s':>10} {'$/1k units':>10} "
                 f"{'measured':>13}  now"]
        for k in plan.known[:KNOWN_SHOWN]:
            cost = f"{1e3 * k.cost_per_unit_usd:>10.4f}" if k.cost_per_unit_usd is not None else f"{'-':>10}"
            theta = f"{k.median_units_per_s:>10.1f}" if k.median_units_per_s is not None else f"{'-':>10}"
            age = f"{k.age_days:.1f} days ago" if k.age_days is not None else "age unknown"
            if k.machine_id in reverified:
                state = f"re-verified as {reverified[k.machine_id]}"
            elif not k.listed:
                state = "not listed"
            elif any(c.offer.machine_id == k.machine_id for c in plan.candidates):
                state = "shortlisted, raced from scratch"
            else:
                state = "listed, not shortlisted"
            lines.append(f"  {k.machine_id:>8} {f'{k.gpu_name} x{k.num_gpus}':<18} {f'{k.ok_runs}/{k.runs}':>7} "
                         f"{theta} {cost} {age:>13}  {state}")
        if len(plan.known) > KNOWN_SHOWN:
            lines.append(f"  ... and {len(plan.known) - KNOWN_SHOWN} more")
    if plan.inherited is not None:
        lines.append(f"  {plan.inherited.describe(now=None)}; no screening in this campaign (the leader "
                     f"confirms only what its trials left open); that screening: {'; '.join(plan.inherited.knobs) or 'no trials'}")
    elif plan.inherited_note:
        lines.append(f"  an earlier screening of this workload is {plan.inherited_note}: the knobs are screened again")
    if plan.history:
        lines.append(f"  the calibrated prior starts from {len(plan.history)} earlier measurement(s) of this workload "
                     f"(weight {sum(o.weight for o in plan.history):.1f} after ageing)")
    if plan.bad_hosts:
        shown = "; ".join(f"machine {b.machine_id}: {b.reason}" for b in plan.bad_hosts[:BAD_SHOWN])
        more = f"; ... and {len(plan.bad_hosts) - BAD_SHOWN} more" if len(plan.bad_hosts) > BAD_SHOWN else ""
        lines.append(f"bad hosts on record (never rented while flagged): {len(plan.bad_hosts)}: {shown}{more}")
    return lines
