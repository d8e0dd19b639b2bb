"""Whose failure: the first two canaries failing the same way are the workload's; a host is marked bad only once
the workload is shown to work."""

from __future__ import annotations

from vastui.campaign.blame import BadHostMark, Failure, FailureKind, HaltReason, WorkloadJudge

EXIT_1 = Failure(FailureKind.CANARY_EXIT, ("1", "ValueError: bad flag"))
WRONG = Failure(FailureKind.WRONG_OUTPUT, ("abc",))


def _mark(machine_id: int) -> BadHostMark:
    return BadHostMark(machine_id=machine_id, reason="wrong output", evidence_json="{}")


def test_two_first_canaries_failing_the_same_way_halt_and_blame_no_host() -> None:
    judge = WorkloadJudge()
    assert judge.failed(WRONG, mark=_mark(1), detail="wrong output").halt is None
    judgement = judge.failed(WRONG, mark=_mark(2), detail="wrong output")
    assert judgement.halt is not None and judgement.halt.reason is HaltReason.WORKLOAD_FAILS
    assert judgement.halt.describe().startswith("the workload itself fails: ")
    assert judgement.marks == () and judge.held == ()
    assert judge.canary_passed().marks == ()       # nothing held comes back later


def test_different_failures_do_not_halt_and_a_later_pass_blames_the_held_hosts() -> None:
    judge = WorkloadJudge()
    assert judge.failed(WRONG, mark=_mark(1), detail="wrong output").halt is None
    assert judge.failed(EXIT_1, mark=None, detail="exit 1").halt is None
    assert judge.failed(Failure(FailureKind.WRONG_OUTPUT, ("other",)), mark=_mark(3), detail="x").halt is None
    assert judge.held == (_mark(1), _mark(3))
    assert judge.canary_passed().marks == (_mark(1), _mark(3))
    assert judge.failed(WRONG, mark=_mark(4), detail="wrong output").marks == (_mark(4),)   # proven: at once


def test_a_pass_among_the_first_two_means_the_workload_works() -> None:
    judge = WorkloadJudge()
    assert judge.canary_passed().marks == ()
    first = judge.failed(EXIT_1, mark=None, detail="exit 1")
    second = judge.failed(EXIT_1, mark=None, detail="exit 1")
    assert first.halt is None and second.halt is None


def test_host_failures_are_written_at_once_and_never_count_as_the_workloads() -> None:
    judge = WorkloadJudge()
    host = Failure(FailureKind.HOST)
    assert judge.failed(host, mark=_mark(1), detail="stuck loading").marks == (_mark(1),)
    assert judge.failed(host, mark=_mark(2), detail="stuck loading").halt is None   # not a verdict on the workload
    lost = Failure(FailureKind.CANARY_LOST)
    assert judge.failed(lost, mark=_mark(3), detail="cut").marks == ()   # held: the workload is unproven
    timeout = Failure(FailureKind.CANARY_TIMEOUT)
    assert judge.failed(timeout, mark=None, detail="").halt is None
    assert judge.failed(timeout, mark=None, detail="").halt is not None   # the first two canary verdicts
    assert judge.held == ()                                                # so the lost one blames no host


def test_a_changed_input_halts_at_once() -> None:
    judgement = WorkloadJudge().failed(Failure(FailureKind.INPUT_CHANGED), mark=None, detail="input 'x' changed")
    assert judgement.halt is not None and judgement.halt.reason is HaltReason.INPUT_CHANGED
    assert judgement.halt.describe() == "input 'x' changed"
