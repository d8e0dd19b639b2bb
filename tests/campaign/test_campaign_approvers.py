"""The approvers: ``PlanApprover`` grants exactly a printed plan (its offers once each under the cap, destroys of what
the campaign created) and nothing else; ``AuditedApprover`` writes every grant and refusal to a real SQLite audit log;
``PromptApprover`` grants only on an explicit yes typed at the terminal."""

from __future__ import annotations

import dataclasses
import io
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes import FakeClock
from vastui.approval import Action, Approval, ApprovalRequest, Approver, AuditKind, instance_target, offer_target
from vastui.campaign.approvers import AuditedApprover, PlanApprover, PlanTerms, PromptApprover, RefusingApprover
from vastui.cli.terminal import ask_on_terminal as _ask_on_terminal
from vastui.errors import ApprovalRequired
from vastui.store import SqliteStore

CAMPAIGN = "cappr"
PLAN_OFFERS = frozenset({20_000_001, 20_000_002, 20_000_003})
CAP_USD = 4.0
OWNED = 30_000_007


def create(offer_id: int, *, cap: float | None = 1.5, campaign: str | None = CAMPAIGN) -> ApprovalRequest:
    return ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(offer_id),
                           summary=f"rent offer {offer_id}", cost_cap_usd=cap, campaign_id=campaign)


def destroy(instance_id: int, *, campaign: str | None = CAMPAIGN) -> ApprovalRequest:
    return ApprovalRequest(action=Action.DESTROY_INSTANCE, target=instance_target(instance_id),
                           summary=f"destroy instance {instance_id}", campaign_id=campaign)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def plan_approver(clock: FakeClock) -> PlanApprover:
    approver = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=PLAN_OFFERS, max_spend_usd=CAP_USD),
                            clock=clock)
    approver.mark_owned(OWNED)
    return approver


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with await SqliteStore.open(tmp_path / "audit.sqlite3") as s:
        yield s


# --- PlanApprover: creates ------------------------------------------------------------------------------------


async def test_a_plan_offer_is_approved_once_for_exactly_that_create(plan_approver: PlanApprover,
                                                                     clock: FakeClock) -> None:
    request = create(20_000_001)
    approval = await plan_approver.request(request)
    assert approval is not None
    assert approval.request is request and approval.granted_by == "approve-plan flag"
    assert approval.granted_at == clock.now() and not approval.used
    approval.consume(action=Action.CREATE_INSTANCE, target=offer_target(20_000_001))
    assert approval.used
    assert await plan_approver.request(create(20_000_001)) is None  # once per offer
    assert await plan_approver.request(create(20_000_002)) is not None  # the other plan offers are still open


async def test_an_offer_refused_outright_may_be_asked_again_once_and_no_more(plan_approver: PlanApprover) -> None:
    # the marketplace refused the first create (scheduling could not place it): nothing was rented, so the plan's
    # "once" is not spent by it; a second refusal ends it
    again = dataclasses.replace(create(20_000_001), asked_again=True)
    assert await plan_approver.request(create(20_000_001)) is not None
    assert await plan_approver.request(create(20_000_001)) is None     # a plain second ask: still once per offer
    assert await plan_approver.request(again) is not None
    assert await plan_approver.request(again) is None
    assert await plan_approver.request(create(20_000_002)) is not None
    assert await plan_approver.request(dataclasses.replace(create(20_000_999), asked_again=True)) is None


async def test_an_offer_outside_the_plan_is_not_approved(plan_approver: PlanApprover) -> None:
    assert await plan_approver.request(create(20_000_999)) is None


@pytest.mark.parametrize(("cap", "approved"), [(CAP_USD, True), (0.01, True), (CAP_USD + 0.01, False),
                                               (1e9, False), (None, False)])
async def test_a_create_is_approved_only_within_the_spend_cap(plan_approver: PlanApprover, cap: float | None,
                                                              approved: bool) -> None:
    assert (await plan_approver.request(create(20_000_001, cap=cap)) is not None) is approved


