"""A question with a few answers as buttons; the safe answer (the first) has the focus, Escape picks it too."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Generic, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

C = TypeVar("C", bound=StrEnum)


class ChoiceDialog(ModalScreen[C], Generic[C]):
    """Dismisses with the answer whose button was pressed (a member of the caller's enum of answers);
    ``choices[0]`` is the safe one (focused, and Escape)."""

    BINDINGS = [Binding("escape", "safe", "Cancel", show=True)]

    def __init__(self, *, title: str, lines: Sequence[str], choices: Sequence[tuple[C, str]]) -> None:
        super().__init__(classes="choice-dialog")
        if not choices:
            raise ValueError("a choice needs at least one answer")
        self.title_text = title
        self.lines = tuple(lines)
        self.choices = tuple(choices)

    def compose(self) -> ComposeResult:
        with Vertical(id="choice-box", classes="dialog-box"):
            yield Label(self.title_text, id="choice-title")
            with VerticalScroll(id="choice-body", classes="dialog-body"):  # scrolls; the buttons never do
                yield Static("\n".join(self.lines), id="choice-what", markup=False)
            with Horizontal(id="choice-buttons"):
                for index, (choice_id, label) in enumerate(self.choices):
                    yield Button(label, id=f"choice-{choice_id}", variant="primary" if index == 0 else "warning")

    def on_mount(self) -> None:
        self.query_one(f"#choice-{self.choices[0][0]}", Button).focus()

    def action_safe(self) -> None:
        self.dismiss(self.choices[0][0])

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        pressed = (event.button.id or "").removeprefix("choice-")
        self.dismiss(next(choice for choice, _ in self.choices if choice.value == pressed))
