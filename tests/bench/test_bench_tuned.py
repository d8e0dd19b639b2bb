"""The decision leans on a tuned profile's kept gains to certify a throughput floor, and on nothing less."""

from __future__ import annotations

from vastui.bench.cost import CostInputs, cost_interval
from vastui.bench.manifest import LatencyCeiling, Slo
from vastui.bench.select import Finalist, decide_profile
from vastui.bench.stats import Interval, Verdict
from vastui.bench.tuned import (
    TunedEvidence,
    certify_at_tuned_profiles,
    decide_with_tuned_evidence,
    explain_tuned_certification,
)
from vastui.bench.tuning import tuned_throughput

FLOOR = Slo(throughput_min_units_per_s=40.0)
UNITS = 10_000


def _finalist(cid: str, *, price: float, throughput: Interval, slo: Verdict, eliminated: bool = False) -> Finalist:
    cost = CostInputs(price_per_hour_usd=price, startup_s=60.0)
    return Finalist(cid, cost, throughput, cost_interval(cost, units=UNITS, throughput=throughput), slo, True,
                    eliminated)


# The knife-edge: cheapest, 5 % over the floor in truth, its interval reaching just below it after two runs.
EDGE = _finalist("edge", price=0.22, throughput=Interval(41.5, 39.4, 43.6, 0.95, 10), slo=Verdict.UNDECIDED)
DEAR = _finalist("dear", price=0.90, throughput=Interval(80.0, 77.0, 83.0, 0.95, 10), slo=Verdict.MET)
BF16 = Interval(0.40, 0.30, 0.50, 0.95, 5)   # a kept change: +40 % [+30 %, +50 %]
KEPT = TunedEvidence((BF16,))


def test_a_knife_edge_whose_kept_gains_clear_the_floor_is_certified_and_chosen_and_the_reason_says_so() -> None:
    assert decide_profile([EDGE, DEAR], units=UNITS).chosen == "dear"   # the race alone cannot certify it
    finalists, certified = certify_at_tuned_profiles([EDGE, DEAR], {"edge": KEPT}, slo=FLOOR)
    assert certified == ("edge",)
    assert [f.slo for f in finalists] == [Verdict.MET, Verdict.MET]
    decision, certified = decide_with_tuned_evidence([EDGE, DEAR], {"edge": KEPT}, slo=FLOOR, units=UNITS)
    assert decision.chosen == "edge" and decision.slo_met and certified == ("edge",)
    assert "certified at its tuned profile" in decision.reason
    assert decision.runner_up == "dear" and decision.runner_up_comparable
    # The low bounds compound: 39.4 x 1.30, not the point's 41.5 x 1.40.
    assert tuned_throughput(EDGE.throughput, (BF16,)).low == 39.4 * 1.30


def test_gains_whose_low_bounds_stay_under_the_floor_certify_nothing() -> None:
    small = Interval(0.03, 0.01, 0.05, 0.95, 5)   # 39.4 x 1.01 = 39.8: still under 40
    finalists, certified = certify_at_tuned_profiles([EDGE, DEAR], {"edge": TunedEvidence((small,))}, slo=FLOOR)
    assert certified == () and finalists[0].slo is Verdict.UNDECIDED
    # ... but two of them compound past it: 39.4 x 1.01 x 1.01 = 40.19.
    assert certify_at_tuned_profiles([EDGE], {"edge": TunedEvidence((small, small))}, slo=FLOOR)[1] == ("edge",)


def test_no_gains_an_eliminated_violating_or_unconstrained_finalist_certify_nothing() -> None:
    assert certify_at_tuned_profiles([EDGE], {}, slo=FLOOR)[1] == ()
    assert certify_at_tuned_profiles([EDGE], {"edge": TunedEvidence(())}, slo=FLOOR)[1] == ()
    out = _finalist("out", price=0.22, throughput=EDGE.throughput, slo=Verdict.UNDECIDED, eliminated=True)
    assert certify_at_tuned_profiles([out], {"out": KEPT}, slo=FLOOR)[1] == ()
    slow = _finalist("slow", price=0.1, throughput=Interval(30.0, 29.0, 31.0, 0.95, 10), slo=Verdict.VIOLATED)
    assert certify_at_tuned_profiles([slow], {"slow": KEPT}, slo=FLOOR)[1] == ()
    assert certify_at_tuned_profiles([EDGE], {"edge": KEPT}, slo=Slo())[1] == ()


P90 = Slo(throughput_min_units_per_s=40.0, latency=LatencyCeiling(percentile=90, max_ms=5000.0))


