"""The leak watcher: every instance still billing without a reason, what it has cost, and what it burns.

It reconciles the marketplace's *full* instance listing against the store. A listing that failed part-way makes
the report *unknown*, never "no leaks": an instance on a lost page bills all the same. An instance is leaked when
no active campaign owns it (its campaign finished, crashed or is unknown here), when it is past its hard deadline,
or when it is stopped (storage keeps billing; vastui destroys, never stops). Instances vastui never created are
reported as ``unowned`` and are never destroyed unless the operator asks for them by name.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from vastui.approval import Action, Approval, ApprovalRequest, Approver, instance_target
from vastui.bench.billing import accrued_usd
from vastui.campaign.adhoc import is_adhoc
from vastui.campaign.cleanup import TeardownReport, record_teardown, teardown
from vastui.campaign.labels import parse_label
from vastui.campaign.owner import OwnerState, owner_state
from vastui.campaign.ports import CampaignStore, Marketplace
from vastui.clock import Clock
from vastui.errors import ApiError
from vastui.events import EventBus
from vastui.store import Campaign, Intent, OwnedInstance
from vastui.store.records import CampaignPhase
from vastui.vast.models import Instance, InstanceListing, InstanceStatus


class LeakReason(enum.StrEnum):
    CAMPAIGN_FINISHED = "campaign_finished"  # its campaign has ended; nothing will destroy it now
    CAMPAIGN_CRASHED = "campaign_crashed"    # its campaign crashed and was not resumed
    CAMPAIGN_UNKNOWN = "campaign_unknown"    # a vastui label naming a campaign this store does not know
    PAST_DEADLINE = "past_deadline"          # its campaign is active but the instance outlived its hard deadline
    STOPPED_BILLING = "stopped_billing"      # stopped: no GPU charge, but storage bills until it is destroyed
    UNOWNED = "unowned"                      # not vastui's: reported, never destroyed unasked


REASON_TEXT: Mapping[LeakReason, str] = {
    LeakReason.CAMPAIGN_FINISHED: "its campaign has finished",
    LeakReason.CAMPAIGN_CRASHED: "its campaign crashed and was not resumed",
    LeakReason.CAMPAIGN_UNKNOWN: "labelled by a campaign this store does not know",
    LeakReason.PAST_DEADLINE: "past its hard deadline",
    LeakReason.STOPPED_BILLING: "stopped but still billing storage",
    LeakReason.UNOWNED: "not created by vastui",
}


class LeakVerdict(enum.StrEnum):
    CLEAN = "clean"      # a complete listing, no vastui leak (unowned instances may remain: the operator's)
    LEAKING = "leaking"  # a complete listing with at least one vastui leak
    UNKNOWN = "unknown"  # the listing was incomplete: there may be leaks it did not show


@dataclass(frozen=True, slots=True)
class Leak:
    """One instance billing without a reason. Costs are at list price and None when the marketplace did not say.

    ``accrued_usd`` is ``dph_total`` × the time since ``start_date``; both it and ``burn_usd_per_h`` are upper
    bounds for a stopped instance, which bills only its storage (the listing does not give that part). Traffic
    (the image pull included) is billed per GB on top and is not in the listing, so it is not in ``accrued_usd``.
    """

    instance_id: int
    label: str | None
    reason: LeakReason
    status: str | None              # the provider's actual_status; None while provisioning
    dph_total: float | None         # $/hr
    accrued_usd: float | None
    burn_usd_per_h: float | None
    campaign_id: str | None
    detail: str = ""
    started_at: float | None = None  # the listing's start_date, on the marketplace's clock

    @property
    def is_unowned(self) -> bool:
        return self.reason is LeakReason.UNOWNED


@dataclass(frozen=True, slots=True)
class UnlistedInstance:
    """An instance the store says a campaign may own that a complete listing did not show (information only:
    it is gone only once two successive complete listings miss it and that is recorded). ``instance_id`` is None
    for a create that may or may not have happened (its intent was never bound)."""

    campaign_id: str
    intent_id: int
    instance_id: int | None
    label: str
    intent_status: str
    last_state: str | None


@dataclass(frozen=True, slots=True)
class LeakReport:
    """What one check found. Read ``verdict`` first: an incomplete listing is UNKNOWN whatever else it shows."""

    checked_at: float
    is_complete: bool
    error: str | None
    listed_count: int
    leaks: tuple[Leak, ...]
    unlisted: tuple[UnlistedInstance, ...]

    @property
    def leaked(self) -> tuple[Leak, ...]:
        """vastui's own leaks (everything but ``unowned``)."""
        return tuple(leak for leak in self.leaks if not leak.is_unowned)

    @property
    def unowned(self) -> tuple[Leak, ...]:
        return tuple(leak for leak in self.leaks if leak.is_unowned)

    @property
    def verdict(self) -> LeakVerdict:
        if not self.is_complete:
            return LeakVerdict.UNKNOWN
        return LeakVerdict.LEAKING if self.leaked else LeakVerdict.CLEAN

    @property
    def burn_usd_per_h(self) -> float:
        """What vastui's leaks burn per hour (those with a known price)."""
        return sum(leak.burn_usd_per_h or 0.0 for leak in self.leaked)

    @property
    def accrued_usd(self) -> float:
        return sum(leak.accrued_usd or 0.0 for leak in self.leaked)

    def summary(self) -> str:
        """One line for the operator; never says "no leaks" about an incomplete listing."""
        unowned = f"; {len(self.unowned)} unowned instance(s) not vastui's" if self.unowned else ""
        found = (f"{len(self.leaked)} leaked instance(s) burning ${self.burn_usd_per_h:.3f}/h, "
                 f"${self.accrued_usd:.2f} so far")
        if self.verdict is LeakVerdict.UNKNOWN:
            seen = found if self.leaked else "none seen"
            return (f"leak state UNKNOWN: the instance listing is incomplete ({self.error}); "
                    f"{self.listed_count} instance(s) read, {seen}{unowned}")
        if self.verdict is LeakVerdict.LEAKING:
            return f"{found} (of {self.listed_count} listed){unowned}"
        return f"no leaks among {self.listed_count} listed instance(s){unowned}"


