"""Whose failure is it, the host's or the workload's: the first canaries decide, and failure stays cheap.

A canary that fails on one host may be that host (wrong output from a faulty GPU) or the workload (a wrong command,
a stale expected digest, a workload that never stops at ``VASTUI_STEPS``). One failure cannot tell them apart; the
first two canaries can: when both fail the same way (``FailureKind`` plus what the failure showed, e.g. the exit
status and the last line of stderr, or the wrong digest), the workload itself fails, and renting more hosts would
only buy the same failure again. Until a canary has passed (the workload shown to work), a canary failure that
would mark its host bad is held rather than written: a failure that is the workload's marks no host.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

# The first canaries judged together: two that fail the same way are the workload, not two unlucky hosts.
FIRST_CANARIES = 2


class FailureKind(enum.StrEnum):
    """What kind of failure ended a candidate (the engine's control flow reads this, never the message)."""

    HOST = "host"                      # loading, readiness, SSH before the canary: the host's or the market's
    CANARY_LOST = "canary_lost"        # the connection failed during the canary: the host's, unless it never works
    CANARY_EXIT = "canary_exit"        # the workload ended non-zero (or by a signal) on the canary
    CANARY_TIMEOUT = "canary_timeout"  # the canary did not finish before the instance's deadline
    WRONG_OUTPUT = "wrong_output"      # the canary's output digest differs from the expected one
    INPUT_CHANGED = "input_changed"    # an input file changed on this machine after the manifest was loaded
    OTHER = "other"

    @property
    def is_canary(self) -> bool:
        """A verdict of the correctness gate: it may be the workload's."""
        return self in (FailureKind.CANARY_EXIT, FailureKind.CANARY_TIMEOUT, FailureKind.WRONG_OUTPUT)


class HaltReason(enum.StrEnum):
    """Why a campaign stopped renting before its race was decided."""

    WORKLOAD_FAILS = "workload_fails"
    INPUT_CHANGED = "input_changed"
    KEY_REJECTED = "key_rejected"      # the marketplace rejected the API key: no request can succeed until it is fixed


@dataclass(frozen=True, slots=True)
class Failure:
    """A candidate's failure as evidence: its kind and what it showed (compared between candidates)."""

    kind: FailureKind
    signature: tuple[str, ...] = ()

    def same_as(self, other: Failure) -> bool:
        return self.kind is other.kind and self.signature == other.signature


@dataclass(frozen=True, slots=True)
class Halt:
    """The campaign stops: ``reason`` for control flow, ``message`` for the operator and the receipt."""

    reason: HaltReason
    message: str

    def describe(self) -> str:
        if self.reason is HaltReason.WORKLOAD_FAILS:
            return f"the workload itself fails: {self.message}"
        return self.message


@dataclass(frozen=True, slots=True)
class BadHostMark:
    """A bad-host record not yet written (held until the workload is shown to work)."""

    machine_id: int
    reason: str
    evidence_json: str


@dataclass(frozen=True, slots=True)
class Judgement:
    """What a canary's verdict means now: marks to write, and a halt when the workload itself fails."""

    marks: tuple[BadHostMark, ...] = ()
    halt: Halt | None = None


class WorkloadJudge:
    """Collects the first canaries' verdicts and the bad-host marks held until one passes."""

    def __init__(self, *, first: int = FIRST_CANARIES) -> None:
        self._first = first
        self._verdicts: list[Failure | None] = []   # the first canaries, None for a pass
        self._held: list[BadHostMark] = []
        self.proven = False                          # a canary passed: the workload works

    @property
    def held(self) -> tuple[BadHostMark, ...]:
        """Marks never written because no canary passed (the receipt says so)."""
        return tuple(self._held)

    @property
    def in_doubt(self) -> bool:
        """A first canary failed and the workload is not yet judged: the next rent may buy the same failure."""
        return not self.proven and len(self._verdicts) < self._first and any(v is not None for v in self._verdicts)

    def canary_passed(self) -> Judgement:
        """The workload works: every held mark is the host's after all."""
        if len(self._verdicts) < self._first:
            self._verdicts.append(None)
        self.proven = True
        marks, self._held = tuple(self._held), []
        return Judgement(marks=marks)

    def failed(self, failure: Failure, *, mark: BadHostMark | None, detail: str) -> Judgement:
        """A candidate failed with ``failure``; ``mark`` is the bad-host record it would make if the host is to
        blame. A failure before the canary is the host's at once; a canary's is held while the workload is
        unproven, and a halt when the first canaries all failed this same way. A changed input halts at once."""
        if failure.kind is FailureKind.INPUT_CHANGED:
            return Judgement(halt=Halt(HaltReason.INPUT_CHANGED, detail))
        if self.proven or not (failure.kind.is_canary or failure.kind is FailureKind.CANARY_LOST):
            return Judgement(marks=(mark,) if mark is not None else ())
        if mark is not None:
            self._held.append(mark)
        if not failure.kind.is_canary:   # a lost connection says nothing about the workload's own verdict
            return Judgement()
        if len(self._verdicts) >= self._first:
            return Judgement()
        self._verdicts.append(failure)
        if len(self._verdicts) == self._first and all(v is not None and v.same_as(failure) for v in self._verdicts):
            self._held.clear()   # the workload's failure: no host is to blame
            return Judgement(halt=Halt(HaltReason.WORKLOAD_FAILS,
                                       f"the first {self._first} candidates' canaries failed the same way "
                                       f"({failure.kind}): {detail}"))
        return Judgement()
