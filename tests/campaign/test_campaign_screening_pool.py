"""Pooled screening trials: a candidate that would wait for the knobs' screening plays the current trial's A/B
pairs on its own instance, and the trial's verdict pools every machine's pairs (campaign/tuning.py, TrialPool)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from vastui.events import CandidatePhaseChanged, Event
from vastui.events_live import TuningTrialStarted
from vastui.sim.demo import open_demo
from vastui.sim.realism import Realism

SEED = 86   # four candidates; the first wave rents more than one, so others reach their minimum evidence in time
WAITING = "waiting for the knobs' screening"


def _manifest(directory: Path) -> Path:
    """The fast manifest with two knobs to screen (fp32 -> bf16, 4 -> 8 loaders): at least two trials, each
    fitting any GPU's memory (the batch stays 64), and two hours an instance so no deadline cuts a helper short."""
    path = fast_manifest(directory, tune_precision=True, max_lifetime_s=7200)
    text, count = re.subn(r"(?m)^loaders = \[4\]$", "loaders = [4, 8]", path.read_text(encoding="utf-8"))
    assert count == 1
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
async def test_candidates_that_would_wait_play_the_screenings_pairs_on_their_own_instances(tmp_path: Path) -> None:
    events: list[Event] = []
    async with open_demo(seed=SEED, time_scale=60.0, data_dir=tmp_path / "data",
                         manifest_path=_manifest(tmp_path / "m"), realism=Realism.kind()) as demo:
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


def _waiting_at(events: list[Event], at: float, *, screener: str) -> set[str]:
    """The candidates whose last phase before ``at`` was waiting for the screening (or playing its pairs)."""
    last: dict[str, str] = {}
    for event in events:
        if isinstance(event, CandidatePhaseChanged) and event.at <= at and event.candidate != screener:
            last[event.candidate] = event.detail
    return {cid for cid, detail in last.items() if detail.startswith((WAITING, "playing A/B pairs of the screening"))}
