"""The console's latest picture of the world: one immutable snapshot, replaced whenever a source refreshes.

Views render from it; nothing in it is fetched by a view. Derived figures (burn, runway, leak count) are computed
here so the status bar, the account view and the tests agree on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vastui.approval import Action, AuditKind, AuditRecord
from vastui.campaign.watch import LeakReport
from vastui.store.records import BadHost, HostKnowledge, Intent
from vastui.tui.campaign_state import CampaignEnd, CampaignPicture, ReceiptPage
from vastui.tui.health import Source, SourceHealth
from vastui.vast.models import Instance, InstanceListing, Offer, User

if TYPE_CHECKING:
    from vastui.store import Store

GONE_KEPT = 50      # destroyed or vanished instances remembered for the greyed history (newest kept)


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
class Transfer:
    """One credit transfer this account sent, as the audit log recorded its call: when, to whom, and the outcome."""

    at: float
    recipient: str
    outcome: str


@dataclass(frozen=True, slots=True)
class AccountPage:
    """One account refresh: the user, and the transfers the store's audit log holds (newest first; None: no store
    to read)."""

    user: User
    transfers: tuple[Transfer, ...] | None


TRANSFERS_SHOWN = 20


async def transfers_of(store: Store) -> tuple[Transfer, ...]:
    """The credit transfers the audit log recorded (each call's outcome; not the approvals), newest first."""
    calls = [r for r in await store.audit_records()
             if r.action is Action.TRANSFER_CREDIT and r.kind is AuditKind.CALL]
    return tuple(Transfer(at=r.at, recipient=r.target.removeprefix("recipient:"), outcome=r.outcome)
                 for r in reversed(calls[-TRANSFERS_SHOWN:]))


@dataclass(frozen=True, slots=True)
class GoneInstance:
    """An instance a complete listing no longer shows: its last listed row, and that listing's time."""

    instance: Instance
    gone_at: float


def note_gone(previous: InstancePage | None, gone: Mapping[int, GoneInstance],
              page: InstancePage) -> dict[int, GoneInstance]:
    """``gone`` after ``page``: what ``previous`` listed and a complete ``page`` does not is gone (at ``page.at``);
    one listed again is not. An incomplete page proves nothing gone."""
    present = page.listing.present_ids
    result = {i: g for i, g in gone.items() if i not in present}
    if previous is not None and page.listing.is_complete:
        for inst in previous.listing.instances:
            if inst.id not in present:
                result.setdefault(inst.id, GoneInstance(inst, page.at))
    newest = sorted(result.values(), key=lambda g: g.gone_at, reverse=True)[:GONE_KEPT]
    return {g.instance.id: g for g in newest}


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
    gone: dict[int, GoneInstance] = field(default_factory=dict)   # instances listed before, missing since
    transfers: tuple[Transfer, ...] | None = None  # credit sent, from the audit log (None: no store to read)
    activity: ActivityPage | None = None           # the audit log's latest records (needs a store)

    @property
    def burn_usd_per_h(self) -> float | None:
        """What every listed instance bills per hour: $/h while up, storage alone when stopped."""
        return None if self.instances is None else self.instances.listing.burn_usd_per_h

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