def test_with_a_latency_ceiling_the_steps_at_the_tuned_profile_must_certify_it_too() -> None:
    fast_steps = tuple(1800.0 for _ in range(60))   # 60 steps, none over: p90 certified at 99 %
    assert certify_at_tuned_profiles([EDGE], {"edge": TunedEvidence((BF16,), fast_steps)}, slo=P90)[1] == ("edge",)
    for steps in [(), fast_steps[:20],                      # too few steps to certify a p90 at 99 %
                  (*fast_steps, *(6000.0 for _ in range(8)))]:   # 8 of 68 over 5 s: not certified
        finalists, certified = certify_at_tuned_profiles([EDGE], {"edge": TunedEvidence((BF16,), steps)}, slo=P90)
        assert certified == () and finalists[0].slo is Verdict.UNDECIDED, len(steps)
    # The latency alone is not enough: gains too small to clear the floor certify nothing.
    small = TunedEvidence((Interval(0.03, 0.01, 0.05, 0.95, 5),), fast_steps)
    assert certify_at_tuned_profiles([EDGE], {"edge": small}, slo=P90)[1] == ()


def test_the_reason_is_left_alone_when_the_chosen_was_certified_by_the_race() -> None:
    decision = decide_profile([DEAR], units=UNITS)
    assert explain_tuned_certification(decision, ("edge",)) == decision


# Two certified machines: the race ranks PLAIN cheaper at the profile it was raced at; TUNED, tuned on its own
# instance, keeps a change that gains 40 % [30 %, 50 %], which makes it the cheaper at the profile production runs.
PLAIN = _finalist("plain", price=0.50, throughput=Interval(60.0, 58.0, 62.0, 0.95, 10), slo=Verdict.MET)
TUNED = _finalist("tuned", price=0.60, throughput=Interval(60.0, 58.0, 62.0, 0.95, 10), slo=Verdict.MET)


def test_a_tuned_finalist_is_priced_at_its_tuned_profile_and_chosen_when_that_is_cheaper() -> None:
    assert decide_profile([PLAIN, TUNED], units=UNITS).chosen == "plain"
    decision, certified = decide_with_tuned_evidence([PLAIN, TUNED], {"tuned": KEPT}, slo=FLOOR, units=UNITS)
    assert decision.chosen == "tuned" and decision.runner_up == "plain" and certified == ()
    # its cost is the one at the tuned profile, low bounds compounded (the upper bound of cost from 58 x 1.30)
    at_tuned = cost_interval(TUNED.cost, units=UNITS, throughput=tuned_throughput(TUNED.throughput, (BF16,)))
    assert decision.chosen_cost == at_tuned and decision.chosen_cost.high < PLAIN.cost_per_unit.high
    assert decision.runner_up_cost == PLAIN.cost_per_unit
    assert "tuned at its tuned profile" in decision.reason


def test_a_gain_too_small_to_overtake_leaves_the_choice_and_names_only_the_tuned_one() -> None:
    small = TunedEvidence((Interval(0.05, 0.02, 0.08, 0.95, 5),))   # 1.02 x is not 1.2 x cheaper per hour
    decision, _ = decide_with_tuned_evidence([PLAIN, TUNED], {"tuned": small}, slo=FLOOR, units=UNITS)
    assert decision.chosen == "plain" and decision.runner_up == "tuned"
    assert "(tuned at its tuned profile" in decision.reason and "plain at" not in decision.reason
    # a runner-up priced at its tuned profile is compared as such: the margin is against its tuned cost
    assert decision.runner_up_cost == cost_interval(TUNED.cost, units=UNITS,
                                                    throughput=tuned_throughput(TUNED.throughput, small.gains))


def test_an_eliminated_or_untuned_finalist_is_priced_at_its_race_profile() -> None:
    out = _finalist("tuned", price=0.60, throughput=TUNED.throughput, slo=Verdict.MET, eliminated=True)
    decision, _ = decide_with_tuned_evidence([PLAIN, out], {"tuned": KEPT}, slo=FLOOR, units=UNITS)
    assert decision.chosen == "plain" and decision.runner_up_cost == out.cost_per_unit
    assert "tuned profile" not in decision.reason
    decision, _ = decide_with_tuned_evidence([PLAIN, TUNED], {"tuned": TunedEvidence(())}, slo=FLOOR, units=UNITS)
    assert decision.chosen == "plain" and decision.runner_up_cost == TUNED.cost_per_unit
