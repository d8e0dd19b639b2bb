"""Messages the console's workers post to the app (past tense: something was refreshed, or failed to be).

One message class per kind of page, each carrying its page typed: the app has one handler per message and never
asks what a payload is.
"""

from __future__ import annotations

from textual.message import Message

from vastui.campaign.watch import LeakReport
from vastui.tui.campaign_state import CampaignEnd, CampaignPicture, ReceiptPage
from vastui.tui.health import Source
from vastui.tui.state import AccountPage, ActivityPage, InstancePage, OfferPage


class OffersRefreshed(Message):
    """The offers source delivered a page (``at``: when, on the services' clock)."""

    def __init__(self, page: OfferPage, at: float) -> None:
        super().__init__()
        self.page = page
        self.at = at


class InstancesRefreshed(Message):
    """The instances source delivered a page (its listing may be incomplete)."""

    def __init__(self, page: InstancePage, at: float) -> None:
        super().__init__()
        self.page = page
        self.at = at


class AccountRefreshed(Message):
    """The account source delivered the user (and the transfers, with a store)."""

    def __init__(self, page: AccountPage, at: float) -> None:
        super().__init__()
        self.page = page
        self.at = at


class LeaksRefreshed(Message):
    """The leak check delivered a report."""

    def __init__(self, report: LeakReport, at: float) -> None:
        super().__init__()
        self.report = report
        self.at = at


class SourceFailed(Message):
    """A refresh of ``source`` failed; the data shown is kept and marked stale."""

    def __init__(self, source: Source, error: str, at: float) -> None:
        super().__init__()
        self.source = source
        self.error = error
        self.at = at


class LogsFetched(Message):
    """The latest logs of an instance (the whole text the marketplace returned)."""

    def __init__(self, instance_id: int, text: str) -> None:
        super().__init__()
        self.instance_id = instance_id
        self.text = text


class LogsFailed(Message):
    def __init__(self, instance_id: int, error: str) -> None:
        super().__init__()
        self.instance_id = instance_id
        self.error = error


class CampaignDrawn(Message):
    """A fresh picture of the followed campaign."""

    def __init__(self, picture: CampaignPicture) -> None:
        super().__init__()
        self.picture = picture


class CampaignEnded(Message):
    """The followed campaign ended (its receipt, or its error)."""

    def __init__(self, end: CampaignEnd) -> None:
        super().__init__()
        self.end = end


class ReceiptsLoaded(Message):
    """Past campaigns and their receipts were read from the store."""

    def __init__(self, page: ReceiptPage) -> None:
        super().__init__()
        self.page = page


class ActivityRead(Message):
    """The audit log's latest records were read."""

    def __init__(self, page: ActivityPage) -> None:
        super().__init__()
        self.page = page
