"""The ``:`` command bar: a view's name (or ``q``), completed as it is typed — Tab (or →) takes the completion, and
Enter takes a prefix that names one view alone (``:lea`` is ``:leaks``), as in k9s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.suggester import Suggester
from textual.widgets import Input

QUIT_WORDS = ("q", "quit")


class CommandSuggester(Suggester):
    """Suggests the first command that starts with what is typed (a leading ``:`` is kept)."""

    def __init__(self, commands: Sequence[str]) -> None:
        super().__init__(use_cache=False, case_sensitive=False)
        self.commands = tuple(commands)

    async def get_suggestion(self, value: str) -> str | None:
        word = value.lstrip(":")
        lead = value[: len(value) - len(word)]
        if not word:
            return None
        match = next((c for c in self.commands if c.startswith(word.lower())), None)
        return None if match is None else lead + match


def resolve(typed: str, commands: Sequence[str]) -> str:
    """What ``typed`` names: a command spelled out, or the one command it is a prefix of; otherwise as typed."""
    word = typed.strip().lstrip(":").strip().lower()
    if word in commands:
        return word
    matches = [c for c in commands if c.startswith(word)] if word else []
    return matches[0] if len(matches) == 1 else word


class CommandBar(Input):
    """An ``Input`` that completes command names; Tab accepts the completion instead of moving the focus."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("tab", "complete", "Complete", show=False)]

    def __init__(self, *, commands: Sequence[str], placeholder: str, id: str | None = None) -> None:
        super().__init__(placeholder=placeholder, id=id, suggester=CommandSuggester(commands))
        self.commands = tuple(commands)

    def action_complete(self) -> None:
        suggestion = self._suggestion
        if suggestion and suggestion != self.value:
            self.value = suggestion
            self.cursor_position = len(self.value)
