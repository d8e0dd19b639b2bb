"""Verdicts with hysteresis: a reading series that flaps around the thresholds changes the verdict once, idle
readings are never judged, and a lasting change is followed."""

from __future__ import annotations

import pytest

from vastui.bench.attribution import Bottleneck, Readings, attribute
from vastui.bench.hysteresis import CONFIRM_READINGS, VerdictTracker

COMPUTE = Readings(gpu_activity_pct=92.0, data_wait_share=0.03)
STARVED = Readings(gpu_activity_pct=45.0, data_wait_share=0.06)
IDLE = Readings(gpu_activity_pct=0.0, data_wait_share=0.135)   # between tuning trials, an old data-wait figure


def test_the_premise_each_reading_alone_flips_the_raw_verdict() -> None:
    assert attribute(COMPUTE).bottleneck is Bottleneck.COMPUTE_BOUND
    assert attribute(STARVED).bottleneck is Bottleneck.INPUT_BOUND
    assert attribute(IDLE).bottleneck is Bottleneck.INPUT_BOUND


def test_a_flapping_series_gives_one_verdict_change() -> None:
    tracker = VerdictTracker()
    seen = [tracker.observe(r) for r in [COMPUTE] * CONFIRM_READINGS + [STARVED, COMPUTE] * 10]
    assert tracker.changes == 1
    assert tracker.verdict is not None and tracker.verdict.bottleneck is Bottleneck.COMPUTE_BOUND
    assert seen[:CONFIRM_READINGS - 1] == [None] * (CONFIRM_READINGS - 1)


def test_idle_readings_give_no_verdict_and_do_not_move_one() -> None:
    tracker = VerdictTracker()
    for _ in range(20):
        assert tracker.observe(IDLE) is None
    assert tracker.is_idle and tracker.changes == 0
    for _ in range(CONFIRM_READINGS):
        tracker.observe(COMPUTE)
    for _ in range(20):
        tracker.observe(IDLE)
    assert tracker.verdict is not None and tracker.verdict.bottleneck is Bottleneck.COMPUTE_BOUND
    assert tracker.changes == 1


@pytest.mark.parametrize("gap", [0, 2])
def test_a_lasting_change_is_followed_and_an_idle_gap_breaks_a_run(gap: int) -> None:
    tracker = VerdictTracker()
    for reading in [COMPUTE] * CONFIRM_READINGS + [STARVED] * (CONFIRM_READINGS - 1) + [IDLE] * gap + [STARVED]:
        tracker.observe(reading)
    expected = Bottleneck.COMPUTE_BOUND if gap else Bottleneck.INPUT_BOUND
    assert tracker.verdict is not None and tracker.verdict.bottleneck is expected
