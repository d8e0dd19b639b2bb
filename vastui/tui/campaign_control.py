"""The console's hold on a campaign: follow it (workers that turn its events into pictures), answer its
approvals through its broker, abort or detach when the operator leaves, and read past receipts from the store.

The views call this, never the handle itself; nothing here does HTTP, SQL or SSH — the store is a service the
console was given, and the campaign runs in its own task whatever the console does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING

from textual.worker import Worker

from vastui.errors import VastuiError
from vastui.tui.approval_desk import facts
from vastui.tui.campaign_feed import CampaignSource, follow_campaign
from vastui.tui.campaign_state import CampaignEnd, CampaignPicture
from vastui.tui.dialogs.choice import ChoiceDialog
from vastui.tui.messages import CampaignDrawn, CampaignEnded, ReceiptsLoaded
from vastui.tui.sources import receipt_page

if TYPE_CHECKING:
    from vastui.tui.host import ConsoleHost


KEY_ANSWER = "console key"


class Leaving(enum.StrEnum):
    """How the operator left the console while a campaign ran."""

    ABORTED = "aborted"       # the campaign was aborted; the console quit after its teardown was proven
    DETACHED = "detached"     # the campaign keeps running without the console (the caller keeps waiting on it)


class PlanAnswer(enum.StrEnum):
    """``A``'s confirmation: approve the printed plan as a whole, or not."""

    CANCEL = "cancel"
    APPROVE = "approve"


class LeaveAnswer(enum.StrEnum):
    """Quitting while the campaign runs."""

    STAY = "stay"
    ABORT = "abort"
    DETACH = "detach"


class DetachAnswer(enum.StrEnum):
    """Detaching with requests pending: what becomes of them."""

    STAY = "stay"
    APPROVE = "approve"     # the printed plan's are granted, the rest refused
    REFUSE = "refuse"       # every one refused
    KEEP = "keep"           # kept in the store for `vastui campaign approve`


