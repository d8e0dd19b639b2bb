"""Messages the console's workers post to the app (past tense: something was refreshed, or failed to be)."""

from __future__ import annotations

from textual.message import Message

from vastui.tui.health import Source
from vastui.tui.state import ActivityPage


class SourceRefreshed(Message):
    """A source delivered fresh data (``payload``'s type depends on the source)."""

    def __init__(self, source: Source, payload: object, at: float) -> None:
        super().__init__()
        self.source = source
        self.payload = payload
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
    """A fresh picture of the followed campaign (``campaign_state.CampaignPicture``)."""

    def __init__(self, picture: object) -> None:
        super().__init__()
        self.picture = picture


class CampaignEnded(Message):
    """The followed campaign ended (``campaign_state.CampaignEnd``: its receipt, or its error)."""

    def __init__(self, end: object) -> None:
        super().__init__()
        self.end = end


class ReceiptsLoaded(Message):
    """Past campaigns and their receipts were read from the store (``campaign_state.ReceiptPage``)."""

    def __init__(self, page: object) -> None:
        super().__init__()
        self.page = page


class ActivityRead(Message):
    """The audit log's latest records were read."""

    def __init__(self, page: ActivityPage) -> None:
        super().__init__()
        self.page = page
