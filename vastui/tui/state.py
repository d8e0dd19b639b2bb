"""The console's latest picture of the world: one immutable snapshot, replaced whenever a source refreshes.

Views render from it; nothing in it is fetched by a view. Derived figures (burn, runway, leak count) are computed
here so the status bar, the account view and the tests agree on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vastui.approval import AuditRecord
from vastui.campaign.watch import LeakReport
from vastui.store.records import BadHost, HostKnowledge, Intent
from vastui.tui.campaign_state import CampaignEnd, CampaignPicture, ReceiptPage
from vastui.tui.health import Source, SourceHealth
from vastui.vast.models import InstanceListing, InstanceStatus, Offer, User


@dataclass(frozen=True, slots=True)
class OfferPage:
    """One offers refresh: offers in the server's order, what is known about their hosts, and when."""

    offers: tuple[Offer, ...]
    knowledge: dict[tuple[int, str, int], HostKnowledge]
    bad_hosts: dict[int, BadHost]
    at: float


@dataclass(frozen=True, slots=True)
class InstancePage:
    """One instances refresh: the listing (maybe incomplete), the store's intents by instance id, and when."""

    listing: InstanceListing
    intents: dict[int, Intent]
    at: float


@dataclass(frozen=True, slots=True)
class ActivityPage:
    """The latest records of the audit log, newest first, and when they were read."""

    records: tuple[AuditRecord, ...]
    at: float


@dataclass(frozen=True, slots=True)
class ConsoleState:
    offers: OfferPage | None = None
    instances: InstancePage | None = None
    user: User | None = None
    leaks: LeakReport | None = None
    health: dict[Source, SourceHealth] = field(default_factory=dict)
    campaign: CampaignPicture | None = None        # the campaign the console follows, as last drawn
    campaign_end: CampaignEnd | None = None        # how it ended (receipt), once it has
    receipts: ReceiptPage | None = None            # past campaigns from the store
    activity: ActivityPage | None = None           # the audit log's latest records (needs a store)

    @property
    def burn_usd_per_h(self) -> float | None:
        """What every listed instance bills per hour: $/h while up, storage alone when stopped."""
        if self.instances is None:
            return None
        total = 0.0
        for inst in self.instances.listing.instances:
            if InstanceStatus.STOPPED in (inst.actual_status, inst.intended_status):
                total += inst.storage_total_cost or 0.0
            else:
                total += inst.dph_total or 0.0
        return total

    @property
    def runway_h(self) -> float | None:
        """Hours until the credit runs out at the current burn; None when unknown or nothing burns."""
        burn = self.burn_usd_per_h
        if self.user is None or self.user.credit is None or not burn:
            return None
        return max(0.0, self.user.credit) / burn

    @property
    def leak_count(self) -> int | None:
        """vastui's leaks (unowned instances are counted apart); None before the first check."""
        return None if self.leaks is None else len(self.leaks.leaked)

    @property
    def unowned_count(self) -> int | None:
        return None if self.leaks is None else len(self.leaks.unowned)

    def errors(self) -> list[tuple[Source, str]]:
        """The last error of each source failing right now."""
        return [(s, h.last_error or "error") for s, h in self.health.items() if h.is_failing]