async def test_a_refused_create_does_not_use_up_the_offer(plan_approver: PlanApprover) -> None:
    assert await plan_approver.request(create(20_000_003, cap=CAP_USD * 2)) is None
    assert await plan_approver.request(create(20_000_003, campaign="other")) is None
    assert await plan_approver.request(create(20_000_003)) is not None


@pytest.mark.parametrize("campaign", ["other", None, CAMPAIGN.upper(), ""])
async def test_a_create_for_another_campaign_is_not_approved(plan_approver: PlanApprover,
                                                             campaign: str | None) -> None:
    assert await plan_approver.request(create(20_000_001, campaign=campaign)) is None
    assert await plan_approver.request(destroy(OWNED, campaign=campaign)) is None


# --- PlanApprover: destroys -----------------------------------------------------------------------------------


async def test_destroy_is_approved_only_for_instances_the_campaign_owns(plan_approver: PlanApprover) -> None:
    later = 30_000_008
    assert await plan_approver.request(destroy(later)) is None  # not ours (yet)
    plan_approver.mark_owned(later)
    for instance_id in (OWNED, later):
        # every time it is asked: a candidate's release, then the final teardown, destroy the same instance
        for _ in range(2):
            approval = await plan_approver.request(destroy(instance_id))
            assert approval is not None
            approval.consume(action=Action.DESTROY_INSTANCE, target=instance_target(instance_id))


async def test_no_destroy_when_the_plan_does_not_promise_it(clock: FakeClock) -> None:
    approver = PlanApprover(PlanTerms(campaign_id=CAMPAIGN, offer_ids=PLAN_OFFERS, max_spend_usd=CAP_USD,
                                      destroy_at_end=False), clock=clock)
    approver.mark_owned(OWNED)
    assert await approver.request(destroy(OWNED)) is None


@pytest.mark.parametrize("action", [a for a in Action if a not in (Action.CREATE_INSTANCE, Action.DESTROY_INSTANCE)])
async def test_nothing_else_is_approved(plan_approver: PlanApprover, action: Action) -> None:
    """Stop, start, label, prepay, transfer and key changes are not in a plan, whatever the target."""
    for target in (instance_target(OWNED), offer_target(20_000_001), "recipient:someone@example.com",
                   "ssh_key:0123456789abcdef"):
        request = ApprovalRequest(action=action, target=target, summary=f"{action} {target}", cost_cap_usd=0.5,
                                  campaign_id=CAMPAIGN)
        assert await plan_approver.request(request) is None, target


@pytest.mark.parametrize(("action", "target"), [
    (Action.CREATE_INSTANCE, instance_target(OWNED)),      # a create must name an offer
    (Action.DESTROY_INSTANCE, offer_target(20_000_001)),   # a destroy must name an instance
    (Action.CREATE_INSTANCE, "offer:"),
    (Action.CREATE_INSTANCE, "offer:abc"),
    (Action.CREATE_INSTANCE, "offer:-20000001"),
    (Action.CREATE_INSTANCE, "offer:20000001:1"),
    (Action.CREATE_INSTANCE, "offer: 20000001"),
    (Action.CREATE_INSTANCE, "20000001"),
    (Action.DESTROY_INSTANCE, f"instance:{OWNED}.0"),
    (Action.CREATE_INSTANCE, "offer:²"),  # str.isdigit() says yes, int() says no
    (Action.CREATE_INSTANCE, "offer:020000001"),            # a plan offer, not spelled as offer_target spells it
    (Action.CREATE_INSTANCE, "Offer:20000001"),
])
async def test_a_malformed_or_mismatched_target_is_declined_not_an_error(plan_approver: PlanApprover,
                                                                         action: Action, target: str) -> None:
    request = ApprovalRequest(action=action, target=target, summary="odd", cost_cap_usd=1.0, campaign_id=CAMPAIGN)
    assert await plan_approver.request(request) is None


# --- AuditedApprover ------------------------------------------------------------------------------------------


