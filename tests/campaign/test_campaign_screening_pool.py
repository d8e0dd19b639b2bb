"""Pooled screening trials: a candidate that would wait for the knobs' screening plays the current trial's A/B
pairs on its own instance, and the trial's verdict pools every machine's pairs (campaign/tuning.py, TrialPool)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.fakes import FakeClock
from vastui.bench.manifest import load_manifest
from vastui.bench.stats import Interval
from vastui.bench.tuning import AbVerdict, Knob, Profile
from vastui.campaign.candidate import CandidateContext, CandidateRun, ScreeningPart
from vastui.campaign.inherited import BatchSeen
from vastui.campaign.plan import build_plan
from vastui.campaign.ports import HostConnection
from vastui.campaign.screening import Screening, ScreeningOutcome
from vastui.campaign.short_runs import RunTimes
from vastui.campaign.tuning import TrialPool, TuningOutcome, TuningTrial, _PairedTrial, _Player
from vastui.events import BlockMeasured, CandidatePhaseChanged, Event
from vastui.events_live import TuningFinished, TuningTrialStarted
from vastui.sim.demo import open_demo
from vastui.sim.offers import offer_row
from vastui.sim.realism import Realism
from vastui.sim.world import generate_world
from vastui.store import RunStatus
from vastui.vast.models import Offer

SEED = 86   # four candidates; the first wave rents more than one, so others reach their minimum evidence in time
NOW = 1_800_000_000.0


def _manifest(directory: Path, *, fold_canary: bool = False) -> Path:
    """The fast manifest with two knobs to screen (fp32 -> bf16, batch 64 -> 32): at least two trials, each
    fitting any GPU's memory (no batch above 64), and two hours an instance so no deadline cuts a helper short.
    (Not the loaders: this workload's steps never wait for input, so more loaders are not tried at all.)"""
    path = fast_manifest(directory, tune_precision=True, max_lifetime_s=7200)
    text, count = re.subn(r"(?m)^batch_sizes = \[64\]$", "batch_sizes = [32, 64]", path.read_text(encoding="utf-8"))
    assert count == 1
    if fold_canary:
        text, count = re.subn(r"(?m)^fold_canary = false$", "fold_canary = true", text)
        assert count == 1
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("fold_canary", [False, True], ids=["canary", "folded"])
async def test_candidates_that_would_wait_play_the_screenings_pairs_on_their_own_instances(
        tmp_path: Path, fold_canary: bool) -> None:
    """Unfolded, only the screener measures before the screening; every other candidate plays its pairs from its
    canary on. Folded (each candidate's first run carries its canary), each measures first, then plays pairs."""
    events: list[Event] = []
    manifest_path = _manifest(tmp_path / "m", fold_canary=fold_canary)
    async with open_demo(seed=SEED, time_scale=60.0, data_dir=tmp_path / "data",
                         manifest_path=manifest_path, realism=Realism.kind()) as demo:
        stop = demo.services.bus.listen(events.append)
        try:
            result = await demo.start(plan_approved=True).result()
        finally:
            stop()
        left = await demo.instances_left()
    outcome, receipt = result.outcome, result.receipt
    screening = outcome.screening
    assert screening is not None, "the knobs were never screened"
    trials = screening.tuning.trials
    assert len(trials) >= 2, [t.describe() for t in trials]
    # every trial's verdict counts the pairs of every machine that played them, and no more
    for trial in trials:
        assert sum(n for _cid, n in trial.pairs_on) == trial.verdict.pairs, trial.describe()
    played = screening.pairs_on
    assert len(played) >= 2 and screening.screener in played, played
    assert any(len(t.pairs_on) >= 2 for t in trials), [t.describe() for t in trials]
    assert any(note.startswith("screening's A/B pairs ran on ") and screening.screener in note
               for note in receipt.notes), receipt.notes
    assert any("; pairs on " in note for note in receipt.notes if note.startswith("screening on ")), receipt.notes
    # a candidate already waiting for the screening when a trial opened plays some of that trial's pairs: none
    # sits idle through a trial (the GPU count is not screened here, and every batch fits)
    started = [e for e in events if isinstance(e, TuningTrialStarted) and e.candidate == screening.screener]
    assert len(started) == len(trials)
    for event, trial in zip(started, trials, strict=True):
        on = dict(trial.pairs_on)
        for cid in _waiting_at(events, event.at, screener=screening.screener):
            assert on.get(cid, 0) >= 1, (cid, trial.describe())
    assert receipt.teardown_passed and left == 0
    screened_at = next(e.at for e in events if isinstance(e, TuningFinished) and e.candidate == screening.screener)
    measured_early = {e.candidate for e in events if isinstance(e, BlockMeasured) and e.at < screened_at}
    if fold_canary:
        # (spares, which need machines of unlike speed in one trial, are
        # test_a_machine_that_played_plays_a_spare_only_when_it_would_land_before_the_last_pair_in_flight's)
        # one that reaches its minimum evidence while a trial wants pairs stops measuring a profile the screening
        # may change, and plays them
        stopped = {e.candidate for e in events if isinstance(e, CandidatePhaseChanged)
                   and "while the knobs are screened: its instance plays the screening's A/B pairs" in e.detail}
        assert stopped and stopped <= set(played), (stopped, played)
        assert len(measured_early) >= 2, measured_early
        return
    # only the screener measures before the screening's verdict: one ready (its canary passed) while another
    # screens, or measures to, plays the pairs or waits for them before measuring anything, since blocks at the
    # first profile would leave the race once the screening moves it off it (``Screening.measures_first``)
    assert measured_early == {screening.screener}, measured_early
    first_measuring: dict[str, CandidatePhaseChanged] = {}
    for e in events:
        if isinstance(e, CandidatePhaseChanged) and e.phase == "measuring":
            first_measuring.setdefault(e.candidate, e)
    early = {cid for cid, e in first_measuring.items() if e.screening is not None}
    assert early and early <= set(played), (early, played)
    for cid in early:
        blocks_at = [e.at for e in events if isinstance(e, BlockMeasured) and e.candidate == cid]
        assert blocks_at and min(blocks_at) > screened_at, (cid, blocks_at, screened_at)   # measured, at the screened profile
        assert outcome.runs and next(r for r in outcome.runs if r.cid == cid).earlier_blocks == 0


def test_a_machine_that_played_plays_a_spare_only_when_it_would_land_before_the_last_pair_in_flight(
        tmp_path: Path) -> None:
    """Every pair to a trial's target played or claimed, a machine that would wait for a slower one's last pair
    plays one more when its own pair time lands it before that pair is expected to; a machine new to the trial
    (its pair time unknown there) plays none, nor does anyone once nothing is in flight or the trial failed."""
    manifest = load_manifest(_manifest(tmp_path / "m"))
    world = generate_world(7, n_machines=40, now=NOW)
    offers = [Offer.from_api(offer_row(m, now=NOW, rented=False), where="row") for m in world.machines]
    plan = build_plan(campaign_id="cspare", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
    screener, fast, new = (CandidateRun(c) for c in plan.candidates[:3])
    clock = FakeClock(NOW)
    ctx = cast(CandidateContext, SimpleNamespace(clock=clock, manifest=manifest))
    base = Profile.first(manifest.tuning, gpu_count=1)
    change = base.with_value(Knob.PRECISION, "bf16")

    def times(run_s: float) -> RunTimes:
        timed = RunTimes()
        timed.add(base, run_s)
        timed.add(change, run_s)
        return timed

    pool = TrialPool(on_change=lambda: None)
    trial = _PairedTrial(ctx, screener, cast(HostConnection, None), base, change, times(100.0), pool=pool)
    trial.target = 2
    trial.is_open = True
    pool.opened(trial)
    fast_player = _Player(ctx, fast, cast(HostConnection, None), base, change, times(20.0))
    trial.helpers[fast.cid] = fast_player
    assert pool.has_pair_for(fast) and pool.has_pair_for(new)      # pairs to the target still unclaimed
    trial.a_values.append(1.0)                                     # one pair in, the screener's last in flight
    trial.ends[object()] = clock.now() + trial.own.pair_estimate_s()
    assert not trial.wants_pair
    assert fast_player.pair_estimate_s() < trial.own.pair_estimate_s()
    assert pool.has_pair_for(fast)                                 # a spare: it lands before the slow pair
    assert not pool.has_pair_for(new)                              # new to the trial: no spare
    clock.advance(trial.own.pair_estimate_s() - fast_player.pair_estimate_s() / 2)
    assert not pool.has_pair_for(fast)                             # it would land after the last pair
    trial.ends.clear()
    assert pool.has_pair_for(fast)                                 # the slow pair dropped: wanted again
    trial.a_values.append(1.0)
    assert not pool.has_pair_for(fast)                             # all landed: nothing to wait for
    trial.ends[object()] = clock.now() + 10 * trial.own.pair_estimate_s()
    assert pool.has_pair_for(fast)
    trial.correct = False                                          # a wrong output ended the trial
    assert not pool.has_pair_for(fast)
    assert not pool.has_pair_for(screener)                         # the screener plays its own, never as a helper


def _waiting_at(events: list[Event], at: float, *, screener: str) -> set[str]:
    """The candidates whose last phase before ``at`` was waiting for the screening (or playing its pairs)."""
    last: dict[str, str | None] = {}
    for event in events:
        if isinstance(event, CandidatePhaseChanged) and event.at <= at and event.candidate != screener:
            last[event.candidate] = event.screening
    return {cid for cid, doing in last.items() if doing is not None}


def test_a_helpers_out_of_memory_holds_its_gpu_class_to_a_smaller_batch_and_a_fit_lifts_it(tmp_path: Path) -> None:
    """A helper's variant that stopped short at a larger batch is evidence about its GPU's memory (the trial's
    verdict is not failed by it); one that ran to its end is evidence the batch fits there."""
    manifest = load_manifest(fast_manifest(tmp_path / "m", tune_precision=True))
    manifest = replace(manifest, tuning=replace(manifest.tuning, batch_sizes=(64, 256)))
    start = Profile(batch_size=64, precision="fp32", loaders=4, gpu_count=1)
    big = start.with_value(Knob.BATCH_SIZE, 256)
    gain = Interval(point=0.1, low=0.05, high=0.15, confidence=0.95, n=6)
    kept = TuningTrial("batch_size", "64", "256", AbVerdict(True, gain, 6, "kept"), big,
                       pairs_on=(("s", 2), ("h16", 2), ("h20", 2)), memory_seen=((16_000.0, False), (20_000.0, True)))
    screening = Screening(manifest)
    screening.finish(ScreeningOutcome(screener="s", gpu_ram_mb=24_000.0, start=start,
                                      tuning=TuningOutcome((kept,), big)))
    seen = screening.outcome.batches_seen() if screening.outcome is not None else []
    assert BatchSeen(256, "fp32", 16_000.0, False) in seen and BatchSeen(256, "fp32", 20_000.0, True) in seen
    world = generate_world(7, n_machines=80, now=NOW)
    offers = [Offer.from_api(offer_row(m, now=NOW, rented=False), where="row") for m in world.machines]
    plan = build_plan(campaign_id="cpool", manifest=manifest, offers=offers, knowledge=(), bad_hosts=())
    candidate = next(c for c in plan.candidates if c.gpu_count == 1)

    def batch_on(gpu_ram_mb: float) -> int | None:
        return screening.profile_for(replace(candidate, offer=replace(candidate.offer, gpu_ram=gpu_ram_mb))).batch_size

    assert batch_on(16_000.0) == 64     # did not fit a helper with this much memory
    assert batch_on(20_000.0) == 256    # fitted a helper with this much (less than the screener's 24 GB)
    assert batch_on(18_000.0) == 64     # known neither way: the first profile's
    assert screening.outcome is not None
    assert screening.outcome.pairs_on == {"s": 2, "h16": 2, "h20": 2}
    (knob,) = screening.outcome.knobs
    assert knob.describe() == "batch_size 64 -> 256: kept (gain +10.0% [+5.0%, +15.0%]; pairs on s (2), h16 (2), h20 (2))"


@pytest.mark.slow
@pytest.mark.parametrize("doing", list(ScreeningPart))
async def test_an_abort_finding_a_candidate_at_the_screening_keeps_its_closed_run_and_tears_down(
        tmp_path: Path, doing: ScreeningPart) -> None:
    """A candidate that ended its race run stays in the measuring phase while it waits for the screening or plays
    its pairs; its stored run is closed. An abort found there once tried to close that run again: the store refused,
    the campaign crashed after destroying its instances and wrote no receipt. (One that helps before measuring
    has no run to close: the abort is made at one with blocks. Only the screener measures before the screening
    unless the canary is folded into the first run: then each measures first, as its run carries the canary.)"""
    async with open_demo(seed=SEED, time_scale=60.0, data_dir=tmp_path / "data",
                         manifest_path=_manifest(tmp_path / "m", fold_canary=True), realism=Realism.kind()) as demo:
        handle = demo.start(plan_approved=True)
        found: list[CandidatePhaseChanged] = []

        def abort_there(event: Event) -> None:
            if (isinstance(event, CandidatePhaseChanged) and event.phase == "measuring"
                    and event.screening == doing and not found
                    and any(c.candidate_id == event.candidate and c.blocks for c in handle.snapshot().candidates)):
                found.append(event)
                # from outside the candidate's own task, once it is awaiting there (as a key or a signal would)
                asyncio.get_running_loop().call_soon(handle.abort, "the test aborts at the screening")
        stop = demo.services.bus.listen(abort_there)
        try:
            result = await handle.result()
        finally:
            stop()
        left = await demo.instances_left()
        runs = await demo.store.runs(campaign_id=handle.campaign_id)
        instance_of = {c.candidate_id: c.instance_id for c in handle.snapshot().candidates}
    assert found, f"no candidate was seen {doing}"
    assert result.aborted == "the test aborts at the screening"
    assert result.receipt.teardown_passed and left == 0
    # the abort found its race run already closed: what it measured stands, nothing is still open
    helper_runs = [r for r in runs if r.instance_id == instance_of[found[0].candidate]]
    assert helper_runs and any(r.status is RunStatus.OK for r in helper_runs), helper_runs
    assert all(r.status is not RunStatus.RUNNING for r in runs), runs
