"""Teardown that proves itself: destroy, then count an instance gone only after two complete listings miss it.

A failed or partial listing is *unknown*, never *absent*; destroy, never stop (stopped instances bill storage).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from vastui.approval import Action, ApprovalRequest, Approver, instance_target
from vastui.clock import Clock
from vastui.errors import ApiError, NotFound
from vastui.events import EventBus, InstanceConfirmedGone, InstanceDestroyed, Notice
from vastui.campaign.ports import Marketplace

LISTINGS_TO_CONFIRM = 2


@dataclass(frozen=True, slots=True)
class GoneEvidence:
    instance_id: int
    missed_listing_at: tuple[float, ...]


@dataclass(slots=True)
class TeardownReport:
    """What teardown achieved: ids proven gone (with listing times), and ids still alive or unknown."""

    gone: list[GoneEvidence] = field(default_factory=list)
    still_alive: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def is_clean(self) -> bool:
        return not self.still_alive and not self.refused


async def destroy_with_approval(*, client: Marketplace, approver: Approver, instance_id: int,
                                campaign_id: str | None, reason: str) -> bool:
    """Ask for approval and destroy; True when the destroy was sent or the instance was already gone."""
    request = ApprovalRequest(action=Action.DESTROY_INSTANCE, target=instance_target(instance_id),
                              summary=f"destroy instance {instance_id}: {reason}", campaign_id=campaign_id)
    approval = await approver.request(request)
    if approval is None:
        return False
    try:
        await client.destroy_instance(instance_id, approval=approval)
    except NotFound:
        pass
    return True


async def teardown(*, client: Marketplace, approver: Approver, clock: Clock, bus: EventBus,
                   instance_ids: Collection[int], campaign_id: str | None, reason: str,
                   poll_s: float = 5.0, max_rounds: int = 60) -> TeardownReport:
    """Destroy every id, then poll complete listings until each is missed by two in a row (or rounds run out)."""
    report = TeardownReport()
    pending: set[int] = set()
    for instance_id in sorted(set(instance_ids)):
        try:
            sent = await destroy_with_approval(client=client, approver=approver, instance_id=instance_id,
                                               campaign_id=campaign_id, reason=reason)
        except ApiError as exc:
            report.errors.append(f"destroy {instance_id}: {exc}")
            sent = True  # it may be gone already; the listings will say
        if not sent:
            report.refused.append(instance_id)
            continue
        bus.publish(InstanceDestroyed(at=clock.now(), campaign_id=campaign_id, instance_id=instance_id))
        pending.add(instance_id)
    misses: dict[int, list[float]] = {i: [] for i in pending}
    for _ in range(max_rounds):
        if not pending:
            break
        await _one_listing(client=client, clock=clock, bus=bus, pending=pending, misses=misses, report=report,
                           campaign_id=campaign_id)
        if pending:
            await clock.sleep(poll_s)
    report.still_alive.extend(sorted(pending))
    return report


async def _one_listing(*, client: Marketplace, clock: Clock, bus: EventBus, pending: set[int],
                       misses: dict[int, list[float]], report: TeardownReport, campaign_id: str | None) -> None:
    try:
        listing = await client.list_instances()
    except ApiError as exc:
        report.errors.append(f"listing failed: {exc}")
        return
    if not listing.is_complete:
        bus.publish(Notice(at=clock.now(), campaign_id=campaign_id, level="warning",
                           text="instance listing incomplete: absence not counted this round"))
        return
    at = clock.now()
    present = {inst.id for inst in listing.instances}
    for instance_id in sorted(pending):
        if instance_id in present:
            misses[instance_id].clear()  # two *successive* listings must miss it
            continue
        misses[instance_id].append(at)
        if len(misses[instance_id]) >= LISTINGS_TO_CONFIRM:
            pending.discard(instance_id)
            report.gone.append(GoneEvidence(instance_id, tuple(misses[instance_id])))
            bus.publish(InstanceConfirmedGone(at=at, campaign_id=campaign_id, instance_id=instance_id,
                                              listings_missed=len(misses[instance_id])))