async def test_every_grant_and_refusal_is_written_to_the_audit_log(plan_approver: PlanApprover, store: SqliteStore,
                                                                   clock: FakeClock) -> None:
    audited = AuditedApprover(plan_approver, audit=store, clock=clock)
    requests = [create(20_000_001), create(20_000_001), create(20_000_999), destroy(OWNED), destroy(1)]
    approvals: list[Approval | None] = []
    for request in requests:
        clock.advance(1.0)
        approvals.append(await audited.request(request))
        assert len(await store.audit_records(campaign_id=CAMPAIGN)) == len(approvals)  # written before it is used
    assert [a is not None for a in approvals] == [True, False, False, True, False]

    records = await store.audit_records(campaign_id=CAMPAIGN)
    assert [r.kind for r in records] == [AuditKind.APPROVAL, AuditKind.DECLINED, AuditKind.DECLINED, AuditKind.APPROVAL,
                                         AuditKind.DECLINED]
    for record, request, approval in zip(records, requests, approvals, strict=True):
        assert (record.action, record.target, record.outcome) == (request.action, request.target, request.summary)
        assert record.campaign_id == CAMPAIGN
        if approval is None:
            assert record.approval_id is None and record.granted_by is None
        else:
            assert record.approval_id == approval.approval_id and record.granted_by == "approve-plan flag"
            assert record.at == approval.granted_at
    assert [r.at for r in records] == sorted({r.at for r in records})


async def test_the_audited_approver_hands_back_the_inner_approval_unchanged(plan_approver: PlanApprover,
                                                                            store: SqliteStore,
                                                                            clock: FakeClock) -> None:
    audited: Approver = AuditedApprover(plan_approver, audit=store, clock=clock)
    approval = await audited.request(create(20_000_002))
    assert approval is not None and not approval.used
    approval.consume(action=Action.CREATE_INSTANCE, target=offer_target(20_000_002))
    with pytest.raises(ApprovalRequired):
        approval.consume(action=Action.CREATE_INSTANCE, target=offer_target(20_000_002))


async def test_a_refusal_by_a_refusing_approver_is_audited_too(store: SqliteStore, clock: FakeClock) -> None:
    """"Every grant and every refusal goes to the audit log through AuditedApprover" (approvers.py): a
    ``RefusingApprover`` refuses by raising ApprovalRequired, and that refusal must be in the log as well."""
    audited = AuditedApprover(RefusingApprover("stdin is not a terminal"), audit=store, clock=clock)
    with pytest.raises(ApprovalRequired):
        await audited.request(destroy(OWNED))
    records = await store.audit_records(campaign_id=CAMPAIGN)
    assert [(r.kind, r.target) for r in records] == [(AuditKind.DECLINED, instance_target(OWNED))]


# --- PromptApprover -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "approved"), [
    ("y\n", True), ("yes\n", True), ("Y\n", True), ("  YES  \n", True),
    ("\n", False), ("", False), ("n\n", False), ("no\n", False), ("yep\n", False), ("sure\n", False),
    ("ok\n", False), ("1\n", False), ("y es\n", False),
])
async def test_the_prompt_approves_only_on_an_explicit_yes(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], clock: FakeClock,
                                                           answer: str, approved: bool) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(answer))
    approver = PromptApprover(_ask_on_terminal, clock=clock)
    approval = await approver.request(create(20_000_001, cap=1.25))
    assert (approval is not None) is approved
    if approval is not None:
        assert approval.granted_by == "interactive prompt" and approval.granted_at == clock.now()
    asked = capsys.readouterr().err
    assert "rent offer 20000001" in asked and "$1.25" in asked and "[y/N]" in asked
    assert "create_instance" in asked and "offer:20000001" in asked


async def test_the_prompt_asks_once_per_request_and_shows_no_cap_when_there_is_none(clock: FakeClock) -> None:
    asked: list[str] = []
    answers = iter([True, False])

    async def ask(text: str) -> bool:
        asked.append(text)
        return next(answers)

    approver = PromptApprover(ask, clock=clock)
    granted = await approver.request(destroy(OWNED))
    refused = await approver.request(destroy(OWNED + 1))
    assert granted is not None and granted.request.target == instance_target(OWNED) and refused is None
    assert len(asked) == 2
    assert "destroy instance 30000007" in asked[0] and "$" not in asked[0]
