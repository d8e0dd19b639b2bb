"""The canary folded into a candidate's first measuring run (docs/method.md, Canary folded into the first run).

Under ``[correctness] fold_canary`` the first measuring run starts with the canary's steps: the workload, told
``VASTUI_CANARY_STEPS``, writes its output for the pinned inputs after them, marks it complete (``VASTUI {"output":
"end"}``; the agent's ``output`` phase record carries that output's digest) and runs on, warm. The gate is the
canary's own (``candidate.check_exit``, ``candidate.check_output``): a wrong output is the host's and an infinite
cost, an exit, a lost connection or a run out of time fail the candidate as a separate canary would, and the
candidate is destroyed as promptly. No block counts before the gate passed: one that completes earlier is held and
counted after it. The candidate's phase is the canary until then. What the fold saves is one agent start (upload,
start, follower) and one warm-up per candidate; the warm-up the canary's steps paid is measured as the run's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from vastui.bench.tuning import Profile
from vastui.campaign.blame import Failure, FailureKind
from vastui.campaign.candidate import (
    CANARY_FAIR_S,
    CandidateContext,
    CandidateFailed,
    CandidatePhase,
    CandidateRun,
    check_exit,
    check_output,
    note_start,
)
from vastui.campaign.measure import Record, steps_in
from vastui.campaign.plan import CANARY_STEPS
from vastui.errors import RemoteError
from vastui.remote.protocol import Phase, Progress, Result

# The evidence of a workload that never marked its output complete: alike on every host (two halt the campaign).
NO_OUTPUT_MARK = "no output mark after VASTUI_CANARY_STEPS"


class FoldedCanary:
    """The gate of one candidate's first measuring run: fed that run's records until its output passed."""

    def __init__(self, ctx: CandidateContext, run: CandidateRun, *, profile: Profile,
                 on_passed: Callable[[], Awaitable[None]]) -> None:
        self.ctx = ctx
        self.run = run
        self.profile = profile          # the canary's profile: only a run at it may carry the canary
        self.steps = CANARY_STEPS
        self.passed = False
        self._on_passed = on_passed
        self._steps_seen = 0
        self._started: float | None = None

    def begin(self) -> None:
        """The run is starting: the candidate is in its canary."""
        self._started = self.ctx.clock.now()
        self.ctx.phase(self.run, CandidatePhase.CANARY)

    async def see(self, record: Record) -> None:
        """One record of the run while the gate is pending. Raises ``CandidateFailed`` when the canary failed; once
        its output passed, the candidate measures (and the campaign hears the workload works)."""
        note_start(self.run, record)
        if isinstance(record, Result):   # the workload ended before it marked its output complete
            check_exit(record)
            raise self._no_mark()
        if isinstance(record, Progress):
            if self._steps_seen >= self.steps:   # a marker past the canary's steps, and still no output
                raise self._no_mark()
            self._steps_seen += steps_in(record)
        if isinstance(record, Phase) and record.is_output_end:
            self.run.canary_s = self.ctx.clock.now() - (self._started or self.ctx.clock.now())
            self.run.startup_s = self.run.startup_parts().production_startup_s
            check_output(self.ctx, self.run, record.output_digest)
            self.passed = True
            self.ctx.phase(self.run, CandidatePhase.MEASURING)
            await self._on_passed()

    def lost(self, exc: RemoteError) -> CandidateFailed:
        """The run could not start or its connection failed before the gate: the canary could not run."""
        return CandidateFailed(f"canary could not run: {exc}", bad_host=True, failure=Failure(FailureKind.CANARY_LOST))

    def unfinished(self) -> CandidateFailed:
        """The run ended (the instance's deadline, its records stopped) before the output was marked complete."""
        ran_s = self.ctx.clock.now() - (self._started or self.ctx.clock.now())
        kind = FailureKind.CANARY_TIMEOUT if ran_s >= CANARY_FAIR_S else FailureKind.OTHER
        return CandidateFailed(f"canary did not finish after {ran_s / 60:.1f} min ({self.steps} steps asked before "
                               f"its output; a folded canary needs a workload that honours VASTUI_CANARY_STEPS)",
                               bad_host=False, failure=Failure(kind))

    def _no_mark(self) -> CandidateFailed:
        return CandidateFailed(f"canary failed: the workload ran past {self.steps} steps without marking its output "
                               f"complete ([correctness] fold_canary needs a workload that writes it after "
                               f"VASTUI_CANARY_STEPS, then VASTUI {{\"output\": \"end\"}})", bad_host=False,
                               failure=Failure(FailureKind.CANARY_EXIT, ("running", NO_OUTPUT_MARK)))
