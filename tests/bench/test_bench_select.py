"""Racing and the decision: when candidates are eliminated, when the race stops, what is chosen and why."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vastui.bench.cost import CostInputs, cost_per_accepted_unit
from vastui.bench.manifest import LatencyCeiling, MeasureRule, Slo
from vastui.bench.select import EliminationReason, Finalist, Race, RaceCandidate, RaceEnd, decide_profile
from vastui.bench.stats import Block, Interval, Verdict

CHEAP = CostInputs(price_per_hour_usd=1.0, startup_s=120.0)
# The racing logic on its own: blocks as the only source of variation (no between-run prior).
BLOCKS_ONLY = MeasureRule(run_cv_prior=0.0)


def block(theta: float, *, latencies_ms: tuple[float, ...] = (), run: int = 0) -> Block:
    return Block(units=theta * 30.0, duration_s=30.0, steps=30, latencies_ms=latencies_ms, run=run)


def run_rounds(race: Race, thetas: dict[str, float], rounds: int, *, noise: float = 0.0, seed: int = 0) -> None:
    rng = random.Random(seed)
    for _ in range(rounds):
        for cid in race.active:
            race.add_block(cid, block(thetas[cid] * (1.0 + rng.gauss(0.0, noise))))


def test_no_elimination_before_min_blocks_then_the_clearly_worse_goes() -> None:
    race = Race([RaceCandidate("a", CHEAP), RaceCandidate("b", CHEAP)], units=100_000, resamples=500)
    run_rounds(race, {"a": 100.0, "b": 60.0}, 4, noise=0.02)
    step = race.decide()
    assert step.eliminated == () and not step.finished and step.leader == "a"
    run_rounds(race, {"a": 100.0, "b": 60.0}, 1, noise=0.02)
    step = race.decide()
    assert [e.candidate_id for e in step.eliminated] == ["b"]
    assert step.eliminated[0].reason is EliminationReason.COST and "Holm" in step.eliminated[0].detail
    assert step.active == ("a",) and not step.finished  # the winner needs 10 blocks of evidence
    run_rounds(race, {"a": 100.0}, 5, noise=0.02)
    step = race.decide()
    assert step.ended is RaceEnd.ONE_REMAINS and step.leader == "a"


def test_holm_levels_step_down_over_challengers() -> None:
    candidates = [RaceCandidate(cid, CHEAP) for cid in "abcd"]
    race = Race(candidates, units=100_000, resamples=500)
    run_rounds(race, {"a": 100.0, "b": 50.0, "c": 40.0, "d": 30.0}, 5)
    step = race.decide()
    assert {e.candidate_id for e in step.eliminated} == {"b", "c", "d"}
    levels = sorted(e.detail.split("Holm level ")[1].split(",")[0] for e in step.eliminated)
    assert levels == ["0.0167", "0.0250", "0.0500"]  # alpha/3, alpha/2, alpha/1


def test_close_noisy_candidates_are_not_eliminated_early() -> None:
    race = Race([RaceCandidate("a", CHEAP), RaceCandidate("b", CHEAP)], units=100_000, resamples=500)
    run_rounds(race, {"a": 100.0, "b": 99.0}, 5, noise=0.05, seed=4)
    assert race.decide().eliminated == ()


def test_indifference_zone_stops_the_race_between_equals() -> None:
    # Equals on steady hosts: a between-run prior of 0.2 %, and each candidate's two runs agree within it.
    race = Race([RaceCandidate("a", CHEAP), RaceCandidate("b", CHEAP)], units=100_000, resamples=500,
                measure=MeasureRule(run_cv_prior=0.002))
    rng = random.Random(3)
    for rounds in range(1, 31):
        for cid, theta in (("a", 100.0), ("b", 100.5)):
            race.add_block(cid, block(theta * (1.0 + rng.gauss(0.0, 0.001)), run=0 if rounds <= 5 else 1))
        step = race.decide()
        if step.finished:
            break
    assert step.ended is RaceEnd.WITHIN_MARGIN and "within 3 %" in step.reason   # the words say the margin
    assert rounds >= 10  # never before the winner's minimum evidence
    assert set(step.active) == {"a", "b"}


def test_equals_with_the_default_between_run_prior_do_not_stop_within_the_margin() -> None:
    # Two runs each cannot show that hosts 4 % noisy from run to run are within 3 % of each other: the race
    # measures on (more runs or its block cap), though more blocks of the same runs would look certain.
    race = Race([RaceCandidate("a", CHEAP), RaceCandidate("b", CHEAP)], units=100_000, resamples=500)
    for rounds in range(1, 16):
        for cid, theta in (("a", 100.0), ("b", 100.5)):
            race.add_block(cid, block(theta, run=0 if rounds <= 5 else 1))
        assert not race.decide().finished


def _two_runs(race: Race, cid: str, first: float, second: float, *, blocks: int = 5) -> None:
    for theta in (first, second):
        for _ in range(blocks):
            race.add_block(cid, block(theta, run=0 if theta is first else 1))


def _leader_and_rival(rival_runs: tuple[float, float]) -> Race:
    """A leader at 100 units/s in two agreeing runs and a rival whose runs have a median of 90 (about 10 %
    dearer: not separated from the leader, and clear of the 3 % zone when its runs agree with the 4 % prior)."""
    race = Race([RaceCandidate("lead", CHEAP), RaceCandidate("rival", CHEAP)], units=100_000, resamples=1000)
    _two_runs(race, "lead", 99.8, 100.2)
    _two_runs(race, "rival", *rival_runs)
    return race


def test_a_rival_whose_two_runs_agree_ends_the_race_within_the_margin() -> None:
    step = _leader_and_rival((89.6, 90.4)).decide()
    assert step.eliminated == () and step.leader == "lead"
    assert step.ended is RaceEnd.WITHIN_MARGIN and step.rerun == ()


def test_a_rival_whose_two_runs_disagree_cannot_end_the_race_and_gets_another_run() -> None:
    # Same median, but the runs are 13 % apart (a noisy host): the prior's 4 % cannot stand in for its next run.
    race = _leader_and_rival((84.0, 96.0))
    step = race.decide()
    assert step.eliminated == () and step.leader == "lead"
    assert step.ended is RaceEnd.MEASURING and step.rerun == ("rival",)
    for _ in range(5):                       # more blocks of the same runs change nothing
        race.add_block("rival", block(96.0, run=1))
        race.add_block("lead", block(100.0, run=1))
    step = race.decide()
    assert step.ended is RaceEnd.MEASURING and step.rerun == ("rival",)


def test_a_candidate_with_one_run_cannot_end_the_race_within_the_margin() -> None:
    race = Race([RaceCandidate("lead", CHEAP), RaceCandidate("rival", CHEAP)], units=100_000, resamples=1000)
    _two_runs(race, "lead", 99.8, 100.2)
    for _ in range(10):
        race.add_block("rival", block(90.0))          # its deadline left no room for a second run
    step = race.decide()
    assert step.ended is RaceEnd.MEASURING and step.rerun == ("rival",)


def test_budget_and_block_cap_stop_the_race() -> None:
    race = Race([RaceCandidate("a", CHEAP), RaceCandidate("b", CHEAP)], units=1000, budget_usd=2.0,
                measure=MeasureRule(min_blocks=2, winner_min_blocks=3, max_blocks=4), resamples=200)
    run_rounds(race, {"a": 100.0, "b": 100.0}, 1, noise=0.3)
    assert not race.decide(spent_usd=1.99).finished
    step = race.decide(spent_usd=2.0)
    assert step.ended is RaceEnd.BUDGET_SPENT
    for seed in (9, 10):
        run_rounds(race, {"a": 100.0, "b": 100.0}, 1, noise=0.3, seed=seed)
        assert not race.decide(spent_usd=0.5).finished  # 30 % noise: neither separated nor within 3 %
    run_rounds(race, {"a": 100.0, "b": 100.0}, 1, noise=0.3, seed=11)
    step = race.decide(spent_usd=0.5)
    assert step.ended is RaceEnd.MAX_BLOCKS and "4 blocks" in step.reason


def test_slo_floor_and_latency_ceiling_eliminate() -> None:
    slo = Slo(throughput_min_units_per_s=80.0, latency=LatencyCeiling(percentile=99.0, max_ms=50.0))
    race = Race([RaceCandidate("slow", CHEAP), RaceCandidate("laggy", CHEAP), RaceCandidate("good", CHEAP)],
                units=100_000, slo=slo, resamples=300, measure=BLOCKS_ONLY)
    for _ in range(5):
        race.add_block("slow", block(60.0, latencies_ms=(10.0,) * 100))
        race.add_block("laggy", block(100.0, latencies_ms=(10.0,) * 95 + (90.0,) * 5))
        race.add_block("good", block(90.0, latencies_ms=(10.0,) * 100))
    step = race.decide()
    assert {(e.candidate_id, e.reason) for e in step.eliminated} == {("slow", EliminationReason.SLO),
                                                                      ("laggy", EliminationReason.SLO)}
    good = next(s for s in race.standings() if s.candidate_id == "good")
    assert good.slo is Verdict.MET and good.blocks == 5  # 500 latencies under the bound certify p99 (>= 459)


def test_excluded_candidates_are_out() -> None:
    race = Race([RaceCandidate("a", CHEAP), RaceCandidate("b", CHEAP), RaceCandidate("c", CHEAP)], units=1000)
    race.add_block("a", block(10.0))
    race.exclude("b", reason=EliminationReason.FAILED, detail="canary digest mismatch")
    assert race.active == ("a", "c")
    standing = next(s for s in race.standings() if s.candidate_id == "b")
    assert standing.elimination is not None and standing.elimination.reason is EliminationReason.FAILED
    assert {f.candidate_id for f in race.finalists()} == {"a"}  # c has nothing known yet, b failed
    race.exclude("c", reason=EliminationReason.THROTTLED, detail="thermal")
    race.exclude("a", reason=EliminationReason.FAILED, detail="readiness deadline")
    assert race.decide().finished and not race.active


# --- the worked example through the race and the decision ---------------------------------------------------------
FAST = CostInputs(price_per_hour_usd=2.00, startup_s=960.0, warmup_s=40.0, inet_usd_per_gb=0.04, transfer_gb_fixed=18.0)
SLOW = CostInputs(price_per_hour_usd=0.60, startup_s=150.0, warmup_s=50.0, inet_usd_per_gb=0.002,
                  transfer_gb_fixed=18.0)


@pytest.mark.parametrize(("units", "chosen", "runner_up"), [(20_000, "slow", "fast"), (2_000_000, "fast", "slow")])
def test_race_and_decision_on_the_classic_trap(units: int, chosen: str, runner_up: str) -> None:
    race = Race([RaceCandidate("fast", FAST), RaceCandidate("slow", SLOW)], units=units, resamples=300,
                measure=BLOCKS_ONLY)
    run_rounds(race, {"fast": 120.0, "slow": 30.0}, 10)
    step = race.decide()
    assert step.leader == chosen and step.finished
    decision = decide_profile(race.finalists(), units=units)
    assert (decision.chosen, decision.runner_up) == (chosen, runner_up)
    assert decision.break_even_units == pytest.approx(1_302_720, rel=1e-12)
    assert decision.slo_met and not decision.provisional and decision.margin is not None and decision.margin > 0


def finalist(cid: str, point: float, low: float, high: float, *, slo: Verdict = Verdict.MET, measured: bool = True,
             eliminated: bool = False) -> Finalist:
    # cost per unit = 1/theta for this price (3600 $/h, no startup), so build throughput from the cost interval
    cost = CostInputs(price_per_hour_usd=3600.0, startup_s=0.0)
    theta = Interval(1 / point, 1 / high, 1 / low, 0.95, 10)
    return Finalist(cid, cost, theta, Interval(point, low, high, 0.95, 10), slo, measured, eliminated)


def test_decision_takes_the_lowest_upper_bound_not_the_lowest_point() -> None:
    risky = finalist("risky", 1.00, 0.70, 1.40)
    steady = finalist("steady", 1.05, 1.00, 1.10)
    decision = decide_profile([risky, steady], units=100)
    assert (decision.chosen, decision.runner_up) == ("steady", "risky")
    assert decision.margin == pytest.approx(1.40 / 1.10 - 1)
    assert decision.slo_met and not decision.provisional


def test_decision_prefers_certified_never_violated_and_says_provisional() -> None:
    cheap_violating = finalist("violating", 0.5, 0.4, 0.6, slo=Verdict.VIOLATED)
    undecided = finalist("undecided", 0.8, 0.7, 0.9, slo=Verdict.UNDECIDED)
    certified = finalist("certified", 1.0, 0.9, 1.1)
    prior_only = finalist("prior", 0.9, 0.9, 0.9, slo=Verdict.UNDECIDED, measured=False)
    decision = decide_profile([cheap_violating, undecided, certified, prior_only], units=100)
    assert decision.chosen == "certified" and decision.slo_met and decision.provisional
    decision = decide_profile([cheap_violating, undecided], units=100)
    assert decision.chosen == "undecided" and not decision.slo_met and not decision.provisional
    decision = decide_profile([cheap_violating], units=100)
    assert decision.chosen is None and not decision.slo_met
    failed = Finalist("failed", CostInputs(price_per_hour_usd=1.0, startup_s=math.inf),
                      Interval(1.0, 1.0, 1.0, 0.95, 5), Interval(math.inf, math.inf, math.inf, 0.95, 5), Verdict.MET)
    assert decide_profile([failed], units=100).chosen is None


def test_eliminated_candidates_can_be_runner_up_but_not_chosen() -> None:
    winner = finalist("winner", 1.0, 0.95, 1.05)
    loser = finalist("loser", 2.0, 1.9, 2.1, eliminated=True)
    decision = decide_profile([loser, winner], units=100)
    assert (decision.chosen, decision.runner_up) == ("winner", "loser")
    assert decide_profile([loser], units=100).chosen is None


@settings(max_examples=40, deadline=None)
@given(thetas=st.lists(st.floats(min_value=1.0, max_value=1000.0), min_size=2, max_size=6),
       prices=st.lists(st.floats(min_value=0.1, max_value=10.0), min_size=6, max_size=6),
       startups=st.lists(st.floats(min_value=0.0, max_value=3000.0), min_size=6, max_size=6),
       units=st.integers(min_value=100, max_value=10**7))
def test_racing_never_eliminates_the_true_best_on_noiseless_inputs(thetas: list[float], prices: list[float],
                                                                    startups: list[float], units: int) -> None:
    candidates = [RaceCandidate(f"c{i}", CostInputs(price_per_hour_usd=prices[i], startup_s=startups[i]))
                  for i in range(len(thetas))]
    truth = {c.candidate_id: cost_per_accepted_unit(c.cost, units=units, throughput_units_per_s=thetas[i])
             for i, c in enumerate(candidates)}
    best = min(truth.values())
    race = Race(candidates, units=units, resamples=100, measure=BLOCKS_ONLY)
    for _ in range(race.measure.max_blocks):
        for cid in race.active:
            race.add_block(cid, block(thetas[int(cid[1:])]))
        step = race.decide()
        for elimination in step.eliminated:
            assert truth[elimination.candidate_id] > best
        if step.finished:
            break
    assert step.finished
    assert any(truth[cid] == best for cid in step.active)
    # noiseless, every candidate measurably worse than the best is gone at the first test (after 5 blocks)
    assert all(truth[cid] <= best * (1 + 1e-6) for cid in step.active)
    decision = decide_profile(race.finalists(), units=units)
    assert decision.chosen is not None and truth[decision.chosen] == pytest.approx(best, rel=1e-12)


def test_cost_updates_and_repeated_exclusion() -> None:
    race = Race([RaceCandidate("a", CHEAP)], units=1000, resamples=100)
    for _ in range(5):
        race.add_block("a", block(10.0))
    before = race.standings()[0].cost_per_unit
    race.set_cost("a", CostInputs(price_per_hour_usd=1.0, startup_s=120.0, acceptance_rate=0.5))
    after = race.standings()[0].cost_per_unit
    assert before is not None and after is not None and after.point == pytest.approx(2 * before.point)
    first = race.exclude("a", reason=EliminationReason.THROTTLED, detail="thermal")
    again = race.exclude("a", reason=EliminationReason.FAILED, detail="later")
    assert again is first and again.reason is EliminationReason.THROTTLED


def test_the_margin_is_non_negative_against_a_comparable_runner_up_only() -> None:
    def finalist(cid: str, high: float, slo: Verdict, *, eliminated: bool = False) -> Finalist:
        cost = Interval(point=high * 0.95, low=high * 0.9, high=high, confidence=0.95, n=5)
        theta = Interval(point=10.0, low=9.0, high=11.0, confidence=0.95, n=5)
        return Finalist(cid, CHEAP, theta, cost, slo, True, eliminated)

    both = decide_profile([finalist("a", 2.0, Verdict.MET), finalist("b", 3.0, Verdict.MET)], units=100)
    assert both.chosen == "a" and both.runner_up_comparable and both.margin is not None and both.margin >= 0
    mixed = decide_profile([finalist("a", 2.0, Verdict.MET), finalist("b", 1.5, Verdict.UNDECIDED)], units=100)
    assert mixed.chosen == "a" and mixed.runner_up == "b" and not mixed.runner_up_comparable
    assert mixed.margin is not None and mixed.margin < 0        # the uncertified one is cheaper at worst


def test_a_cheap_candidate_below_the_slo_floor_neither_leads_nor_eliminates() -> None:
    # "cheap" costs a third as much per unit but runs at a median 75 units/s against a floor of 80, its blocks
    # too spread to decide its SLO yet: it stays in the race, but the lead (the tuning that follows it, and the
    # eliminations) go to the best candidate whose measurements so far meet the SLO. Led by "cheap", the race
    # eliminated "good" as costlier than a machine that was about to fail its SLO.
    slo = Slo(throughput_min_units_per_s=80.0)
    third_price = CostInputs(price_per_hour_usd=0.25, startup_s=120.0)
    race = Race([RaceCandidate("cheap", third_price), RaceCandidate("good", CHEAP), RaceCandidate("dear", CHEAP)],
                units=100_000, slo=slo, resamples=300, measure=BLOCKS_ONLY)
    for theta in (60.0, 95.0, 75.0, 90.0, 70.0):
        race.add_block("good", block(100.0))
        race.add_block("dear", block(85.0))
        race.add_block("cheap", block(theta))
    cheap = next(s for s in race.standings() if s.candidate_id == "cheap")
    assert cheap.slo is Verdict.UNDECIDED and cheap.throughput is not None and cheap.throughput.point < 80.0
    step = race.decide()
    assert "cheap" in step.active and "good" in step.active and step.leader == "good"
    assert [(e.candidate_id, e.reason) for e in step.eliminated] == [("dear", EliminationReason.COST)]


def test_a_certified_candidate_outlives_a_cheaper_leader_on_the_slo_knife_edge() -> None:
    # "edge" costs a quarter as much and its median meets the floor of 80, but its blocks straddle the floor, so
    # its SLO is undecided; "good" is certified. The cost test separates them at once, yet eliminating "good"
    # would leave nothing certified if "edge" never certifies (the decision would then take an undecided machine
    # whose truth may sit below the floor). "good" stays until "edge" is certified, then goes.
    slo = Slo(throughput_min_units_per_s=80.0)
    quarter = CostInputs(price_per_hour_usd=0.25, startup_s=120.0)
    race = Race([RaceCandidate("edge", quarter), RaceCandidate("good", CHEAP)], units=100_000, slo=slo,
                resamples=300, measure=BLOCKS_ONLY)
    for theta in (70.0, 92.0, 78.0, 90.0, 82.0):
        race.add_block("edge", block(theta))
        race.add_block("good", block(100.0))
    edge = race.standing("edge")
    assert edge.slo is Verdict.UNDECIDED and edge.throughput is not None and edge.throughput.point >= 80.0
    step = race.decide()
    assert step.leader == "edge" and step.eliminated == () and step.active == ("edge", "good")
    decision = decide_profile(race.finalists(), units=100_000)
    assert decision.chosen == "good" and decision.slo_met
    for _ in range(25):                                          # "edge" settles well above the floor
        race.add_block("edge", block(90.0))
    assert race.standing("edge").slo is Verdict.MET
    step = race.decide()
    assert [(e.candidate_id, e.reason) for e in step.eliminated] == [("good", EliminationReason.COST)]


# The short protocol's rule (two runs of four blocks, at most eight) and a floor the cheap machine clears by 7 %.
SHORT = MeasureRule(max_blocks=8, min_blocks=4, winner_min_blocks=6, min_runs=2)
FLOOR_40 = Slo(throughput_min_units_per_s=40.0)
FIFTH = CostInputs(price_per_hour_usd=0.2, startup_s=120.0)


def two_machines(*, edge_theta: float, edge_cost: CostInputs = FIFTH) -> Race:
    """"edge" (its two runs 2 % apart around ``edge_theta``) and "dear" (certified: 60 units/s, five times its
    price), each with the short protocol's most blocks."""
    race = Race([RaceCandidate("edge", edge_cost), RaceCandidate("dear", CHEAP)], units=100_000, slo=FLOOR_40,
                measure=SHORT, resamples=500)
    for index in range(8):
        run = index // 4
        race.add_block("edge", block(edge_theta * (1.01 if run else 0.99), run=run))
        race.add_block("dear", block(60.0, run=run))
    return race


