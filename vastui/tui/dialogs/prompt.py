"""A one-line prompt (a label text, an amount, a recipient) that returns the text, or None when cancelled.

Answering a prompt approves nothing: the action it feeds still goes through the confirmation dialog.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Label

from vastui.tui.proposal import parse_usd


class PromptScreen(ModalScreen[str | None]):
    """Asks for one value; Enter submits, Escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, *, question: str, placeholder: str = "", value: str = "") -> None:
        super().__init__(classes="prompt-screen")
        self.question = question
        self.placeholder = placeholder
        self.initial = value

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Label(self.question, id="prompt-question")
            yield Input(value=self.initial, placeholder=self.placeholder, id="prompt-input")

    def on_mount(self) -> None:
        self.query_one("#prompt-input", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted, "#prompt-input")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)


def ask_usd(widget: Widget, *, question: str, placeholder: str, then: Callable[[float], None]) -> None:
    """Ask for an amount of USD and hand it to ``then``. Escape or an empty answer does nothing; text that is not an
    amount is said (on ``widget``) and dropped."""

    def answered(text: str | None) -> None:
        if text is None or not text.strip():
            return
        amount = parse_usd(text)
        if amount is None:
            widget.notify(f"not an amount of USD: {text!r}", severity="error")
            return
        then(amount)

    widget.app.push_screen(PromptScreen(question=question, placeholder=placeholder), callback=answered)
