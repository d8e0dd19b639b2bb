"""Tuning: one knob (precision), paired interleaved A/B runs on one instance (the screener's, then the leader's),
judged from the records — and the verdict agrees with the machine's hidden truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.campaign.campaign_support import destroys_past_deadline, fast_manifest, first_destroys
from vastui.campaign.tuning import TuningStop
from vastui.sim.demo import run_demo
from vastui.sim.market import Market
from vastui.sim.realism import Realism

# the tuning's deadline logic is under test on a known market: the kind simulator, by name (the realistic one's
# per-rental turns change which candidate leads)
KIND = Realism.kind()


@pytest.mark.slow
async def test_leader_is_tuned_one_knob_at_a_time_and_the_verdict_matches_the_truth(tmp_path: Path) -> None:
    speedups: dict[int, float] = {}
    destroyed_at: dict[int, float] = {}

    async def capture(market: Market) -> None:
        for machine in market.world.machines:
            speedups[machine.machine_id] = market.truth_of(machine.machine_id).half_precision_speedup
        destroyed_at.update(first_destroys(market.request_log))

    # Time x60, not x300: every tuning run opens a session and starts two processes, and each wall second of
    # that is 300 simulated seconds at x300 — enough to push a whole A/B trial past the leader's deadline. (At x100
    # a busy machine still left the screener's deadline no room for its trial now and then.)
    result = await run_demo(seed=4, time_scale=60.0, data_dir=tmp_path / "data", realism=KIND,
                            manifest_path=fast_manifest(tmp_path / "m", tune_precision=True), on_market=capture)
    # The knobs are screened on the first candidate with its minimum evidence (its verdict matches its machine's
    # truth); the leader's tuning, if any, starts from the screened profile.
    screening = result.outcome.screening
    assert screening is not None, "the knobs must be screened when the manifest allows a knob"
    assert [(k.knob, k.baseline, k.value) for k in screening.knobs] == [("precision", "fp32", "bf16")], \
        screening.tuning.stopped_early
    trial = screening.tuning.trials[0]
    assert trial.verdict.pairs >= 5
    # the verdict pools the pairs of every machine that played them (the screener's, and any that would have
    # waited for it): it matches their truths when they agree
    played = {cid for cid, _n in trial.pairs_on} or {screening.screener}
    machines = [r.candidate.offer.machine_id for r in result.outcome.runs if r.cid in played]
    assert screening.screener in played and len(machines) == len(played)
    if min(speedups[m] for m in machines) >= 1.2:
        assert trial.verdict.accepted and trial.verdict.gain is not None and trial.verdict.gain.low > 0
        assert screening.profile.precision == "bf16"
    elif max(speedups[m] for m in machines) <= 1.0:
        assert not trial.verdict.accepted and screening.profile.precision == "fp32"
    assert any(n.startswith("screening on ") for n in result.receipt.notes)
    tuning = result.outcome.tuning
    if tuning is not None:
        assert all(t.baseline == screening.profile.precision for t in tuning.trials if t.knob == "precision")
    assert result.instances_left == 0 and result.receipt.teardown_passed
    # a kept change re-prices the chosen profile (estimated, labelled so); none kept leaves no estimate
    decision = result.receipt.decision
    if tuning is not None and tuning.kept_gains and decision.chosen == result.outcome.tuned_candidate:
        row = next(c for c in result.receipt.candidates if c.candidate_id == decision.chosen)
        tuned, raced = result.outcome.tuned_cost, row.cost_per_unit
        assert tuned is not None and raced is not None and tuned.point < raced.point
        assert decision.chosen_cost == tuned, "the decision priced it at the profile production runs"
        assert "at its tuned profile" in decision.reason
        assert any(n.startswith("tuned profile's cost per 1k accepted units") and "not raced" in n
                   for n in result.receipt.notes)
    elif tuning is None or not tuning.kept_gains:
        assert result.outcome.tuned_cost is None
    # tuning fits inside the leader's approved lifetime: trials that would outrun its deadline are not started
    assert await destroys_past_deadline(result.db_path, result.receipt.campaign_id, destroyed_at) == []


@pytest.mark.slow
async def test_tuning_never_outlives_the_leaders_deadline(tmp_path: Path) -> None:
    """A lifetime too short for an A/B trial: neither the screening's trial nor the leader's is started, and every
    instance is destroyed by the deadline it was approved for (before this was enforced, tuning ran 15+ minutes
    past it). 900 s, not more: since only the screener measures before the screening (the other first-wave
    machines play its pairs from their canary on), a trial plays fewer rounds, and at 1200 s it once fitted; at
    1500 s an idle machine fits it before the race, and the leader then has nothing left to tune. A loaded
    machine only leaves less room."""
    destroyed_at: dict[int, float] = {}

    async def capture(market: Market) -> None:
        destroyed_at.update(first_destroys(market.request_log))

    manifest = fast_manifest(tmp_path / "m", tune_precision=True, max_lifetime_s=900)
    # x100: 900 s of lifetime is 9 s of wall time, enough on a loaded machine for the race to measure a finalist
    result = await run_demo(seed=4, time_scale=100.0, data_dir=tmp_path / "data", manifest_path=manifest, realism=KIND,
                            on_market=capture)
    tuning = result.outcome.tuning
    phases = [(r.cid, str(r.phase), r.detail) for r in result.outcome.runs]
    assert tuning is not None, f"no leader was offered tuning: {phases}"
    screening = result.outcome.screening
    assert screening is not None and screening.tuning.trials == (), f"the screening's trial fit: {screening}"
    assert tuning.trials == (), f"a trial ran inside a 1200 s lifetime: {tuning}; {phases}"
    assert tuning.stopped is not None and tuning.stopped.why in (TuningStop.NO_ROOM, TuningStop.DEADLINE)
    assert await destroys_past_deadline(result.db_path, result.receipt.campaign_id, destroyed_at) == []
    assert result.receipt.decision.chosen is not None
    assert result.instances_left == 0 and result.receipt.teardown_passed


@pytest.mark.slow
async def test_a_leader_raced_at_its_screened_profile_is_not_tuned_again(tmp_path: Path) -> None:
    """Seed 4: c2 screens precision (bf16 clearly faster on its machine) and c1, raced at bf16 like every
    candidate measured after the screening, is chosen. Its knobs are the screening's: no trial repeats them on its
    instance (before, its tuning began with bf16 -> fp32), and the receipt says where its profile came from."""
    result = await run_demo(seed=4, time_scale=60.0, data_dir=tmp_path / "data", realism=KIND,
                            manifest_path=fast_manifest(tmp_path / "m", tune_precision=True))
    outcome, receipt = result.outcome, result.receipt
    screening = outcome.screening
    assert screening is not None and screening.profile.precision == "bf16", screening
    (knob,) = screening.knobs
    assert knob.kept and knob.gain is not None and knob.gain.low > 0, knob
    chosen = next(r for r in outcome.runs if r.cid == receipt.decision.chosen)
    assert chosen.cid != screening.screener, "the market is meant to choose another machine than the screener's"
    assert chosen.race_profile is not None and chosen.race_profile.precision == "bf16"
    tuning = outcome.tuning
    assert tuning is not None and outcome.tuned_candidate == chosen.cid, (outcome.tuned_candidate, tuning)
    assert tuning.trials == () and tuning.screened_by == screening.screener, tuning
    assert tuning.profile == chosen.race_profile and outcome.tuned_cost is None
    assert f"production profile of {chosen.cid}: {chosen.race_profile.describe()}; its knobs come from the " \
           f"screening on {screening.screener}" in " ".join(receipt.notes), receipt.notes
    assert not any(n.startswith("tuning: ") for n in receipt.notes), receipt.notes
    assert result.instances_left == 0 and receipt.teardown_passed