def test_a_leader_at_the_slo_edge_measures_on_past_max_blocks_in_further_runs() -> None:
    # Its 43 units/s clear the floor of 40, but two runs' between-run error keep its interval across it: at
    # max_blocks the race would end and the decision take the certified machine, five times dearer.
    race = two_machines(edge_theta=43.0)
    step = race.decide()
    edge = race.standing("edge")
    assert edge.slo is Verdict.UNDECIDED and edge.throughput is not None and edge.throughput.low < 40.0
    assert decide_profile(race.finalists(), units=100_000).chosen == "dear"
    assert step.ended is RaceEnd.MEASURING and step.slo_edge == ("edge",) and "edge" in step.rerun
    assert race.block_cap("edge") == 16 and race.block_cap("dear") == 8
    for _ in range(4):                          # its third run
        race.add_block("edge", block(43.0, run=2))
        step = race.decide()
        if race.standing("edge").slo is Verdict.MET:
            break
    assert race.standing("edge").slo is Verdict.MET, "a third run at 43 units/s should certify the floor of 40"
    assert step.slo_edge == () and race.block_cap("edge") == 8
    assert decide_profile(race.finalists(), units=100_000).chosen == "edge"


def test_the_slo_edge_ends_at_twice_max_blocks() -> None:
    race = two_machines(edge_theta=41.0)        # too close to the floor for any number of runs here
    for index in range(8, 16):
        race.decide()
        race.add_block("edge", block(41.0 * (1.01 if index % 2 else 0.99), run=2 + (index - 8) // 4))
    step = race.decide()
    assert race.standing("edge").slo is Verdict.UNDECIDED
    assert step.ended is RaceEnd.MAX_BLOCKS and "edge more: its SLO at the edge" in step.reason


@pytest.mark.parametrize(("edge_theta", "edge_cost", "why"), [
    (39.0, FIFTH, "its median is under the floor: more runs would only show it"),
    (43.0, CostInputs(price_per_hour_usd=1.6, startup_s=120.0), "certified, it would still not be chosen"),
])
def test_no_slo_edge_where_its_verdict_would_change_no_decision(edge_theta: float, edge_cost: CostInputs,
                                                                why: str) -> None:
    race = two_machines(edge_theta=edge_theta, edge_cost=edge_cost)
    step = race.decide()
    assert race.standing("edge").slo is Verdict.UNDECIDED
    assert step.slo_edge == () and race.block_cap("edge") == 8, why
    assert step.ended is RaceEnd.MAX_BLOCKS


def test_the_chance_a_leader_misses_the_slo_follows_its_evidence() -> None:
    # certified: none; straddling the floor: some, more the closer its median sits to it; below it: about all
    slo = Slo(throughput_min_units_per_s=80.0)
    race = Race([RaceCandidate(cid, CHEAP) for cid in ("sure", "near", "close", "under")], units=100_000, slo=slo,
                resamples=300, measure=BLOCKS_ONLY)
    spreads = {"sure": (100.0, 101.0, 99.0), "near": (95.0, 75.0, 100.0), "close": (84.0, 70.0, 96.0),
               "under": (60.0, 62.0, 61.0)}
    for cid, thetas in spreads.items():
        for theta in thetas:
            race.add_block(cid, block(theta))
    assert race.standing("sure").slo is Verdict.MET and race.slo_miss_chance("sure") == 0.0
    near, close = race.slo_miss_chance("near"), race.slo_miss_chance("close")
    assert race.standing("near").slo is Verdict.UNDECIDED and 0.0 < near < close < 0.5
    assert race.slo_miss_chance("under") > 0.99
    # latencies that, at face value, miss the ceiling: it will not certify
    late = Race([RaceCandidate("late", CHEAP)], units=100_000, resamples=300, measure=BLOCKS_ONLY,
                slo=Slo(latency=LatencyCeiling(percentile=90.0, max_ms=100.0)))
    for _ in range(3):
        late.add_block("late", block(100.0, latencies_ms=(50.0, 150.0, 160.0)))
    assert late.slo_miss_chance("late") == 1.0


def test_a_re_verified_leader_measures_on_until_its_slo_is_certified_before_the_race_ends() -> None:
    """A host re-verified on its earlier runs needs few fresh blocks, and they hold too few steps for the latency
    percentile: the race does not end on it while its SLO is undecided (the decision, which chooses among certified
    profiles only, would take the dearer certified rival), and once certified it is chosen."""
    slo = Slo(latency=LatencyCeiling(percentile=99.0, max_ms=50.0))   # p99 certifies from 459 steps
    light = MeasureRule(min_blocks=2, winner_min_blocks=3, min_runs=1, run_cv_prior=0.0)
    history = tuple(Block(units=100.0 * 30.0, duration_s=30.0, steps=30, run=-1 - i) for i in range(2))
    race = Race([RaceCandidate("known", CHEAP, 100.0, history=history, rule=light), RaceCandidate("rival", CHEAP)],
                units=100_000, slo=slo, measure=MeasureRule(min_blocks=5, winner_min_blocks=5, max_blocks=30,
                                                           run_cv_prior=0.0), resamples=1000)
    for index in range(10):
        race.add_block("rival", block(97.0, latencies_ms=(10.0,) * 100, run=index // 5))
    for _ in range(3):
        race.add_block("known", block(100.0, latencies_ms=(10.0,) * 30))
    step = race.decide()
    assert step.leader == "known" and step.eliminated == ()
    assert race.standing("known").slo is Verdict.UNDECIDED and race.standing("rival").slo is Verdict.MET
    assert step.ended is RaceEnd.MEASURING, step.reason      # within the margin, but the leader cannot be chosen
    assert decide_profile(race.finalists(), units=100_000).chosen == "rival"
    while race.standing("known").slo is not Verdict.MET:
        race.add_block("known", block(100.0, latencies_ms=(10.0,) * 30))
    step = race.decide()
    assert step.ended in (RaceEnd.WITHIN_MARGIN, RaceEnd.ONE_REMAINS), step.reason
    assert decide_profile(race.finalists(), units=100_000).chosen == "known"
