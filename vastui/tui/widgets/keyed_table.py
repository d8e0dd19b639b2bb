"""A DataTable that is refreshed by diff, never by clear-and-reload.

Rows are keyed by the model's id. A refresh updates only the cells that changed (``update_cell`` without width
updates), adds new rows, drops vanished rows with one re-index for all of them, and re-orders only when the order
changed — all inside one ``batch_update`` so the screen repaints once. The cursor stays on the same key and the
scroll offset is untouched, so a live table can be read while it refreshes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets._data_table import CellKey, RowKey
from textual._two_way_dict import TwoWayDict

Cell = str | Text


class KeyedTable(DataTable[Cell]):
    """``sync(rows, order)`` makes the table show exactly ``rows`` (key -> cells) in ``order``. Columns named in
    ``grow`` widen when an updated cell needs it (for small tables whose text changes length, never hot columns)."""

    def __init__(self, *, columns: Sequence[tuple[str, str]], id: str | None = None,
                 classes: str | None = None, grow: Sequence[str] = ()) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._column_spec = tuple(columns)
        self._grow = frozenset(grow)
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._order: list[str] = []

    def on_mount(self) -> None:
        for key, label in self._column_spec:
            self.add_column(label, key=key)

    @property
    def column_keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self._column_spec)

    @property
    def keys_in_order(self) -> tuple[str, ...]:
        return tuple(self._order)

    def cells_of(self, key: str) -> tuple[Cell, ...] | None:
        return self._cells.get(key)

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor, or None for an empty table."""
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    def sync(self, rows: Mapping[str, tuple[Cell, ...]], order: Sequence[str]) -> None:
        """Show ``rows`` in ``order`` (every key of ``order`` must be in ``rows``)."""
        keep_cursor = self.cursor_key
        with self.app.batch_update():
            vanished = [key for key in self._cells if key not in rows]
            if vanished:
                self._remove_rows(vanished)
            columns = self.column_keys
            for key in order:
                cells = rows[key]
                old = self._cells.get(key)
                if old is None:
                    self.add_row(*cells, key=key)
                elif old != cells:
                    for column, before, after in zip(columns, old, cells, strict=True):
                        if before != after:
                            self.update_cell(key, column, after, update_width=column in self._grow)
                self._cells[key] = cells
            if list(order) != self._order or vanished:
                self._apply_order(order)
            if keep_cursor is not None and keep_cursor in self._cells:
                index = self._order.index(keep_cursor)
                if index != self.cursor_row:
                    self.move_cursor(row=index, animate=False, scroll=False)

    def _remove_rows(self, keys: Sequence[str]) -> None:
        """Drop several rows with one re-index (``remove_row`` re-indexes the whole table once per row)."""
        gone = set(keys)
        for key in keys:
            row_key = RowKey(key)
            for column_key in self._data.get(row_key, {}):
                self._updated_cells.discard(CellKey(row_key, column_key))
            self.rows.pop(row_key, None)
            self._data.pop(row_key, None)
            del self._cells[key]
        self._order = [key for key in self._order if key not in gone]
        self._require_update_dimensions = True

    def _apply_order(self, order: Sequence[str]) -> None:
        self._order = list(order)
        self._row_locations = TwoWayDict({RowKey(key): index for index, key in enumerate(self._order)})
        self._update_count += 1
        self.cursor_coordinate = self.cursor_coordinate  # clamp to the new row count
        self.refresh(layout=True)

