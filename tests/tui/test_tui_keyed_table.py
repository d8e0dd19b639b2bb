"""The keyed table: a refresh by diff shows exactly the new rows in the new order, keeps the cursor on its row,
and leaves the scroll offset alone."""

from __future__ import annotations

from textual.app import App, ComposeResult

from vastui.tui.widgets.keyed_table import KeyedTable

COLUMNS = (("id", "id"), ("price", "price"))


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield KeyedTable(columns=COLUMNS, id="t")


def rows(ids: list[int], price: dict[int, str] | None = None) -> dict[str, tuple[str, ...]]:
    price = price or {}
    return {str(i): (str(i), price.get(i, f"{i / 100:.2f}")) for i in ids}


async def test_sync_diffs_rows_keeps_cursor_and_scroll() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(KeyedTable)
        ids = list(range(100))
        table.sync(rows(ids), [str(i) for i in ids])
        await pilot.pause()
        table.move_cursor(row=50)
        await pilot.pause()
        scroll_before = table.scroll_y
        assert table.cursor_key == "50"

        # a typical refresh: 10 vanish (after the cursor), 5 appear, one price changes; the order holds
        kept = [i for i in ids if not 70 <= i < 80] + list(range(100, 105))
        order = [str(i) for i in kept]
        table.sync(rows(kept, {50: "9.99"}), order)
        await pilot.pause()
        assert table.row_count == len(kept)
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == order
        assert table.cursor_key == "50" and table.get_row("50") == ["50", "9.99"]
        assert table.scroll_y == scroll_before

        # a re-sort (and rows vanishing before the cursor): the cursor follows its row
        kept = [i for i in kept if not 10 <= i < 20]
        order = [str(i) for i in sorted(kept, reverse=True)]
        table.sync(rows(kept, {50: "9.99"}), order)
        await pilot.pause()
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == order
        assert table.cursor_key == "50" and str(table.get_row_at(table.cursor_row)[0]) == "50"
        assert table.keys_in_order == tuple(order)

        # an unchanged refresh changes nothing
        table.sync(rows(kept, {50: "9.99"}), order)
        assert table.keys_in_order == tuple(order) and table.cursor_key == "50"
        # everything vanishes
        table.sync({}, [])
        assert table.row_count == 0 and table.cursor_key is None
