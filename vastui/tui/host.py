"""What the views and the console's controls see of the app: ``ConsoleHost`` and the parts it hands out.

The app (``vastui.tui.app.VastuiApp``) builds the controls — the campaign control, the approval desk, the quit
that guards hand-made rentals — and hosts the views; they call back into it. They know it only by these
protocols, so the dependency runs one way: the app imports them, none of them imports the app. mypy checks that
``VastuiApp`` fits where the app hands itself to its controls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from textual.message import Message
from textual.notifications import Notification, SeverityLevel
from textual.screen import Screen, ScreenResultCallbackType
from textual.widget import AwaitMount, Widget
from textual.worker import Worker, WorkType

from vastui.campaign.broker import PendingApproval
from vastui.tui.actions import ConsoleActions, Outcome
from vastui.tui.campaign_feed import CampaignSource
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.tui.state import ConsoleState
from vastui.tui.view_memory import ViewMemory
from vastui.vast.models import Offer

R = TypeVar("R")


class CampaignHold(Protocol):
    """The campaign control, as the desk and the views use it (``campaign_control.CampaignControl``)."""

    @property
    def source(self) -> CampaignSource | None: ...

    @property
    def is_running(self) -> bool: ...

    def approve(self, request_id: str, *, key: str = "a") -> bool: ...

    def refuse(self, request_id: str, *, key: str = "x") -> bool: ...

    def ask_approve_plan(self) -> None: ...


class PendingDesk(Protocol):
    """The approval desk, as the campaign control and the views use it (``approval_desk.ApprovalDesk``)."""

    def wall_now(self) -> float: ...

    def listed(self, state: ConsoleState | None = None) -> list[PendingApproval]: ...

    def answerable(self) -> list[PendingApproval]: ...

    def approve(self, request_id: str, *, by_key: str = "a") -> bool: ...

    def refuse(self, request_id: str, *, by_key: str = "x") -> bool: ...


class QuitGuard(Protocol):
    """The quit without a campaign (``rentals.RentalsQuit``)."""

    def ask_quit(self) -> None: ...


class ViewEntry(Protocol):
    """A registered view, as the command palette lists it (``registry.ViewSpec``)."""

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def title(self) -> str: ...


class ConsoleHost(Protocol):
    """The console app, as its views and controls see it: its services, settings and state, the actions it runs,
    and the few Textual calls they make on it."""

    @property
    def services(self) -> ConsoleServices: ...

    @property
    def settings(self) -> ConsoleSettings: ...

    @property
    def state(self) -> ConsoleState: ...

    @property
    def current_view(self) -> str: ...

    @property
    def views(self) -> Sequence[ViewEntry]: ...

    @property
    def actions(self) -> ConsoleActions: ...

    @property
    def outcomes(self) -> list[Outcome]: ...

    @property
    def control(self) -> CampaignHold: ...

    @property
    def desk(self) -> PendingDesk: ...

    @property
    def rentals(self) -> QuitGuard: ...

    @property
    def memory(self) -> ViewMemory: ...

    @property
    def has_store(self) -> bool: ...

    def perform(self, act: Callable[[ConsoleActions], Awaitable[Outcome]]) -> None: ...

    def set_offers_query(self, body: dict[str, object]) -> None: ...

    def offer_by_id(self, offer_id: int) -> Offer | None: ...

    def start_logs(self, instance_id: int) -> None: ...

    def stop_logs(self) -> None: ...

    def render_current(self) -> None: ...

    def view(self, name: str) -> Widget: ...

    def apply_theme(self, name: str) -> None: ...

    def action_show_view(self, name: str) -> None: ...

    def action_refresh(self) -> None: ...

    # --- Textual's, as App has them ---------------------------------------------------------------------------
    @property
    def screen(self) -> Screen[object]: ...

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

    def toast(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
              timeout: float | None = None) -> Notification: ...

    def withdraw(self, toast: Notification) -> None: ...

    def push_screen(self, screen: Screen[R], callback: ScreenResultCallbackType[R] | None = None) -> AwaitMount: ...

    def run_worker(self, work: WorkType[R], name: str | None = "", group: str = "default", description: str = "",
                   exit_on_error: bool = True, start: bool = True, exclusive: bool = False,
                   thread: bool = False) -> Worker[R]: ...

    def post_message(self, message: Message) -> bool: ...

    def refresh_bindings(self) -> None: ...

    def bell(self) -> None: ...

    def exit(self) -> None: ...
