"""What every console view is: a widget with a name, a key, and a ``render_state`` fed by the app.

A view renders the state it is given and asks the app to act (``self.console.perform``); it never reaches the
network, the database or an SSH host itself.
"""

from __future__ import annotations

from typing import ClassVar, cast

from textual.containers import Vertical
from textual.dom import NoScreen
from textual.widget import Widget

from vastui.tui.host import ConsoleHost
from vastui.tui.state import ConsoleState


def focus_now(widget: Widget) -> None:
    """Focus ``widget`` before the next key is handled.

    ``Widget.focus`` defers the change to a later message, so keys that arrived in the same burst as the one that
    moved the focus (``:offers⏎`` pasted or typed fast, ``2`` then space) would still reach the old widget and
    trigger its bindings there. Setting it on the screen at once keeps each key where the operator meant it.
    """
    try:
        widget.screen.set_focus(widget)
    except NoScreen:  # not on a screen yet: the deferred path gets there once it is
        widget.focus()


def is_typing(widget: Widget) -> bool:
    """Whether the focus is in a text field, where keys are text and not commands."""
    from textual.widgets import Input

    return isinstance(widget.app.focused, Input)


class ConsoleView(Vertical):
    """Base of the views. ``MUTATING_ACTIONS`` are disabled (hidden from the footer) in read-only mode."""

    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    view_name: ClassVar[str] = ""
    # what the view's columns mean, for the help screen: (column header, meaning)
    COLUMN_NOTES: ClassVar[tuple[tuple[str, str], ...]] = ()

    @property
    def console(self) -> ConsoleHost:
        """The console app this view is mounted in (views are built and hosted by ``VastuiApp`` alone)."""
        return cast(ConsoleHost, self.app)

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        """Show ``state``; called after each refresh while the view is visible, and when it is shown."""

    def focus_main(self) -> None:
        """Put the focus where the view's keys work (its table, usually)."""

    # Keys that move the focus are priority bindings (handled as they arrive, before the next key is routed), so
    # keys typed right behind them land where the operator meant; they stand aside while a text field has focus.
    FOCUS_ACTIONS: ClassVar[frozenset[str]] = frozenset()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.MUTATING_ACTIONS and self.console.settings.readonly:
            return False
        if action in self.FOCUS_ACTIONS and is_typing(self):
            return False
        return True
