"""``?``: what the current view answers to right now — its own keys first, then the keys of every table, then the
keys that work everywhere, then what the view's columns mean — in a modal that scrolls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

TABLE_KEYS: tuple[tuple[str, str], ...] = (
    ("↑ ↓  j k", "move the cursor"),
    ("PgUp PgDn", "a page up / down"),
    ("g G", "first / last row (also Home End)"),
)


@dataclass(frozen=True, slots=True)
class HelpSection:
    heading: str
    rows: tuple[tuple[str, str], ...]     # (key or column, what it does or means)
    is_keys: bool = True                  # False: the rows explain columns, not keys


def section_text(section: HelpSection) -> str:
    width = max((len(left) for left, _ in section.rows), default=4)
    lines = [section.heading]
    lines += [f"  {left:>{width}}  {right}" for left, right in section.rows]
    return "\n".join(lines)


def section_renderable(section: HelpSection) -> RenderableType:
    """The section as on screen: the keys (or columns) right-aligned, and a long explanation wrapped under itself
    (a hanging indent), never back under the keys."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    for left, right in section.rows:
        grid.add_row(left, right)
    return Group(Text(section.heading), Padding(grid, (0, 0, 0, 2)))


class HelpScreen(ModalScreen[None]):
    """Sections of (key or column, text) pairs; any of escape, q or ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, *, title: str, sections: Sequence[HelpSection]) -> None:
        super().__init__(classes="help-screen")
        self.title_text = title
        self.sections = tuple(s for s in sections if s.rows)

    @property
    def keys(self) -> tuple[tuple[str, str], ...]:
        """Every (key, what it does) pair shown, in order."""
        return tuple(row for s in self.sections if s.is_keys for row in s.rows)

    @property
    def text(self) -> str:
        return "\n\n".join(section_text(s) for s in self.sections)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="dialog-box"):
            yield Label(self.title_text, id="help-title")
            with VerticalScroll(id="help-scroll"):  # a view with many keys scrolls, nothing is cut off
                parts: list[RenderableType] = []
                for section in self.sections:
                    parts += [Text(""), section_renderable(section)] if parts else [section_renderable(section)]
                yield Static(Group(*parts), id="help-keys")

    def action_close(self) -> None:
        self.dismiss(None)
