"""What the command palette (ctrl+p) offers besides Textual's own commands: the views, the console's actions,
and the themes of ``themes/`` (Textual's theme picker is left out: its themes are not styled for this console).

An action here does exactly what its key does in its view — it switches to that view and presses it — so a
mutation still asks through the confirmation dialog, and read-only mode leaves the mutating ones out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.app import SystemCommand

from vastui.tui.themes import theme_names

if TYPE_CHECKING:
    from vastui.tui.host import ConsoleHost

TEXTUAL_LEFT_OUT = frozenset({"Theme"})    # Textual's picker lists its own themes, which give a mixed screen


@dataclass(frozen=True, slots=True)
class PaletteAction:
    title: str
    help: str
    view: str          # the view whose key it presses
    action: str        # that view's action (``action_<name>``)
    is_mutating: bool


ACTIONS: tuple[PaletteAction, ...] = (
    PaletteAction("Approve the selected request", "Campaign: approve the request under the cursor (key a)",
                  "campaign", "approve", True),
    PaletteAction("Refuse the selected request", "Campaign: refuse the request under the cursor (key x)",
                  "campaign", "refuse", True),
    PaletteAction("Rent marked offers", "Offers: rent the marked offers, after the confirmation (key r)",
                  "offers", "rent", True),
    PaletteAction("Destroy marked instances", "Instances: destroy the marked instances, after the confirmation "
                  "(key d)", "instances", "destroy", True),
    PaletteAction("Open logs", "Instances: stream the logs of the instance under the cursor (key l)",
                  "instances", "logs", False),
)


def console_commands(app: ConsoleHost) -> Iterable[SystemCommand]:
    names = {spec.name for spec in app.views}
    yield SystemCommand("Refresh", "read every source now (ctrl+r)", app.action_refresh)
    for action in ACTIONS:
        if action.view in names and not (action.is_mutating and app.settings.readonly):
            yield SystemCommand(action.title, action.help, _press(app, action))
    for spec in app.views:
        yield SystemCommand(f"View: {spec.title}", f"switch to :{spec.name} (key {spec.key})",
                            _show(app, spec.name))
    for name in theme_names():
        yield SystemCommand(f"Theme: {name}", f"the console's {name} theme (themes/{name}.tcss)",
                            _theme(app, name))


def _press(app: ConsoleHost, action: PaletteAction) -> Callable[[], None]:
    def press() -> None:
        app.action_show_view(action.view)
        getattr(app.view(action.view), f"action_{action.action}")()
    return press


def _show(app: ConsoleHost, name: str) -> Callable[[], None]:
    return lambda: app.action_show_view(name)


def _theme(app: ConsoleHost, name: str) -> Callable[[], None]:
    return lambda: app.apply_theme(name)
