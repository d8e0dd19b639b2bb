"""What every console view is: a widget with a name, a key, and a ``render_state`` fed by the app.

A view renders the state it is given and asks the app to act (``self.console.perform``); it never reaches the
network, the database or an SSH host itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.containers import Vertical

from vastui.tui.state import ConsoleState

if TYPE_CHECKING:
    from vastui.tui.app import VastuiApp


class ConsoleView(Vertical):
    """Base of the views. ``MUTATING_ACTIONS`` are disabled (hidden from the footer) in read-only mode."""

    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    view_name: ClassVar[str] = ""

    @property
    def console(self) -> VastuiApp:
        from vastui.tui.app import VastuiApp

        app = self.app
        assert isinstance(app, VastuiApp)
        return app

    def render_state(self, state: ConsoleState, *, now: float) -> None:
        """Show ``state``; called after each refresh while the view is visible, and when it is shown."""

    def focus_main(self) -> None:
        """Put the focus where the view's keys work (its table, usually)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.MUTATING_ACTIONS and self.console.settings.readonly:
            return False
        return True
