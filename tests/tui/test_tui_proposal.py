"""What a confirmation requires: the count typed for bulk rents and destroys, the amount typed for money above
the threshold, and never a money approval without a cost cap."""

from __future__ import annotations

import pytest

from vastui.approval import Action, ApprovalRequest, instance_target, offer_target
from vastui.errors import ApprovalRequired, QuotaExceeded, VastuiError
from vastui.tui.feeds import MAX_BACKOFF_FACTOR, pause_after_failure
from vastui.tui.proposal import make_proposal, parse_usd


def req(action: Action, target: str, cap: float | None = None) -> ApprovalRequest:
    return ApprovalRequest(action=action, target=target, summary="s", cost_cap_usd=cap)


def test_bulk_needs_the_count_single_does_not() -> None:
    two = [req(Action.DESTROY_INSTANCE, instance_target(i)) for i in (1, 2)]
    bulk = make_proposal(title="t", requests=two, lines=[], consequence="", money_confirm_over_usd=20)
    assert bulk.typed == "2" and not bulk.accepts("") and not bulk.accepts("3") and bulk.accepts(" 2 ")
    one = make_proposal(title="t", requests=two[:1], lines=[], consequence="", money_confirm_over_usd=20)
    assert one.typed is None and one.accepts("")
    rents = [req(Action.CREATE_INSTANCE, offer_target(i)) for i in (7, 8, 9)]
    assert make_proposal(title="t", requests=rents, lines=[], consequence="", money_confirm_over_usd=20).typed == "3"


def test_money_above_the_threshold_needs_the_amount() -> None:
    big = make_proposal(title="t", requests=[req(Action.PREPAY_INSTANCE, instance_target(1), 25.0)], lines=[],
                        consequence="", amount_usd=25.0, money_confirm_over_usd=20)
    assert big.typed == "25.00"
    assert big.accepts("25") and big.accepts("$25.00") and not big.accepts("24.99") and not big.accepts("x")
    small = make_proposal(title="t", requests=[req(Action.TRANSFER_CREDIT, "recipient:a", 5.0)], lines=[],
                          consequence="", amount_usd=5.0, money_confirm_over_usd=20)
    assert small.typed is None


@pytest.mark.parametrize(("text", "expected"), [
    ("25", 25.0), ("$25.00", 25.0), ("  $0.5 ", 0.5), ("10.25", 10.25), ("x", None), ("", None), ("$", None),
    ("25 USD", None),
])
def test_an_amount_of_usd_is_read_one_way(text: str, expected: float | None) -> None:
    """The prepay and transfer prompts and the typed confirmation read amounts with this one function."""
    assert parse_usd(text) == expected


def test_money_without_a_cost_cap_is_impossible() -> None:
    with pytest.raises(ApprovalRequired):
        make_proposal(title="t", requests=[req(Action.PREPAY_INSTANCE, instance_target(1))], lines=[],
                      consequence="", amount_usd=5.0, money_confirm_over_usd=20)
    with pytest.raises(ApprovalRequired):
        make_proposal(title="t", requests=[req(Action.TRANSFER_CREDIT, "recipient:a", 5.0)], lines=[],
                      consequence="", amount_usd=None, money_confirm_over_usd=20)
    with pytest.raises(ApprovalRequired):
        make_proposal(title="t", requests=[req(Action.DESTROY_INSTANCE, instance_target(1)),
                                           req(Action.STOP_INSTANCE, instance_target(1))],
                      lines=[], consequence="", money_confirm_over_usd=20)


def test_a_failing_source_backs_off_and_honours_retry_after() -> None:
    plain = VastuiError("boom")
    assert pause_after_failure(plain, interval_s=10, failures_in_row=1) == 10
    assert pause_after_failure(plain, interval_s=10, failures_in_row=2) == 20
    assert pause_after_failure(plain, interval_s=10, failures_in_row=9) == 10 * MAX_BACKOFF_FACTOR
    quota = QuotaExceeded("quota", retry_after_s=300.0)
    assert pause_after_failure(quota, interval_s=10, failures_in_row=1) == 300.0
