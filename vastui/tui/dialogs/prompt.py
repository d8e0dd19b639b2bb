"""A one-line prompt (a label text, an amount, a recipient) that returns the text, or None when cancelled.

Answering a prompt approves nothing: the action it feeds still goes through the confirmation dialog.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


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