async def find_leaks(*, market: Marketplace, store: CampaignStore, clock: Clock,
                     listing: InstanceListing | None = None) -> LeakReport:
    """Reconcile the full instance listing (``listing``, when the caller has just read it) against the store;
    costs and deadlines are judged at ``clock.now()``, read right after the listing: give it the client's
    ``MarketClock``, so "now" is the marketplace's (its ``start_date`` is on that clock; docs/architecture.md, One
    clock for money).

    A failed listing call is reported like an incomplete listing (UNKNOWN), with its error. Reads only.
    """
    if listing is None:
        listing = await read_listing(market)
    now = clock.now()
    owned = await store.owned_instances()
    campaigns = {c.campaign_id: c for c in await store.campaigns()}
    owners = await store.campaign_owners()
    gone = {cid for cid, owner in owners.items() if owner_state(owner) is OwnerState.GONE}
    by_id = {o.intent.instance_id: o.intent for o in owned if o.intent.instance_id is not None}
    by_label = {o.intent.label: o.intent for o in owned if o.intent.instance_id is None}
    leaks: list[Leak] = []
    for instance in listing.instances:
        intent = by_id.get(instance.id) or (by_label.get(instance.label) if instance.label else None)
        if intent is None:
            intent = await store.intent_for_instance(instance.id)  # e.g. recorded gone, yet listed again
        leak = _judge(instance, intent, campaigns, now, owner_gone=gone)
        if leak is not None:
            leaks.append(leak)
    unlisted = _unlisted(owned, listing) if listing.is_complete else ()
    is_complete, error = listing.is_complete, listing.error
    if listing.unreadable:
        # the other rows are judged; an unreadable one could be a leak nobody can price or date
        rows = "; ".join(row.describe() for row in listing.unreadable[:3])
        more = f" and {len(listing.unreadable) - 3} more" if len(listing.unreadable) > 3 else ""
        is_complete, error = False, "; ".join(filter(None, (error, f"{rows}{more}")))
    return LeakReport(checked_at=now, is_complete=is_complete, error=error,
                      listed_count=len(listing.instances) + len(listing.unreadable), leaks=tuple(leaks),
                      unlisted=unlisted)


async def read_listing(market: Marketplace) -> InstanceListing:
    """The full instance listing; a failed call is an incomplete listing carrying its error."""
    try:
        return await market.list_instances()
    except ApiError as exc:
        return InstanceListing(instances=(), is_complete=False, error=str(exc))


def campaign_of_label(label: str | None) -> str | None:
    """The campaign id in a vastui label (``vastui-<campaign>-<candidate>-<offer>``), or None."""
    parsed = parse_label(label)
    return parsed.campaign_id if parsed is not None else None


