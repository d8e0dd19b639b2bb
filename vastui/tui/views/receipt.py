"""Receipt: the receipt of a finished campaign, rendered from its Markdown, and the past campaigns in the store.

The list is the store's campaigns, newest first; the cursor picks whose receipt is shown (the followed campaign's
when it has one). Receipts are read by the console's worker, never here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Markdown, Static

from vastui.tui.campaign_state import PastCampaign, ReceiptPage
from vastui.tui.state import ConsoleState
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.widgets.keyed_table import Cell, KeyedTable

COLUMNS: tuple[tuple[str, str], ...] = (("id", "campaign"), ("created", "created (UTC)"), ("owner", "owner"),
                                        ("phase", "phase"), ("receipt", "receipt"))
NO_RECEIPT = "*No receipt yet: a campaign's receipt is written when it finishes (teardown proven).*"


def campaign_cells(c: PastCampaign, *, followed: str | None) -> tuple[Cell, ...]:
    created = datetime.fromtimestamp(c.created_at, tz=UTC).strftime("%Y-%m-%d %H:%M")
    mark = "▶ " if c.campaign_id == followed else ""
    return (mark + c.campaign_id, created, c.owner or "-", c.phase, "yes" if c.receipt_markdown else "-")


class ReceiptView(ConsoleView):
    view_name = "receipt"
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("campaign", "▶ marks the campaign the console follows; Enter shows the receipt of the row"),
        ("owner", "the operator and host that started it (in a team's shared store: whose it is)"),
        ("receipt", "whether the campaign finished and wrote its receipt"),
    )

    def __init__(self) -> None:
        super().__init__()
        self._page: ReceiptPage | None = None
        self._shown: str | None = None
        self._chosen: str | None = None   # picked with the cursor; None: follow the default

    def compose(self) -> ComposeResult:
        yield Static("Receipts: reading the store…", id="receipt-title", classes="view-title", markup=False)
        with Vertical(id="receipt-panes"):
            yield KeyedTable(columns=COLUMNS, drop_order=("created", "phase"), id="receipt-list")
            with VerticalScroll(id="receipt-body"):
                yield Markdown(NO_RECEIPT, id="receipt-markdown")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#receipt-list", KeyedTable)

    def focus_main(self) -> None:
        focus_now(self.table)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        page = state.receipts
        followed = state.campaign.snapshot.campaign_id if state.campaign is not None else None
        if page is None:
            return
        self._page = page
        with_receipt = sum(1 for c in page.campaigns if c.receipt_markdown)
        self.query_one("#receipt-title", Static).update(
            f"Receipts: {len(page.campaigns)} campaign(s) in the store, {with_receipt} with a receipt")
        self.table.sync({c.campaign_id: campaign_cells(c, followed=followed) for c in page.campaigns},
                        [c.campaign_id for c in page.campaigns])
        wanted = self._chosen or self._default(page, followed)
        self._show(wanted)

    @staticmethod
    def _default(page: ReceiptPage, followed: str | None) -> str | None:
        ids = [c.campaign_id for c in page.campaigns]
        if followed in ids:
            return followed
        return next((c.campaign_id for c in page.campaigns if c.receipt_markdown), ids[0] if ids else None)

    def _show(self, campaign_id: str | None) -> None:
        page = self._page
        past = None if page is None else next((c for c in page.campaigns if c.campaign_id == campaign_id), None)
        text = NO_RECEIPT if past is None or not past.receipt_markdown else past.receipt_markdown
        if text != self._shown:
            self._shown = text
            self.query_one("#receipt-markdown", Markdown).update(text)
        if campaign_id is not None and campaign_id in self.table.keys_in_order:
            index = self.table.keys_in_order.index(campaign_id)
            if index != self.table.cursor_row:
                self.table.move_cursor(row=index, animate=False, scroll=False)

    @on(DataTable.RowSelected, "#receipt-list")
    def _selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key is not None:
            self._chosen = key
            self._show(key)
