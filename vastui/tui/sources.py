"""The console's data sources: what one refresh of each fetches, and how it is joined with what the store knows.

Plain async functions over the services the console was given (the marketplace, the store, the clock); they return
the immutable pages of ``state.py``. No Textual here: the app runs each one in a polling worker and turns its page
into a message, and a test can call them against the simulator with no app at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from vastui.campaign.adhoc import is_adhoc
from vastui.campaign.watch import LeakReport, find_leaks
from vastui.clock import Clock
from vastui.errors import VastuiError
from vastui.store.records import BadHost, HostKnowledge
from vastui.tui.campaign_state import PastCampaign, ReceiptPage
from vastui.tui.services import ConsoleMarket
from vastui.tui.state import AccountPage, ActivityPage, InstancePage, OfferPage, transfers_of

if TYPE_CHECKING:
    from vastui.store import Store

ACTIVITY_RECORDS = 500
RECEIPTS_SHOWN = 50


async def offer_page(*, market: ConsoleMarket, store: Store | None, body: Mapping[str, object],
                     workload_digest: str | None, clock: Clock) -> OfferPage:
    """The offers the search ``body`` finds, with what the store measured on their hosts for ``workload_digest``
    (None: the latest campaign's workload) and the hosts it holds as bad."""
    offers = tuple(await market.search_offers_body(body))
    knowledge: dict[tuple[int, str, int], HostKnowledge] = {}
    bad: dict[int, BadHost] = {}
    now = clock.now()
    if store is not None:
        digest = workload_digest or await latest_workload(store)
        if digest is not None and offers:
            machine_ids = sorted({o.machine_id for o in offers})
            for k in await store.host_knowledge(workload_digest=digest, machine_ids=machine_ids):
                knowledge[(k.machine_id, k.gpu_name, k.num_gpus)] = k
        bad = {b.machine_id: b for b in await store.active_bad_hosts(now=now)}
    return OfferPage(offers=offers, knowledge=knowledge, bad_hosts=bad, at=now)


async def latest_workload(store: Store) -> str | None:
    """The workload of the most recent campaign: whose measurements the offers table shows by default."""
    campaigns = [c for c in await store.campaigns() if not is_adhoc(c)]
    latest = max(campaigns, key=lambda c: c.created_at, default=None)
    return None if latest is None else latest.manifest_digest


async def instance_page(*, market: ConsoleMarket, store: Store | None, clock: Clock) -> InstancePage:
    """The instance listing (maybe incomplete), with the store's intent for each instance it owns."""
    listing = await market.list_instances()
    intents = {}
    if store is not None:
        for owned in await store.owned_instances():
            if owned.intent.instance_id is not None:
                intents[owned.intent.instance_id] = owned.intent
    return InstancePage(listing=listing, intents=intents, at=clock.now())


async def account_page(*, market: ConsoleMarket, store: Store | None) -> AccountPage:
    """The user, and the transfers the store's audit log holds (None without a store)."""
    user = await market.get_user()
    return AccountPage(user=user, transfers=None if store is None else await transfers_of(store))


async def leak_report(*, market: ConsoleMarket, store: Store, clock: Clock) -> LeakReport:
    """The leak check; a check that listed nothing at all is a failure of the source, not an empty report."""
    report = await find_leaks(market=market, store=store, clock=clock)
    if not report.is_complete and report.listed_count == 0 and report.error:
        raise VastuiError(f"leak check: {report.error}", title="Leaks unknown")
    return report


async def activity_page(*, store: Store, clock: Clock, limit: int = ACTIVITY_RECORDS) -> ActivityPage:
    """The audit log's latest ``limit`` records, newest first."""
    records = await store.latest_audit_records(limit=limit)
    return ActivityPage(records=tuple(records), at=clock.now())


async def receipt_page(*, store: Store, clock: Clock, shown: int = RECEIPTS_SHOWN) -> ReceiptPage:
    """The ``shown`` latest campaigns (the console's ad-hoc ones left out), newest first, each with its latest
    receipt's text (None before it has one)."""
    campaigns = sorted((c for c in await store.campaigns() if not is_adhoc(c)),
                       key=lambda c: (c.created_at, c.campaign_id), reverse=True)
    past = []
    for campaign in campaigns[:shown]:
        receipt = await store.latest_receipt(campaign.campaign_id)
        past.append(PastCampaign(campaign.campaign_id, campaign.created_at, campaign.phase,
                                 campaign.manifest_digest, None if receipt is None else receipt.markdown_text,
                                 owner=None if campaign.by is None else campaign.by.short))
    return ReceiptPage(tuple(past), at=clock.now())