def _judge(instance: Instance, intent: Intent | None, campaigns: Mapping[str, Campaign], now: float, *,
           owner_gone: Collection[str] = ()) -> Leak | None:
    campaign_id = intent.campaign_id if intent is not None else campaign_of_label(instance.label)
    if campaign_id is None:
        return _leak(instance, LeakReason.UNOWNED, None, now, "no intent and no vastui label")
    campaign = campaigns.get(campaign_id)
    if campaign is None:
        return _leak(instance, LeakReason.CAMPAIGN_UNKNOWN, campaign_id, now,
                     f"campaign {campaign_id} is not in this store")
    if not campaign.is_active:
        return _leak(instance, LeakReason.CAMPAIGN_FINISHED, campaign_id, now,
                     f"campaign {campaign_id} ended in phase {campaign.phase}")
    if campaign.phase == CampaignPhase.CRASHED:
        return _leak(instance, LeakReason.CAMPAIGN_CRASHED, campaign_id, now,
                     f"campaign {campaign_id} crashed; `vastui campaign resume {campaign_id}` cleans it up")
    if campaign_id in owner_gone and is_adhoc(campaign):   # rented by hand at a console that died without a word
        return _leak(instance, LeakReason.CAMPAIGN_CRASHED, campaign_id, now,
                     "the console that rented it by hand is gone; nothing will destroy it")
    if campaign_id in owner_gone:   # its phase says it runs, but the process that ran it is gone (campaign/owner.py)
        return _leak(instance, LeakReason.CAMPAIGN_CRASHED, campaign_id, now,
                     f"campaign {campaign_id}'s console is gone (phase {campaign.phase} left behind); "
                     f"`vastui campaign resume {campaign_id}` cleans it up")
    deadline = intent.deadline_at if intent is not None and intent.deadline_at is not None else campaign.deadline_at
    if deadline is not None and now > deadline:
        return _leak(instance, LeakReason.PAST_DEADLINE, campaign_id, now,
                     f"{(now - deadline) / 60:.1f} min past its deadline")
    if InstanceStatus.STOPPED in (instance.actual_status, instance.intended_status):
        return _leak(instance, LeakReason.STOPPED_BILLING, campaign_id, now, "stopped, not destroyed")
    return None


def _leak(instance: Instance, reason: LeakReason, campaign_id: str | None, now: float, detail: str) -> Leak:
    accrued = None
    if instance.dph_total is not None and instance.start_date is not None:
        # the marketplace's start date against the given clock; a start "in the future" (clock skew) costs nothing
        accrued = accrued_usd(dph_total=instance.dph_total, start_at=instance.start_date, now=now)
    return Leak(instance_id=instance.id, label=instance.label, reason=reason,
                status=None if instance.actual_status is None else str(instance.actual_status),
                dph_total=instance.dph_total, accrued_usd=accrued, burn_usd_per_h=instance.dph_total,
                campaign_id=campaign_id, detail=detail, started_at=instance.start_date)


def _unlisted(owned: Sequence[OwnedInstance], listing: InstanceListing) -> tuple[UnlistedInstance, ...]:
    ids = listing.present_ids
    labels = listing.present_labels

    def is_listed(intent: Intent) -> bool:  # an unbound intent can only be recognised by its label
        return intent.instance_id in ids if intent.instance_id is not None else intent.label in labels

    return tuple(
        UnlistedInstance(campaign_id=o.intent.campaign_id, intent_id=o.intent.intent_id,
                         instance_id=o.intent.instance_id, label=o.intent.label,
                         intent_status=str(o.intent.status), last_state=o.state)
        for o in owned if not is_listed(o.intent)
    )


class ListedDestroyApprover:
    """Approves destroying exactly the listed instances, once each, and nothing else (``vastui leaks --yes``)."""

    def __init__(self, instance_ids: Collection[int], *, clock: Clock,
                 granted_by: str = "vastui leaks --destroy --yes") -> None:
        self._pending = {instance_target(i) for i in instance_ids}
        self._clock = clock
        self._granted_by = granted_by

    async def request(self, request: ApprovalRequest) -> Approval | None:
        if request.action is not Action.DESTROY_INSTANCE or request.target not in self._pending:
            return None
        self._pending.discard(request.target)
        return Approval(request, granted_by=self._granted_by, granted_at=self._clock.now())


async def destroy_leaks(*, market: Marketplace, store: CampaignStore, approver: Approver, clock: Clock,
                        bus: EventBus, leaks: Sequence[Leak], poll_s: float = 5.0,
                        max_rounds: int = 60) -> TeardownReport:
    """Destroy each leak under its own approval, prove it gone (two successive complete listings) and record it.

    Leaks go by (campaign, reason) so each approval names its campaign and why, one group at a time so an
    interactive prompt is never interleaved with another.
    """
    merged = TeardownReport()
    groups: dict[tuple[str | None, LeakReason], list[int]] = {}
    for leak in leaks:
        groups.setdefault((leak.campaign_id, leak.reason), []).append(leak.instance_id)
    for (campaign_id, reason), ids in groups.items():
        part = await teardown(client=market, approver=approver, clock=clock, bus=bus, instance_ids=ids,
                              campaign_id=campaign_id, reason=f"leaked: {REASON_TEXT[reason]}", poll_s=poll_s,
                              max_rounds=max_rounds)
        await record_teardown(store, part, clock=clock)
        merged.gone.extend(part.gone)
        merged.still_alive.extend(part.still_alive)
        merged.refused.extend(part.refused)
        merged.errors.extend(part.errors)
        merged.destroy_errors.update(part.destroy_errors)
        merged.destroy_sent_at.update(part.destroy_sent_at)
    return merged
