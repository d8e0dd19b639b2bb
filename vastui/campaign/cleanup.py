"""Teardown that proves itself: destroy, then count an instance gone only after two complete listings miss it.

A failed or partial listing is *unknown*, never *absent*; destroy, never stop (stopped instances bill storage).
While the marketplace cannot be reached (an outage: every listing fails), the teardown keeps trying with a growing
wait, for as long as ``patience_s`` of real time — a destroy whose answer was lost, or one never sent, may still
leave an instance billing — and only then reports what may still exist.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine
from dataclasses import dataclass, field
from typing import Any

from vastui.approval import Action, ApprovalRequest, Approver, instance_target
from vastui.campaign.ports import CampaignStore, Marketplace
from vastui.clock import Clock, clock_scale
from vastui.errors import ApiError, ApprovalRequired, AuthError, NotFound, StoreError
from vastui.events import EventBus, InstanceConfirmedGone, InstanceDestroyed, Notice
from vastui.store.records import InstanceState
from vastui.vast.models import Answered

LISTINGS_TO_CONFIRM = 2
# How long an outage the teardown outlasts, in real seconds (a scaled clock's seconds are scaled to match), and the
# longest wait between two tries while it lasts.
PATIENCE_S = 1800.0
MAX_OUTAGE_WAIT_S = 60.0


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
    destroy_errors: dict[int, str] = field(default_factory=dict)   # the last failed destroy call's error, per id
    destroy_sent_at: dict[int, float] = field(default_factory=dict)   # first destroy this teardown sent, per id
    key_rejected: str | None = None   # the marketplace rejected the API key: teardown stopped (retrying cannot help)

    @property
    def is_clean(self) -> bool:
        return not self.still_alive and not self.refused


async def destroy_with_approval(*, client: Marketplace, approver: Approver, instance_id: int,
                                campaign_id: str | None, reason: str,
                                on_sending: Callable[[], None] | None = None,
                                on_answered: Callable[[Answered], None] | None = None) -> bool:
    """Ask for approval and destroy; True when the destroy was sent or the instance was already gone.

    ``on_sending`` is called once approved, right before the request goes out: the marketplace stops billing when
    it handles the request, between that moment and the answer; ``on_answered`` gets that window when the client
    measured it."""
    request = ApprovalRequest(action=Action.DESTROY_INSTANCE, target=instance_target(instance_id),
                              summary=f"destroy instance {instance_id}: {reason}", campaign_id=campaign_id)
    try:
        approval = await approver.request(request)
    except ApprovalRequired:
        return False  # a refusal that explains itself; teardown reports the id as refused
    if approval is None:
        return False
    if on_sending is not None:
        on_sending()
    try:
        answered = await client.destroy_instance(instance_id, approval=approval)
        if answered is not None and on_answered is not None:
            on_answered(answered)
    except NotFound:
        pass
    return True


# A destroyed instance still listed this many complete listings in a row gets its destroy sent again.
RESEND_AFTER_LISTINGS = 3


@dataclass(slots=True)
class _Teardown:
    client: Marketplace
    approver: Approver
    clock: Clock
    bus: EventBus
    campaign_id: str | None
    reason: str
    report: TeardownReport = field(default_factory=TeardownReport)
    pending: set[int] = field(default_factory=set)
    misses: dict[int, list[float]] = field(default_factory=dict)
    seen: dict[int, int] = field(default_factory=dict)

    def reject_key(self, exc: AuthError) -> None:
        """The API key was rejected: no retry can help, so the teardown stops and says what may still bill."""
        if self.report.key_rejected is None:
            self.report.key_rejected = exc.message
            text = (f"{exc.title}: teardown stopped, every instance not yet proven gone may still be billing "
                    f"(fix the key, then run the teardown again): {exc.message}")
            self.report.errors.append(text)
            self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.campaign_id, level="error", text=text))

    async def destroy(self, instance_id: int) -> bool:
        """Send one destroy (approved); False when refused. A failed call leaves it to the listings."""
        if self.report.key_rejected is not None:
            return True   # kept pending: reported as possibly alive
        try:
            sent = await destroy_with_approval(client=self.client, approver=self.approver, instance_id=instance_id,
                                               campaign_id=self.campaign_id, reason=self.reason)
        except AuthError as exc:
            self.reject_key(exc)
            return True
        except ApiError as exc:
            self.report.errors.append(f"destroy {instance_id}: {exc}")
            self.report.destroy_errors[instance_id] = str(exc)
            self.seen[instance_id] = RESEND_AFTER_LISTINGS - 1  # sent again as soon as a listing shows it
            return True
        if sent:
            self.report.destroy_sent_at.setdefault(instance_id, self.clock.now())
            self.bus.publish(InstanceDestroyed(at=self.clock.now(), campaign_id=self.campaign_id,
                                               instance_id=instance_id))
        return sent

    async def listing(self) -> bool:
        """One listing round; False when the listing failed or was incomplete (it proves nothing)."""
        try:
            listing = await self.client.list_instances()
        except AuthError as exc:
            self.reject_key(exc)
            return False
        except ApiError as exc:
            self.report.errors.append(f"listing failed: {exc}")
            return False
        if not listing.is_complete:
            self.bus.publish(Notice(at=self.clock.now(), campaign_id=self.campaign_id, level="warning",
                                    text="instance listing incomplete: absence not counted this round"))
            return False
        at = self.clock.now()
        present = listing.present_ids  # an unreadable row still shows its id: not absent
        for row in listing.unreadable:
            if row.id in self.pending:
                self.bus.publish(Notice(at=at, campaign_id=self.campaign_id, level="warning",
                                        text=f"{row.describe()}: still listed, not counted as gone"))
        for instance_id in sorted(self.pending):
            if instance_id in present:
                self.misses[instance_id].clear()  # two *successive* listings must miss it
                self.seen[instance_id] = self.seen.get(instance_id, 0) + 1
                if self.seen[instance_id] >= RESEND_AFTER_LISTINGS:
                    self.seen[instance_id] = 0
                    await self.destroy(instance_id)  # the first destroy may have been lost: it still bills
                continue
            self.misses[instance_id].append(at)
            if len(self.misses[instance_id]) >= LISTINGS_TO_CONFIRM:
                self.pending.discard(instance_id)
                self.report.gone.append(GoneEvidence(instance_id, tuple(self.misses[instance_id])))
                self.bus.publish(InstanceConfirmedGone(at=at, campaign_id=self.campaign_id, instance_id=instance_id,
                                                       listings_missed=len(self.misses[instance_id]),
                                                       missed_listing_at=tuple(self.misses[instance_id])))
        return True


async def teardown(*, client: Marketplace, approver: Approver, clock: Clock, bus: EventBus,
                   instance_ids: Collection[int], campaign_id: str | None, reason: str,
                   poll_s: float = 5.0, max_rounds: int = 60, patience_s: float = PATIENCE_S,
                   already_destroyed: Collection[int] = ()) -> TeardownReport:
    """Destroy every id, then poll complete listings until each is missed by two in a row (or rounds run out).

    ``max_rounds`` counts complete listings. A listing that fails or comes back incomplete proves nothing and uses
    no round: the teardown waits longer each time (``poll_s`` doubling up to a minute) and keeps trying until
    ``patience_s`` real seconds have passed since the last complete listing (an API outage must not end it early).
    Ids in ``already_destroyed`` had a destroy sent (and approved) before: they are not destroyed a second time
    up front, only proven gone the same way. An id still listed after several listings gets its destroy sent
    again (approved again): a lost destroy must not leave an instance billing; so does one whose destroy failed,
    at the first listing that shows it. Refused ids are reported, never silently dropped.
    """
    state = _Teardown(client, approver, clock, bus, campaign_id, reason)
    sent_before = set(already_destroyed)
    for instance_id in sorted(set(instance_ids)):
        if instance_id in sent_before or await state.destroy(instance_id):
            state.pending.add(instance_id)
            state.misses[instance_id] = []
        else:
            state.report.refused.append(instance_id)
    await _poll(state, poll_s=poll_s, max_rounds=max_rounds, patience_s=patience_s * clock_scale(clock))
    state.report.still_alive.extend(sorted(state.pending))
    return state.report


async def record_teardown(store: CampaignStore, report: TeardownReport, *, clock: Clock,
                          on_refused: Callable[[StoreError, str], None] | None = None) -> None:
    """Write what a teardown did and proved: when each destroy went out, and each instance proven gone (the
    listings that missed it). ``on_refused`` is told of a write the store refused (a full disk), and the rest are
    still written: destroying stopped the billing, the record can wait. Without it the refusal is raised."""
    for instance_id, at in report.destroy_sent_at.items():
        await _record(store.record_transition(instance_id=instance_id, state=InstanceState.DESTROY_REQUESTED, at=at),
                      "record a destroy", on_refused)
    for gone in report.gone:
        await _record(store.record_gone(instance_id=gone.instance_id, missed_listing_at=gone.missed_listing_at,
                                        at=clock.now()), "record an instance proven gone", on_refused)


async def _record(write: Coroutine[Any, Any, object], what: str,
                  on_refused: Callable[[StoreError, str], None] | None) -> None:
    try:
        await write
    except StoreError as exc:
        if on_refused is None:
            raise
        on_refused(exc, what)


async def _poll(state: _Teardown, *, poll_s: float, max_rounds: int, patience_s: float) -> None:
    rounds, outage_wait, last_complete = 0, poll_s, state.clock.now()
    while state.pending and rounds < max_rounds and state.report.key_rejected is None:
        wait = poll_s
        if await state.listing():
            rounds, outage_wait, last_complete = rounds + 1, poll_s, state.clock.now()
        elif state.clock.now() - last_complete >= patience_s:
            state.report.errors.append(f"no complete listing for {state.clock.now() - last_complete:.0f} s: "
                                       "gave up proving the rest gone")
            return
        else:
            wait, outage_wait = outage_wait, min(outage_wait * 2, max(MAX_OUTAGE_WAIT_S, poll_s))
        if state.pending and state.report.key_rejected is None:
            await state.clock.sleep(wait)
