"""What earlier campaigns of this workload left in the store, as a new campaign's plan uses it (docs/method.md,
Repeat campaigns).

The store keeps every run keyed by (machine, GPU model, GPU count, workload digest). From it a plan learns three
things: which hosts it has measured and how they did (``KnownHost``, shown in the plan), which of the hosts it
shortlists were measured recently enough to be re-verified rather than raced from scratch (``Reverification``:
the canary and a few blocks, the earlier runs counted in the race as earlier independent runs), and how this
workload's throughput relates to the dlperf prior (``Observation``s for the calibrated prior,
``vastui.bench.calibration``), older measurements counting for less.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from vastui.bench.calibration import Observation
from vastui.bench.cost import CostInputs
from vastui.bench.manifest import MeasureRule
from vastui.bench.select import RaceCandidate
from vastui.bench.stats import Block
from vastui.bench.tuning import Profile
from vastui.store.records import HostKnowledge, Run, RunStatus

DAY_S = 86_400.0
# An earlier measurement's weight in the calibrated prior halves every HISTORY_HALF_LIFE_DAYS: a host's speed
# drifts (drivers, firmware, cooling, neighbours; docs/simulator.md: 5-35 % between hosts of one model) and the
# market's mix of hosts changes, so a month-old ratio of measured to dlperf says less about today than this
# campaign's own measurements. Two weeks matches the manifest's default re-verification age.
HISTORY_HALF_LIFE_DAYS = 14.0
# A re-verified host's earlier runs that count in the race (the most recent ones).
MAX_HISTORY_RUNS = 4
# A re-verified host needs this share of the manifest's minimum blocks (and of the winner's), at least
# REVERIFY_MIN_BLOCKS: enough fresh blocks to see that the host still does what it did, its earlier runs
# supplying the between-run evidence that separate fresh runs would otherwise have to buy.
REVERIFY_BLOCK_SHARE = 0.5
REVERIFY_MIN_BLOCKS = 2


def ok_runs(knowledge: HostKnowledge, *, at: Profile | None = None) -> list[Run]:
    """The host's runs that measured a throughput, oldest first (only those at profile ``at``, when given)."""
    return [r for r in knowledge.runs if r.status is RunStatus.OK and r.throughput_units_per_s
            and (at is None or Profile.from_json(r.variant_json) == at)]


def throughputs_at(knowledge: HostKnowledge, profile: Profile) -> tuple[float, ...]:
    """The host's OK throughputs at ``profile``, oldest first (a run at another profile says nothing of this one)."""
    return tuple(r.throughput_units_per_s or 0.0 for r in ok_runs(knowledge, at=profile))


def last_profile_throughputs(knowledge: HostKnowledge) -> tuple[float, ...]:
    """The host's OK throughputs at the profile its last OK run was measured at (after a screening, the screened
    one): a median over runs at fp32 and bf16 is the throughput of neither."""
    runs = ok_runs(knowledge)
    if not runs:
        return ()
    last = runs[-1].variant_json
    return tuple(r.throughput_units_per_s or 0.0 for r in runs if r.variant_json == last)


def measured_at(run: Run) -> float:
    return run.finished_at if run.finished_at is not None else run.started_at


def age_days(knowledge: HostKnowledge, *, now: float | None) -> float | None:
    """Days since the host's last measurement of this workload (None: never measured, or no ``now``)."""
    runs = ok_runs(knowledge)
    if not runs or now is None:
        return None
    return max(0.0, now - max(measured_at(r) for r in runs)) / DAY_S


def history_weight(age: float | None) -> float:
    """An earlier measurement's weight in the calibrated prior: 1 when fresh, halving every
    HISTORY_HALF_LIFE_DAYS (1 when the age is unknown: nothing says it is stale)."""
    return 1.0 if age is None else math.pow(0.5, age / HISTORY_HALF_LIFE_DAYS)


