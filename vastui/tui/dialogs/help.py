"""``?``: the keys the current view answers to right now (its live bindings), in a modal list."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class HelpScreen(ModalScreen[None]):
    """A list of (key, description) pairs; any of escape, q or ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, *, title: str, keys: Sequence[tuple[str, str]]) -> None:
        super().__init__(classes="help-screen")
        self.title_text = title
        self.keys = tuple(keys)

    def compose(self) -> ComposeResult:
        width = max((len(key) for key, _ in self.keys), default=4)
        text = "\n".join(f"{key:>{width}}  {description}" for key, description in self.keys)
        with Vertical(id="help-box"):
            yield Label(self.title_text, id="help-title")
            with VerticalScroll(id="help-scroll"):  # a view with many keys scrolls, nothing is cut off
                yield Static(text, id="help-keys", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
