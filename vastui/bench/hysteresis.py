"""A bottleneck verdict that holds still: judged only while the GPU works, changed only when a new one persists.

Live readings flap around the attribution thresholds (a data-wait share of 4.8 % then 5.3 %, a GPU between tuning
trials at 0 %), and a verdict that follows each reading flips between input-bound, undetermined and compute-bound
for nothing. So a reading taken while the GPU idles (below ``IDLE_GPU_ACTIVITY_PCT``: between trials, loading,
finished) is not judged at all, and a new verdict replaces the standing one only after ``CONFIRM_READINGS`` judged
readings in a row agree on it. The first verdict needs the same run of agreement: nothing is said on one reading.
"""

from __future__ import annotations

from vastui.bench.attribution import Attribution, Bottleneck, Readings, attribute

IDLE_GPU_ACTIVITY_PCT = 5.0    # below this the GPU is waiting for work, not for data: nothing to judge
CONFIRM_READINGS = 3           # judged readings in a row that a new verdict needs (at 1 Hz samples: 3 s)


class VerdictTracker:
    """Feed it one GPU's readings in order (``observe``); ``verdict`` is the standing one (None before any)."""

    def __init__(self, *, confirm: int = CONFIRM_READINGS, idle_below_pct: float = IDLE_GPU_ACTIVITY_PCT) -> None:
        if confirm < 1:
            raise ValueError("confirm must be at least 1")
        self._confirm = confirm
        self._idle_below_pct = idle_below_pct
        self.verdict: Attribution | None = None
        self.is_idle = False
        self.changes = 0               # how many times ``verdict`` changed (None -> first one included)
        self._pending: Bottleneck | None = None
        self._streak = 0

    def observe(self, readings: Readings) -> Attribution | None:
        """One reading; returns the standing verdict after it."""
        activity = readings.gpu_activity_pct
        self.is_idle = activity is not None and activity < self._idle_below_pct
        if self.is_idle:
            self._pending, self._streak = None, 0   # an idle gap breaks a run of agreement
            return self.verdict
        judged = attribute(readings)
        if self.verdict is not None and judged.bottleneck is self.verdict.bottleneck:
            self.verdict = judged              # the same verdict, with the latest evidence
            self._pending, self._streak = None, 0
            return self.verdict
        if judged.bottleneck is self._pending:
            self._streak += 1
        else:
            self._pending, self._streak = judged.bottleneck, 1
        if self._streak >= self._confirm:
            self.verdict = judged
            self.changes += 1
            self._pending, self._streak = None, 0
        return self.verdict
