"""What a tuned profile is worth to the decision: its cost, and its SLO, at the profile production would run.

The race measures every candidate at its race profile; tuning then finds, on the leader's own instance, changes
that gain (A/B trials, ``vastui.bench.tuning``). The decision prices a tuned finalist at its tuned profile from that
evidence, and when the race could not certify its SLO, may certify it there (docs/method.md, Select).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from vastui.bench.manifest import Slo
from vastui.bench.select import Decision, Finalist, decide_profile
from vastui.bench.stats import Interval, Verdict, floor_verdict, latency_verdict
from vastui.bench.tuning import tuned_cost_estimate, tuned_throughput


@dataclass(frozen=True, slots=True)
class TunedEvidence:
    """What tuning saw of a candidate's tuned profile, on its own instance."""

    gains: tuple[Interval, ...]              # every kept change's gain, each relative to the profile it changed
    latencies_ms: tuple[float, ...] = ()     # the steps run at the tuned profile


def certify_at_tuned_profiles(finalists: Sequence[Finalist], evidence: Mapping[str, TunedEvidence], *,
                              slo: Slo) -> tuple[tuple[Finalist, ...], tuple[str, ...]]:
    """Finalists whose SLO the race left undecided, certified at the profile production would run: a tuned one
    whose tuned throughput (``tuned_throughput``) clears the floor at its low end and whose steps at the tuned
    profile certify the latency ceiling (``latency_verdict``, the race's own rule). A knife-edge at the first
    profile (true speed 5 % over the floor, its interval reaching just below it) is often far clear of it once
    tuned, and the receipt recommends the tuned profile. Nothing else changes: a finalist the race certified or
    showed to violate the SLO, or one eliminated, keeps its verdict. Returns the finalists and the ids certified."""
    if slo.throughput_min_units_per_s is None and slo.latency is None:
        return tuple(finalists), ()
    out: list[Finalist] = []
    certified: list[str] = []
    for f in finalists:
        seen = evidence.get(f.candidate_id)
        if (seen is not None and seen.gains and f.slo is Verdict.UNDECIDED and f.is_measured
                and not f.is_eliminated and _meets(slo, tuned_throughput(f.throughput, seen.gains), seen)):
            f = replace(f, slo=Verdict.MET)
            certified.append(f.candidate_id)
        out.append(f)
    return tuple(out), tuple(certified)


def _meets(slo: Slo, throughput: Interval, seen: TunedEvidence) -> bool:
    floor, ceiling = slo.throughput_min_units_per_s, slo.latency
    return ((floor is None or floor_verdict(throughput, floor=floor) is Verdict.MET)
            and (ceiling is None or latency_verdict(seen.latencies_ms, percentile_q=ceiling.percentile,
                                                    max_ms=ceiling.max_ms) is Verdict.MET))


def explain_tuned_certification(decision: Decision, certified: Sequence[str]) -> Decision:
    """The decision's reason, saying so when the chosen profile's SLO was certified at its tuned profile."""
    if decision.chosen is None or decision.chosen not in certified:
        return decision
    return replace(decision, reason=f"{decision.reason}; its SLO certified at its tuned profile (throughput: the "
                                    f"race's times the kept A/B gains, low bounds compounded; latency: the steps "
                                    f"run at that profile)")


def priced_at_tuned_profiles(finalists: Sequence[Finalist], evidence: Mapping[str, TunedEvidence], *,
                             units: int) -> tuple[tuple[Finalist, ...], tuple[str, ...]]:
    """Each finalist at the profile production would run on it: a tuned one (measured, still in the race, a change
    kept) at its tuned profile — its throughput the race's times the kept gains, low bounds compounded
    (``tuned_throughput``), its cost at N from that — every other at its race profile. Comparing a tuned leader's
    race-profile cost would hide what tuning found (seen in the decision benchmark: an RTX 5090 tuned to eight
    loaders, compared at four, lost to a machine 48 % dearer at the profile production runs). Returns the finalists
    and the ids priced at their tuned profile."""
    out: list[Finalist] = []
    tuned: list[str] = []
    for f in finalists:
        seen = evidence.get(f.candidate_id)
        if seen is not None and seen.gains and f.is_measured and not f.is_eliminated:
            f = replace(f, throughput=tuned_throughput(f.throughput, seen.gains),
                        cost_per_unit=tuned_cost_estimate(f.cost, throughput=f.throughput, gains=seen.gains,
                                                          units=units))
            tuned.append(f.candidate_id)
        out.append(f)
    return tuple(out), tuple(tuned)


def explain_tuned_prices(decision: Decision, tuned: Sequence[str]) -> Decision:
    """The decision's reason, saying which of the chosen and the runner-up were priced at their tuned profile."""
    named = [cid for cid in (decision.chosen, decision.runner_up) if cid is not None and cid in tuned]
    if not named:
        return decision
    return replace(decision, reason=f"{decision.reason}; each at the profile production would run on it "
                                    f"({', '.join(named)} at its tuned profile: the race's throughput times the kept "
                                    f"A/B gains, low bounds compounded)")


def decide_with_tuned_evidence(finalists: Sequence[Finalist], evidence: Mapping[str, TunedEvidence], *, slo: Slo,
                               units: int) -> tuple[Decision, tuple[str, ...]]:
    """``decide_profile`` over the finalists, each at the profile production would run on it (a tuned one at its
    tuned profile, ``priced_at_tuned_profiles``), each tuned one's SLO judged at that profile where the race left it
    undecided; the ids so certified come back with the decision."""
    certified_finalists, certified = certify_at_tuned_profiles(finalists, evidence, slo=slo)
    priced, tuned = priced_at_tuned_profiles(certified_finalists, evidence, units=units)
    decision = explain_tuned_prices(decide_profile(priced, units=units), tuned)
    return explain_tuned_certification(decision, certified), certified