class CampaignControl:
    """Owned by the app; ``source`` is None when the console follows no campaign."""

    def __init__(self, app: ConsoleHost, source: CampaignSource | None) -> None:
        self._app = app
        self.source = source
        self.leaving: Leaving | None = None
        self.quit_when_ended = False
        self.kept_for_command = False   # detached keeping the pending requests for `vastui campaign approve`

    @property
    def is_running(self) -> bool:
        return self.source is not None and not self.source.is_done

    def start(self) -> None:
        app, source = self._app, self.source
        if source is not None:
            def deliver(picture: CampaignPicture) -> None:
                app.post_message(CampaignDrawn(picture))

            def ended(end: CampaignEnd) -> None:
                app.post_message(CampaignEnded(end))
                self.reload_receipts()

            app.run_worker(self._follow(source, deliver, ended), name="campaign-follow", group="campaign-follow",
                           exclusive=True, exit_on_error=False)
        self.reload_receipts()

    async def _follow(self, source: CampaignSource, deliver: Callable[[CampaignPicture], None],
                      ended: Callable[[CampaignEnd], None]) -> None:
        try:
            await follow_campaign(source, deliver=deliver, on_end=ended,
                                  min_interval_s=self._app.settings.campaign_redraw_s)
        except Exception as exc:  # the worker boundary: a console that silently stops following would mislead
            self._app.notify(f"stopped following campaign {source.campaign_id}: {exc!r}", title="Campaign",
                             severity="error", timeout=3600)
            raise

    def reload_receipts(self) -> None:
        if self._app.services.store is not None:
            # a function, not a coroutine: a worker cancelled before it starts (the app closing) leaves none unawaited
            load: Callable[[], Coroutine[None, None, None]] = self._load_receipts
            _worker: Worker[None] = self._app.run_worker(load, name="receipts", group="receipts", exclusive=True,
                                                         exit_on_error=False)

    async def _load_receipts(self) -> None:
        store = self._app.services.store
        if store is None:
            return
        try:
            page = await receipt_page(store=store, clock=self._app.services.clock)
        except VastuiError as exc:  # the worker boundary: say it, keep the console up
            self._app.notify(exc.message, title="Receipts", severity="error")
            return
        self._app.post_message(ReceiptsLoaded(page))

    # --- answers -----------------------------------------------------------------------------------------------
    def approve(self, request_id: str, *, key: str = "a") -> bool:
        return self.source is not None and self.source.broker.approve(request_id, by=f"{KEY_ANSWER} {key}")

    def refuse(self, request_id: str, *, key: str = "x") -> bool:
        return self.source is not None and self.source.broker.refuse(request_id, by=f"{KEY_ANSWER} {key}",
                                                                     reason="refused at the console")

    def ask_approve_plan(self) -> None:
        """``A``: approve the printed plan as a whole, after a confirmation (Cancel focused)."""
        picture = self._app.state.campaign
        if self.source is None or picture is None or not self.is_running:
            self._app.notify("no running campaign to approve", severity="warning")
            return
        plan = picture.snapshot.plan
        offers = ", ".join(str(c.offer_id) for c in plan.candidates)
        lines = [f"Rent exactly these {len(plan.candidates)} offers: {offers}",
                 f"(reserves only if one of them vanishes: {len(plan.reserves)})",
                 f"spend at most ${plan.budget_usd:.2f} (worst case of the plan ${plan.spend_cap_usd:.2f}),",
                 "and destroy every instance the campaign rents by its deadline."]

        def answered(choice: PlanAnswer | None) -> None:
            if choice is PlanAnswer.APPROVE and self.source is not None:
                granted = self.source.broker.approve_plan(by=f"{KEY_ANSWER} A: the printed plan")
                self._app.notify(f"plan approved; {granted} pending request(s) granted")
        self._app.push_screen(ChoiceDialog(title="Approve the whole plan?", lines=lines,
                                           choices=[(PlanAnswer.CANCEL, "Cancel"),
                                                    (PlanAnswer.APPROVE, "Approve the plan")]),
                              callback=answered)

    # --- leaving -----------------------------------------------------------------------------------------------
    def ask_quit(self) -> None:
        """``q``/``ctrl+c`` while the campaign runs: abort it (teardown, then quit), detach, or stay."""
        source = self.source
        if source is None or not self.is_running:
            self._app.rentals.ask_quit()   # no campaign: asks only while instances rented here bill
            return
        if self.quit_when_ended:
            self._app.notify("tearing down: the console quits once every instance is proven gone")
            return
        lines = [f"Campaign {source.campaign_id} is still running.",
                 "Abort: stop the work, destroy every instance, prove it gone, then quit.",
                 "Detach: leave the console; the campaign runs on headless to its receipt "
                 "(`vastui campaign resume` finds it if this process dies). Requests pending now: you choose to "
                 "approve the plan's, refuse all, or keep them for `vastui campaign approve`; with none pending, a "
                 "later request that no approved plan covers is refused."]

        def answered(choice: LeaveAnswer | None) -> None:
            if choice is LeaveAnswer.ABORT:
                self.abort("the operator quit the console")
            elif choice is LeaveAnswer.DETACH:
                self.ask_detach()
        self._app.push_screen(ChoiceDialog(title="Leave the running campaign?", lines=lines,
                                           choices=[(LeaveAnswer.STAY, "Stay"), (LeaveAnswer.ABORT, "Abort, then quit"),
                                                    (LeaveAnswer.DETACH, "Detach")]), callback=answered)

    def ask_detach(self) -> None:
        """Detach; with requests pending, first ask what becomes of them — never withdraw them silently."""
        waiting = self._app.desk.answerable()
        if not waiting:
            self.detach(approve_plan=False)
            return
        lines = [f"{len(waiting)} request(s) wait for an answer:",
                 *(f"  {facts(p)}" for p in waiting[:8]),
                 *([f"  … and {len(waiting) - 8} more"] if len(waiting) > 8 else []),
                 "Approve plan's: grant those in the printed plan (and the plan's later rents, within its "
                 "budget); refuse the rest.",
                 "Refuse all: refuse every one; the campaign decides on what it has measured, and the receipt "
                 "names the candidates never measured."]
        # short labels: the title says each one detaches, and four buttons must fit 80 columns
        choices = [(DetachAnswer.STAY, "Stay"), (DetachAnswer.APPROVE, "Approve plan's"),
                   (DetachAnswer.REFUSE, "Refuse all")]
        if self._app.services.store is not None:
            campaign_id = self.source.campaign_id if self.source is not None else "ID"
            lines.append(f"Keep for approve: they wait, each until its expiry, for `vastui campaign approve "
                         f"{campaign_id}` in a shell; detaching prints the exact command.")
            choices.append((DetachAnswer.KEEP, "Keep for approve"))

        def answered(choice: DetachAnswer | None) -> None:
            if choice is not None and choice is not DetachAnswer.STAY:
                self.detach(approve_plan=choice is DetachAnswer.APPROVE, keep=choice is DetachAnswer.KEEP)
        self._app.push_screen(ChoiceDialog(title="Detach: what about the pending requests?", lines=lines,
                                           choices=choices), callback=answered)

    def detach(self, *, approve_plan: bool, keep: bool = False) -> None:
        """Leave the campaign running headless. Nobody answers at the console from now on: what no plan covers is
        refused — or, with ``keep``, waits in the store for `vastui campaign approve` until it expires."""
        if self.source is None:
            return
        broker, store = self.source.broker, self._app.services.store
        if approve_plan:
            broker.approve_plan(by=f"{KEY_ANSWER} detach: the printed plan")
        if keep and store is not None:
            broker.keep_for_command(store, campaign_id=self.source.campaign_id)
            self.kept_for_command = True
        else:
            broker.stop_asking("the operator detached the console")
        self.leaving = Leaving.DETACHED
        self._app.exit()

    def abort(self, reason: str) -> None:
        if self.source is None:
            return
        self.leaving = Leaving.ABORTED
        self.quit_when_ended = True
        self.source.abort(reason)
        self._app.notify("aborting: destroying every instance and proving it gone, then quitting")
