"""A DataTable that is refreshed by diff, never by clear-and-reload, and that fits its width.

Rows are keyed by the model's id. A refresh updates only the cells that changed (``update_cell`` without width
updates), adds new rows, drops vanished rows with one re-index for all of them, and re-orders only when the order
changed — all inside one ``batch_update`` so the screen repaints once. The cursor stays on the same key and the
scroll offset is untouched, so a live table can be read while it refreshes.

Fitting: a column widens when a refreshed cell is wider than it (a value that grows is never cut). When the
columns together are wider than the table, the columns named in ``drop_order`` are hidden, first named first,
until the rest fit; they come back when the terminal is wide enough again. If what is left is still too wide, the
``squeeze`` column (a long free text: a reason, an outcome) gives up the difference: a cell given as ``Forms``
shows the longest of its forms that fits, whole (a verdict reads ``LEAK: unknown campaign`` rather than being cut
mid-word); any other cell is shortened with "…" (never below ``SQUEEZE_MIN`` cells). On a terminal narrower than
``WIDE`` the squeeze column is squeezed before any column is dropped, as long as ``SQUEEZE_USEFUL`` cells of it
stay; from ``WIDE`` columns on nothing is cut while a column can still be dropped (the free text is squeezed only
when every other droppable column is gone). Hiding or showing a column, or squeezing it more or less, rebuilds the
table once (a resize, or a value that grew past the room left), never on an ordinary refresh.

Keys: besides the arrows, PageUp/PageDown and Home/End, ``j``/``k`` move down/up and ``g``/``G`` go to the first/last
row, as in k9s and lazydocker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual._two_way_dict import TwoWayDict
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widgets import DataTable
from textual.widgets._data_table import CellKey, ColumnKey, RowKey


@dataclass(frozen=True, slots=True)
class Forms:
    """A cell with shorter forms, longest first, for a column that may be squeezed: the table shows ``full`` while
    it fits, else the first shorter form that fits, whole; only when none fits is the shortest cut with "…"."""

    full: str | Text
    shorter: tuple[str | Text, ...] = ()

    def __str__(self) -> str:
        return self.full.plain if isinstance(self.full, Text) else self.full


Cell = str | Text | Forms


def restyle(cell: Cell, style: str) -> Cell:
    """``cell`` (every form of it) as plain text in ``style``."""
    if isinstance(cell, Forms):
        return Forms(Text(str(cell), style=style), tuple(Text(str(restyle(f, style)), style=style)
                                                         for f in cell.shorter))
    return Text(cell.plain if isinstance(cell, Text) else cell, style=style)
SCROLLBAR = 2          # the vertical scrollbar's width, kept free so the last column is never under it
ASCENDING, DESCENDING = "▲", "▼"
SQUEEZE_MIN = 6           # the squeeze column is never narrower than this
SQUEEZE_USEFUL = 24       # ... and columns are dropped rather than squeeze it below this
WIDE = 140                # a terminal this wide or wider shows every cell whole (columns dropped instead)


def cell_width(cell: Cell) -> int:
    if isinstance(cell, Forms):
        cell = cell.full
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


class KeyedTable(DataTable[str | Text]):
    """``sync(rows, order)`` makes the table show exactly ``rows`` (key -> cells, one per column) in ``order``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First row", show=False),
        Binding("G", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(self, *, columns: Sequence[tuple[str, str]], drop_order: Sequence[str] = (),
                 squeeze: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._column_spec = tuple(columns)
        unknown = {*drop_order, *([squeeze] if squeeze else [])} - {key for key, _ in columns}
        if unknown:
            raise ValueError(f"drop_order names columns the table does not have: {sorted(unknown)}")
        self._drop_order = tuple(drop_order)
        self._squeeze = squeeze
        self._limit: int | None = None      # the squeeze column's width now (None: not squeezed)
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._order: list[str] = []
        self._widths = {key: cell_len(label) for key, label in self._column_spec}   # widest cell seen, per column
        self._shown: tuple[str, ...] = self.column_keys
        self._sort: tuple[str, bool] | None = None

    def on_mount(self) -> None:
        self._shown, self._limit = self._fitting(self.size.width)
        for key in self._shown:
            self.add_column(self._label(key), key=key)

    # --- what is shown ----------------------------------------------------------------------------------------------

    @property
    def column_keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self._column_spec)

    @property
    def keys_in_order(self) -> tuple[str, ...]:
        return tuple(self._order)

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor, or None for an empty table."""
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    def show_sort(self, column: str | None, *, reverse: bool = False) -> None:
        """Mark ``column``'s header with ▲ (ascending) or ▼ (descending); None: no column is sorted."""
        new = None if column is None else (column, reverse)
        if new == self._sort:
            return
        self._sort = new
        for key in self._shown:
            self.columns[ColumnKey(key)].label = Text(self._label(key))
        self._require_update_dimensions = True
        self.refresh()

    def _label(self, key: str) -> str:
        label = dict(self._column_spec)[key]
        if self._sort is not None and self._sort[0] == key:
            return f"{label} {DESCENDING if self._sort[1] else ASCENDING}"
        return label

    def _fitting(self, width: int) -> tuple[tuple[str, ...], int | None]:
        """The columns that fit in ``width`` cells, dropping in ``drop_order``, and the squeeze column's width when
        it must be shortened (a width of 0: not laid out yet)."""
        shown = list(self.column_keys)
        if width <= 0:
            return tuple(shown), None
        room = width - SCROLLBAR
        pad = 2 * self.cell_padding
        total = sum(self._widths[key] + pad + (2 if self._sort and self._sort[0] == key else 0) for key in shown)
        squeeze = self._squeeze
        wide = width >= WIDE
        for key in self._drop_order:
            if total <= room:
                break
            if wide and key == squeeze:
                continue   # on a wide terminal the free text stays whole while another column can go
            if not wide and squeeze in shown and self._widths[squeeze] - (total - room) >= SQUEEZE_USEFUL:
                break      # shortening the free text is enough: no column has to go yet
            shown.remove(key)
            total -= self._widths[key] + pad
        limit = None
        if total > room and squeeze in shown:
            limit = max(SQUEEZE_MIN, self._widths[squeeze] - (total - room))
        return tuple(shown), limit

    def _shown_cell(self, column: str, cell: Cell) -> str | Text:
        """``cell`` as it fits its column now: the longest form that fits, or a long cell ending in "…"."""
        limit = self._limit
        if isinstance(cell, Forms):
            if column != self._squeeze or limit is None or cell_width(cell.full) <= limit:
                return cell.full
            cell = next((form for form in cell.shorter if cell_width(form) <= limit), (cell.full, *cell.shorter)[-1])
        if column != self._squeeze or limit is None or cell_width(cell) <= limit:
            return cell
        text = cell.copy() if isinstance(cell, Text) else Text(cell)
        text.truncate(limit, overflow="ellipsis")
        return text

    def on_resize(self, event: Resize) -> None:
        self._refit()

    def _refit(self) -> None:
        wanted = self._fitting(self.size.width)
        if wanted != (self._shown, self._limit):
            self._rebuild(*wanted)

    def _rebuild(self, shown: tuple[str, ...], limit: int | None) -> None:
        """Show the ``shown`` columns: one clear and reload (only when the columns or the squeeze change)."""
        keep_cursor = self.cursor_key
        self._shown, self._limit = shown, limit
        index = [self.column_keys.index(key) for key in shown]
        with self.app.batch_update():
            self.clear(columns=True)
            for key in shown:
                self.add_column(self._label(key), key=key)
            for key in self._order:
                cells = self._cells[key]
                self.add_row(*(self._shown_cell(shown[n], cells[i]) for n, i in enumerate(index)), key=key)
            if keep_cursor is not None:
                self.move_cursor(row=self._order.index(keep_cursor), animate=False)

    # --- refresh ----------------------------------------------------------------------------------------------------

    def sync(self, rows: Mapping[str, tuple[Cell, ...]], order: Sequence[str]) -> None:
        """Show ``rows`` in ``order`` (every key of ``order`` must be in ``rows``)."""
        keep_cursor = self.cursor_key
        columns = self.column_keys
        shown = set(self._shown)
        index = [columns.index(key) for key in self._shown]
        with self.app.batch_update():
            vanished = [key for key in self._cells if key not in rows]
            if vanished:
                self._remove_rows(vanished)
            for key in order:
                cells = rows[key]
                old = self._cells.get(key)
                if old is None:
                    self._grow(columns, cells)
                    self.add_row(*(self._shown_cell(self._shown[n], cells[i]) for n, i in enumerate(index)),
                                 key=key)
                elif old != cells:
                    for column, before, after in zip(columns, old, cells, strict=True):
                        if before != after:
                            self._update(key, column, after, visible=column in shown)
                self._cells[key] = cells
            if list(order) != self._order or vanished:
                self._apply_order(order)
            if keep_cursor is not None and keep_cursor in self._cells:
                at = self._order.index(keep_cursor)
                if at != self.cursor_row:
                    self.move_cursor(row=at, animate=False, scroll=False)
        if self.is_mounted:
            self._refit()

    def _grow(self, columns: Sequence[str], cells: Sequence[Cell]) -> None:
        for column, cell in zip(columns, cells, strict=True):
            width = cell_width(cell)
            if width > self._widths[column]:
                self._widths[column] = width

    def _update(self, key: str, column: str, cell: Cell, *, visible: bool) -> None:
        """One changed cell; its column widens when the new value is wider than anything it held (never cut)."""
        width = cell_width(cell)
        if width > self._widths[column]:
            self._widths[column] = width
        if not visible:
            return
        cell = self._shown_cell(column, cell)
        width = cell_width(cell)
        self.update_cell(key, column, cell)
        shown = self.columns[ColumnKey(column)]
        if width > shown.content_width:
            shown.content_width = width
            self._require_update_dimensions = True

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
