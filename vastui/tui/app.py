"""``VastuiApp``: the console. It is given its services and settings, runs one polling worker per data source,
keeps one immutable ``ConsoleState``, and lets views render it and ask for actions.

Adding a view
-------------
1. Write ``vastui/tui/views/<name>.py`` with a ``ConsoleView`` subclass: ``compose`` its widgets, implement
   ``render_state(state, now=...)`` (render only what it is given) and ``focus_main``; declare its keys in
   ``BINDINGS`` and list the keys that change anything in ``MUTATING_ACTIONS`` (read-only mode hides them).
2. Register it in ``vastui.tui.registry.default_views()`` with a name (typed after ``:``), a key and a title —
   or pass ``views=`` to ``VastuiApp`` (tests do, to build an app with extra or fewer views).
3. Data it needs that no source fetches yet: add a ``Source``, its fetch in ``vastui.tui.sources``, its message in
   ``vastui.tui.messages`` and a feed here — never a network, database or SSH call in the view. Mutations go
   through ``self.console.perform(lambda actions: actions.<verb>(...))``, which shows the confirmation dialog and
   refuses in read-only mode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, ClassVar, TypeVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.message import Message
from textual.notifications import Notification, Notify, SeverityLevel
from textual.screen import Screen
from textual.widgets import ContentSwitcher, DataTable, Input

from vastui.campaign.adhoc import AdhocOwner
from vastui.clock import market_scale
from vastui.errors import VastuiError
from vastui.events import Notice
from vastui.tui.actions import ConsoleActions, Outcome
from vastui.tui.approval_desk import ANSWER_ACTIONS, POPUP_ACTION, ApprovalDesk
from vastui.tui.campaign_control import CampaignControl
from vastui.tui.campaign_feed import CampaignSource
from vastui.tui.dialogs.approvals import ApprovalsScreen
from vastui.tui.dialogs.confirm import DialogApprover
from vastui.tui.dialogs.help import TABLE_KEYS, HelpScreen, HelpSection
from vastui.tui.feeds import Wake, poll
from vastui.tui.health import Source, SourceHealth
from vastui.tui.messages import (
    AccountRefreshed,
    ActivityRead,
    CampaignDrawn,
    CampaignEnded,
    InstancesRefreshed,
    LeaksRefreshed,
    LogsFailed,
    LogsFetched,
    OffersRefreshed,
    ReceiptsLoaded,
    SourceFailed,
)
from vastui.tui.palette import TEXTUAL_LEFT_OUT, console_commands
from vastui.tui.proposal import ProposalApprover
from vastui.tui.registry import ViewSpec, check_registry, default_views
from vastui.tui.rentals import RentalsQuit
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.tui.sources import account_page, activity_page, instance_page, leak_report, offer_page
from vastui.tui.state import ActivityPage, ConsoleState, note_gone
from vastui.tui.terminal import terminal_driver
from vastui.tui.themes import BASE_THEME, check_theme, theme_names, theme_paths
from vastui.tui.view_memory import ViewMemory
from vastui.tui.views.base import ConsoleView, focus_now
from vastui.tui.views.instances import InstancesView
from vastui.tui.widgets.command_bar import QUIT_WORDS, CommandBar, resolve
from vastui.tui.widgets.footer import FittingFooter
from vastui.tui.widgets.statusbar import StatusBar
from vastui.vast.models import Offer
from vastui.vast.query import build_search_body

if TYPE_CHECKING:
    from vastui.store import Store

ApproverFactory = Callable[["VastuiApp"], ProposalApprover]
LOG_TAIL_LINES = 500
P = TypeVar("P")
HELP_LEFT_OUT = frozenset({"app.focus_next", "app.focus_previous", "focus_next", "focus_previous", "screen.copy_text",
                           "copy_text"})


class VastuiApp(App[None]):
    """The console. ``services`` are used, never built, here; ``views`` default to the registry's."""

    TITLE = "vastui"
    CSS_PATH: ClassVar[list[str | PurePath]] = [Path(__file__).with_name("layout.tcss"), *theme_paths()]
    # the screen gets -narrow below 100 columns and -short below 32 rows: layout.tcss compacts the views there;
    # from 140 columns on (-xwide) dialogs widen so that a line of facts is not wrapped
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide"), (140, "-xwide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("colon", "open_command", "View…", key_display=":", priority=True),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("ctrl+r", "refresh", "Refresh"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),   # asks first while a campaign runs
        # a followed campaign's approvals, from any view (shown only while something is pending: see ApprovalDesk)
        Binding("a", "approve_oldest", "Approve", tooltip="approve the oldest pending request"),
        Binding("x", "refuse_oldest", "Refuse", tooltip="refuse the oldest pending request"),
        Binding("A", "approve_plan", "Plan", key_display="A", tooltip="approve the printed plan, after a confirmation"),
        Binding("ctrl+a", "approvals", "Approvals"),
    ]

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal, made to survive the terminal closing under it
        (``vastui.tui.terminal``)."""
        return terminal_driver(super().get_driver_class())

    def toast(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
              timeout: float | None = None) -> Notification:
        """``notify`` from the event loop, shown at once and returned so that ``withdraw`` can take it down once
        it no longer holds."""
        toast = Notification(message, title, severity,
                             self.NOTIFICATION_TIMEOUT if timeout is None else timeout, markup=False)
        self._on_notify(Notify(toast))
        return toast

    def withdraw(self, toast: Notification) -> None:
        """Take a toast down before its time (one no longer true: the requests it announced were answered)."""
        if toast in self._notifications:
            self._unnotify(toast)

    def __init__(self, *, services: ConsoleServices, settings: ConsoleSettings | None = None,
                 views: Sequence[ViewSpec] | None = None, approver: ApproverFactory | None = None,
                 campaign: CampaignSource | None = None) -> None:
        super().__init__()
        self.services = services
        self.settings = settings or ConsoleSettings()
        check_theme(self.settings.theme)
        self.views = check_registry(views if views is not None else default_views())
        self.approver: ProposalApprover = (approver(self) if approver is not None else DialogApprover(
            self, clock=services.clock, money_confirm_over_usd=self.settings.money_confirm_over_usd))
        self.actions = ConsoleActions(market=services.market, approver=self.approver, clock=services.clock,
                                      settings=self.settings, audit=services.audit,
                                      owner=None if services.store is None
                                      else AdhocOwner(store=services.store, clock=services.clock))
        self.rentals = RentalsQuit(self)   # the quit without a campaign: asks while what it rented bills
        intervals = {Source.OFFERS: self.settings.offers_interval_s, Source.INSTANCES: self.settings.instances_interval_s,
                     Source.ACCOUNT: self.settings.account_interval_s, Source.LEAKS: self.settings.leaks_interval_s}
        self._intervals = intervals
        self.state = ConsoleState(health={s: SourceHealth(source=s, stale_after_s=self.settings.stale_after_s(i))
                                          for s, i in intervals.items() if s is not Source.LEAKS
                                          or services.store is not None})
        self._wakes = {source: Wake() for source in Source}
        self._activity_wake = Wake()
        self.offers_body: dict[str, object] = build_search_body(
            self.settings.offers_query, order=self.settings.offers_order, limit=self.settings.offers_limit)
        self.current_view = self.settings.initial_view
        self.outcomes: list[Outcome] = []
        self.theme_name = self.settings.theme
        self._view_widgets: dict[str, ConsoleView] = {}
        self._status_bar: StatusBar | None = None
        self.control = CampaignControl(self, campaign)
        self.desk = ApprovalDesk(self)
        self.memory = ViewMemory(self.settings.view_memory_path)
        for spec in self.views:
            self._bindings.bind(spec.key, f"show_view('{spec.name}')", description=spec.title, show=False,
                                priority=True)

    # --- layout ---------------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        names = [v.name for v in self.views]
        self._command_bar = CommandBar(commands=[*names, "quit"], id="command-bar",
                                       placeholder=":view  (" + ", ".join(names) + ")  Tab completes")
        yield self._command_bar
        initial = self.current_view if any(v.name == self.current_view for v in self.views) else self.views[0].name
        self.current_view = initial
        self._switcher = ContentSwitcher(id="views", initial=f"view-{initial}")
        with self._switcher:
            for spec in self.views:
                view = spec.factory()
                view.id = f"view-{spec.name}"
                self._view_widgets[spec.name] = view
                yield view
        self._status_bar = StatusBar()
        yield self._status_bar
        yield FittingFooter()

    def on_mount(self) -> None:
        self.apply_theme(self.theme_name)
        self.view(self.current_view).focus_main()
        self._start_feeds()
        self.control.start()
        self.set_interval(1.0, self.refresh_status)
        self.refresh_status()

    def apply_theme(self, name: str) -> None:
        check_theme(name)
        for other in theme_names():
            self.set_class(other == name, f"theme-{other}")
        self.theme_name = name
        self.theme = BASE_THEME.get(name, "textual-dark")

    def view(self, name: str) -> ConsoleView:
        """The view registered as ``name`` (whatever screen is on top)."""
        return self._view_widgets[name]

    # --- feeds ----------------------------------------------------------------------------------------------------

    def _start_feeds(self) -> None:
        settings, market, store, clock = self.settings, self.services.market, self.services.store, self.services.clock
        if store is not None:
            self._run_activity_feed(store)
        self._run_feed(Source.OFFERS, lambda: offer_page(market=market, store=store, body=self.offers_body,
                                                         workload_digest=settings.workload_digest, clock=clock),
                       OffersRefreshed)
        self._run_feed(Source.INSTANCES, lambda: instance_page(market=market, store=store, clock=clock),
                       InstancesRefreshed)
        self._run_feed(Source.ACCOUNT, lambda: account_page(market=market, store=store), AccountRefreshed)
        if store is not None:
            self._run_feed(Source.LEAKS, lambda: leak_report(market=market, store=store, clock=clock), LeaksRefreshed)
        self.run_worker(self._follow_bus(), name="bus", group="bus", exclusive=True, exit_on_error=False)

    async def _follow_bus(self) -> None:
        """Notices published on the bus (the leak watcher's, a campaign's) become notifications."""
        queue = self.services.bus.subscribe()
        try:
            while True:
                event = await queue.get()
                if isinstance(event, Notice):
                    severity: SeverityLevel = "error" if event.level == "error" else (
                        "warning" if event.level == "warning" else "information")
                    self.notify(event.text, severity=severity)
        finally:
            self.services.bus.unsubscribe(queue)

    def _run_feed(self, source: Source, fetch: Callable[[], Awaitable[P]],
                  refreshed: Callable[[P, float], Message]) -> None:
        """Poll ``fetch``; each page it delivers is posted as ``refreshed(page, at)``, each failure as
        ``SourceFailed``."""
        clock = self.services.clock

        def deliver(page: P) -> None:
            self.post_message(refreshed(page, clock.now()))

        def fail(exc: VastuiError) -> None:
            self.post_message(SourceFailed(source, exc.message, clock.now()))

        self.run_worker(poll(fetch=fetch, deliver=deliver, fail=fail, clock=clock, interval_s=self._intervals[source],
                             wake=self._wakes[source], live=self.settings.live),
                        name=f"feed-{source}", group=f"feed-{source}", exclusive=True, exit_on_error=False)

    def wake(self, *sources: Source) -> None:
        """Refresh these sources now (all when none given); the audit log too, since whatever asked for a refresh
        has usually just been audited."""
        for source in sources or tuple(Source):
            self._wakes[source].set()
        self._activity_wake.set()

    @property
    def has_store(self) -> bool:
        return self.services.store is not None

    def _run_activity_feed(self, store: Store) -> None:
        """The audit log for the Activity view: read with the instances' rhythm, and at once after any action."""
        clock = self.services.clock

        def fail(exc: VastuiError) -> None:
            self.log.warning(f"the audit log could not be read: {exc.message}")

        def deliver(page: ActivityPage) -> None:
            self.post_message(ActivityRead(page))

        self.run_worker(poll(fetch=lambda: activity_page(store=store, clock=clock), deliver=deliver, fail=fail,
                             clock=clock, interval_s=self.settings.instances_interval_s, wake=self._activity_wake,
                             live=self.settings.live),
                        name="feed-activity", group="feed-activity", exclusive=True, exit_on_error=False)

    @on(ActivityRead)
    def _activity(self, message: ActivityRead) -> None:
        self.state = dataclasses.replace(self.state, activity=message.page)
        if self.current_view == "activity":
            self.render_current()

    @on(OffersRefreshed)
    def _offers(self, message: OffersRefreshed) -> None:
        self._refreshed(Source.OFFERS, message.at, dataclasses.replace(self.state, offers=message.page))

    @on(InstancesRefreshed)
    def _instances(self, message: InstancesRefreshed) -> None:
        page = message.page
        state = dataclasses.replace(self.state, instances=page,
                                    gone=note_gone(self.state.instances, self.state.gone, page))
        # an incomplete listing is shown as INCOMPLETE; the source is not healthy either
        problem = None if page.listing.is_complete else f"instance listing incomplete: {page.listing.error}"
        self._refreshed(Source.INSTANCES, message.at, state, problem=problem)

    @on(AccountRefreshed)
    def _account(self, message: AccountRefreshed) -> None:
        page = message.page
        self._refreshed(Source.ACCOUNT, message.at,
                        dataclasses.replace(self.state, user=page.user, transfers=page.transfers))

    @on(LeaksRefreshed)
    def _leaks(self, message: LeaksRefreshed) -> None:
        self._refreshed(Source.LEAKS, message.at, dataclasses.replace(self.state, leaks=message.report))

    def _refreshed(self, source: Source, at: float, state: ConsoleState, *, problem: str | None = None) -> None:
        """Show ``state``, ``source`` marked refreshed at ``at`` (and failing, with a ``problem`` in its data)."""
        health = dict(state.health)
        health[source] = health[source].ok(at)
        if problem is not None:
            health[source] = health[source].failed(at, problem)
        self.state = dataclasses.replace(state, health=health)
        self.render_current()

    @on(SourceFailed)
    def _failed(self, message: SourceFailed) -> None:
        health = dict(self.state.health)
        health[message.source] = health[message.source].failed(message.at, message.error)
        self.state = dataclasses.replace(self.state, health=health)
        self.render_current()

    @on(LogsFetched)
    @on(LogsFailed)
    def _logs(self, message: LogsFetched | LogsFailed) -> None:
        for view in self._view_widgets.values():
            if isinstance(view, InstancesView) and view.is_mounted:
                view.show_logs(message)

    @on(CampaignDrawn)
    def _campaign_drawn(self, message: CampaignDrawn) -> None:
        self.state = dataclasses.replace(self.state, campaign=message.picture)
        self.desk.noticed(self.state)
        self.render_current()

    @on(CampaignEnded)
    def _campaign_ended(self, message: CampaignEnded) -> None:
        self.state = dataclasses.replace(self.state, campaign_end=message.end)
        self.desk.noticed(self.state)
        self.render_current()
        self.wake(Source.INSTANCES, Source.ACCOUNT, Source.LEAKS)
        if self.control.quit_when_ended:
            self.exit()

    @on(ReceiptsLoaded)
    def _receipts(self, message: ReceiptsLoaded) -> None:
        self.state = dataclasses.replace(self.state, receipts=message.page)
        self.render_current()

    def render_current(self) -> None:
        view = self._view_widgets.get(self.current_view)
        if view is None or not view.is_mounted:
            return
        try:
            view.render_state(self.state, now=self.services.clock.now())
        except NoMatches:  # a refresh that lands while the app tears its screen down: nothing left to show
            return
        self.refresh_status()

    def refresh_status(self) -> None:
        if self._status_bar is not None and self._status_bar.is_mounted:
            self._status_bar.show(self.state, now=self.services.clock.now(), readonly=self.settings.readonly,
                                  scale=market_scale(self.services.clock), pending=self.desk.digest())

    # --- actions --------------------------------------------------------------------------------------------------

    def perform(self, act: Callable[[ConsoleActions], Awaitable[Outcome]]) -> None:
        """Run one mutation (it asks for confirmation itself) in a worker; report it and refresh what it touched."""
        self.run_worker(self._perform(act), group="actions", exit_on_error=False)

    async def _perform(self, act: Callable[[ConsoleActions], Awaitable[Outcome]]) -> None:
        try:
            outcome = await act(self.actions)
        except VastuiError as exc:  # the action boundary: say it, keep running
            self.notify(exc.message, title=exc.title or "Action failed", severity="error")
            return
        self.outcomes.append(outcome)
        self.notify(outcome.summary(), severity="error" if outcome.errors else "information")
        self.wake(Source.INSTANCES, Source.ACCOUNT, Source.LEAKS)

    def set_offers_query(self, body: dict[str, object]) -> None:
        self.offers_body = body
        self.wake(Source.OFFERS)

    def offer_by_id(self, offer_id: int) -> Offer | None:
        page = self.state.offers
        return None if page is None else next((o for o in page.offers if o.id == offer_id), None)

    def start_logs(self, instance_id: int) -> None:
        """Stream an instance's logs into the logs pane until ``stop_logs``."""
        market = self.services.market

        async def fetch() -> str:
            return await market.request_logs(instance_id, tail=LOG_TAIL_LINES)

        def deliver(text: str) -> None:
            self.post_message(LogsFetched(instance_id, text))

        def fail(exc: VastuiError) -> None:
            self.post_message(LogsFailed(instance_id, exc.message))

        self.run_worker(poll(fetch=fetch, deliver=deliver, fail=fail, clock=self.services.clock,
                             interval_s=self.settings.logs_interval_s, wake=Wake(), live=True),
                        name=f"logs-{instance_id}", group="logs", exclusive=True, exit_on_error=False)

    def stop_logs(self) -> None:
        self.workers.cancel_group(self, "logs")

    # --- navigation -----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``:`` and the view keys are priority bindings (see ``ConsoleView.FOCUS_ACTIONS``): they act on the main
        screen only, and not while a text field has focus (there they are text)."""
        if action in ("open_command", "show_view"):
            return self.screen is self.screen_stack[0] and not isinstance(self.focused, Input)
        if action in ANSWER_ACTIONS or action == POPUP_ACTION:
            return self.desk.offers(action)
        return True

    def action_approve_oldest(self) -> None:
        self.desk.answer_oldest(approve=True)

    def action_refuse_oldest(self) -> None:
        self.desk.answer_oldest(approve=False)

    def action_approve_plan(self) -> None:
        self.control.ask_approve_plan()

    def action_approvals(self) -> None:
        self.push_screen(ApprovalsScreen(self.desk))

    def action_show_view(self, name: str) -> None:
        if not any(v.name == name for v in self.views):
            self.notify(f"no view {name!r}; the views are: {', '.join(v.name for v in self.views)}",
                        severity="warning")
            return
        self.current_view = name
        self._switcher.current = f"view-{name}"
        self.render_current()
        self.view(name).focus_main()

    def action_open_command(self) -> None:
        bar = self._command_bar
        bar.value = ""
        bar.add_class("-open")
        focus_now(bar)

    @on(Input.Submitted, "#command-bar")
    def _command(self, event: Input.Submitted) -> None:
        event.stop()
        bar = self._command_bar
        bar.remove_class("-open")
        name = resolve(event.value, [v.name for v in self.views])
        if name in QUIT_WORDS:
            self.control.ask_quit()
            return
        self.action_show_view(name) if name else self.view(self.current_view).focus_main()

    def on_key(self, event: object) -> None:
        from textual.events import Key

        bar = self._command_bar
        if isinstance(event, Key) and event.key == "escape" and bar.has_class("-open"):
            bar.remove_class("-open")
            self.view(self.current_view).focus_main()
            event.stop()

    async def action_quit(self) -> None:
        """Quit; while a campaign runs, ask first whether to abort it (teardown, then quit) or detach."""
        self.control.ask_quit()

    def action_refresh(self) -> None:
        self.wake()

    def action_help(self) -> None:
        """The view's own keys first, then the tables' and the global ones, then what the view's columns mean."""
        view = self.view(self.current_view)
        own: list[tuple[str, str]] = []
        everywhere: list[tuple[str, str]] = []
        for active in self.screen.active_bindings.values():
            binding = active.binding
            if not active.enabled or not binding.description or binding.action.startswith("show_view"):
                continue
            if isinstance(active.node, DataTable) or binding.action in HELP_LEFT_OUT:
                continue  # the tables' keys are one short section, not twenty lines; Textual's focus keys go too
            row = (binding.key_display or self.get_key_display(binding), binding.description)
            rows = own if active.node is view else everywhere
            if row[1] not in {description for _, description in rows}:
                rows.append(row)
        if not any(description == "Approvals" for _, description in everywhere):   # shown only while pending
            everywhere += [("a x A", "approve / refuse the oldest, approve the plan (any view)"),
                           ("^a", "approvals pop-up: pending requests and their facts")]
        everywhere += [(spec.key, f"view {spec.title} (:{spec.name})") for spec in self.views]
        spec = next(s for s in self.views if s.name == self.current_view)
        self.push_screen(HelpScreen(title=f"Help — {spec.title} (:{spec.name})", sections=[
            HelpSection(f"{spec.title} keys", tuple(own)), HelpSection("In every table", TABLE_KEYS),
            HelpSection("Everywhere", tuple(everywhere)),
            HelpSection("Columns", tuple(type(view).COLUMN_NOTES), is_keys=False)]))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from (c for c in super().get_system_commands(screen) if c.title not in TEXTUAL_LEFT_OUT)
        yield from console_commands(self)