@dataclass(frozen=True, slots=True)
class Reverification:
    """A shortlisted host measured recently enough to be re-verified: what it is re-verified on."""

    throughputs_units_per_s: tuple[float, ...]   # its earlier OK runs' medians, most recent last
    campaign_ids: tuple[str, ...]
    age_days: float
    profile: Profile | None = None   # the profile those runs were measured at (and this campaign races it at)

    def describe(self) -> str:
        values = ", ".join(f"{t:.0f}" for t in self.throughputs_units_per_s)
        return (f"re-verified on {len(self.throughputs_units_per_s)} earlier run(s) ({values} u/s; campaigns "
                f"{', '.join(self.campaign_ids)}; last {self.age_days:.1f} days ago)")

    def evidence_rule(self, rule: MeasureRule) -> MeasureRule:
        """The manifest's evidence rule for this host: fewer fresh blocks, and each earlier run counts as one of
        the independent runs the rule asks for."""
        lowered = max(REVERIFY_MIN_BLOCKS, math.ceil(REVERIFY_BLOCK_SHARE * rule.min_blocks))
        return dataclasses.replace(
            rule, min_blocks=min(rule.min_blocks, lowered),
            winner_min_blocks=min(rule.winner_min_blocks,
                                  max(lowered, math.ceil(REVERIFY_BLOCK_SHARE * rule.winner_min_blocks))),
            min_runs=max(1, rule.min_runs - len(self.throughputs_units_per_s)))

    def history_blocks(self, rule: MeasureRule) -> tuple[Block, ...]:
        """One block per earlier run at that run's median throughput, each its own run (negative run numbers:
        before this campaign's runs 0, 1, ...): the race's run-aware bootstrap treats them as earlier runs."""
        steps = max(1, rule.block_min_steps)
        return tuple(Block(units=theta * rule.block_s, duration_s=rule.block_s, steps=steps, run=-(index + 1))
                     for index, theta in enumerate(reversed(self.throughputs_units_per_s)))


def reverification(knowledge: HostKnowledge, *, now: float | None, max_age_days: float,
                   profile: Profile | None = None) -> Reverification | None:
    """How ``knowledge``'s host is re-verified when raced at ``profile``, or None when it is raced from scratch:
    never measured OK at that profile (a run at another profile is not evidence of this one: bf16 may be twice
    fp32), no ``now`` to age it by, or its last such measurement older than ``max_age_days``. Without a
    ``profile`` every OK run counts."""
    runs = ok_runs(knowledge, at=profile)
    if not runs or now is None:
        return None
    age = max(0.0, now - max(measured_at(r) for r in runs)) / DAY_S
    if age > max_age_days:
        return None
    runs = runs[-MAX_HISTORY_RUNS:]
    return Reverification(throughputs_units_per_s=tuple(r.throughput_units_per_s or 0.0 for r in runs),
                          campaign_ids=tuple(dict.fromkeys(r.campaign_id for r in runs)), age_days=age,
                          profile=profile)


def race_candidate(candidate_id: str, cost: CostInputs, *, prior_units_per_s: float,
                   reverified: Reverification | None, rule: MeasureRule) -> RaceCandidate:
    """A planned candidate as the race takes it: a re-verified one with its earlier runs and its own rule."""
    if reverified is None:
        return RaceCandidate(candidate_id, cost, prior_units_per_s)
    return RaceCandidate(candidate_id, cost, prior_units_per_s, history=reverified.history_blocks(rule),
                         rule=reverified.evidence_rule(rule))


@dataclass(frozen=True, slots=True)
class KnownHost:
    """One host this workload ran on before, as the plan shows it."""

    machine_id: int
    gpu_name: str
    num_gpus: int
    runs: int
    ok_runs: int
    median_units_per_s: float | None
    age_days: float | None
    listed: bool                        # offered now (by machine)
    cost_per_unit_usd: float | None     # at its price now, with the measured throughput (None: not listed)
    reverified: bool                    # shortlisted and re-verified in this campaign


def known_host(knowledge: HostKnowledge, *, now: float | None, listed: bool, cost_per_unit_usd: float | None,
               reverified: bool) -> KnownHost:
    thetas = last_profile_throughputs(knowledge)
    return KnownHost(machine_id=knowledge.machine_id, gpu_name=knowledge.gpu_name, num_gpus=knowledge.num_gpus,
                     runs=knowledge.n_runs, ok_runs=knowledge.n_ok,
                     median_units_per_s=statistics.median(thetas) if thetas else None,
                     age_days=age_days(knowledge, now=now), listed=listed, cost_per_unit_usd=cost_per_unit_usd,
                     reverified=reverified)


def observation(knowledge: HostKnowledge, *, prior_units_per_s: float, now: float | None,
                at: Profile | None = None) -> Observation | None:
    """The host's earlier measurements as one observation for the calibrated prior: its median measured
    throughput (at profile ``at`` when given, else at the profile of its last run) against what the dlperf prior
    says of it, weighted down by age (``history_weight``)."""
    thetas = throughputs_at(knowledge, at) if at is not None else last_profile_throughputs(knowledge)
    if not thetas or prior_units_per_s <= 0.0:
        return None
    return Observation(model=f"{knowledge.gpu_name} x{knowledge.num_gpus}", prior_units_per_s=prior_units_per_s,
                       measured_units_per_s=statistics.median(thetas),
                       weight=history_weight(age_days(knowledge, now=now)))
