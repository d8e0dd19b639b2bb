"""What a tuned profile is worth to the decision: its SLO certified at the profile production would run.

The race measures every candidate at the manifest's first profile; tuning then finds, on the leader's own instance,
changes that gain (A/B trials, ``vastui.bench.tuning``). When the race could not certify a candidate's SLO at the
first profile, the decision may certify it at the tuned one from that evidence (docs/method.md, Select).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from vastui.bench.manifest import Slo
from vastui.bench.select import Decision, Finalist, decide_profile
from vastui.bench.stats import Interval, Verdict, floor_verdict, latency_verdict
from vastui.bench.tuning import tuned_throughput


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


def decide_with_tuned_evidence(finalists: Sequence[Finalist], evidence: Mapping[str, TunedEvidence], *, slo: Slo,
                               units: int) -> tuple[Decision, tuple[str, ...]]:
    """``decide_profile`` over the finalists, each tuned one's SLO judged at its tuned profile where the race left
    it undecided; the ids so certified come back with the decision."""
    certified_finalists, certified = certify_at_tuned_profiles(finalists, evidence, slo=slo)
    return explain_tuned_certification(decide_profile(certified_finalists, units=units), certified), certified
