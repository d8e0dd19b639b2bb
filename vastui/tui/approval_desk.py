"""The console's approval desk: a followed campaign's pending requests wherever the operator is.

They are counted on the status bar with the oldest one's age, announced by a toast and the terminal bell as they
arrive, answered with ``a`` (the oldest), ``x`` (refuse the oldest) and ``A`` (the printed plan as a whole) from any
view, and listed with their facts in the approvals pop-up. A request that expired unanswered is kept in the pop-up as
expired: it counted as refused, and the broker refuses a late approval.

Ages and expiries are read on the broker's wall clock (the operator's time), never on the campaign's clock: a
simulator running 120 times faster than the wall does not shorten them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vastui.campaign.broker import PendingApproval
from vastui.clock import Clock
from vastui.tui.campaign_cells import span
from vastui.tui.cells import usd
from vastui.tui.state import ConsoleState

if TYPE_CHECKING:
    from textual.notifications import Notification

    from vastui.tui.host import ConsoleHost


EXPIRED_KEPT = 20          # expired requests the pop-up still shows, newest last
TOASTED = 3                # requests listed in one arrival toast
ANSWER_ACTIONS = frozenset({"approve_oldest", "refuse_oldest", "approve_plan"})
POPUP_ACTION = "approvals"


@dataclass(frozen=True, slots=True)
class PendingDigest:
    """What the status bar says about pending requests: how many, and how long the oldest has waited (wall s)."""

    count: int
    oldest_waited_s: float
    soonest_expires_in_s: float


def facts(p: PendingApproval) -> str:
    """One line a human can approve on: what, where, at what price, under what cap."""
    where = f"offer {p.offer_id}" if p.offer_id is not None else (
        f"instance {p.instance_id}" if p.instance_id is not None else p.target)
    gpu = f" {p.gpu_name} ×{p.num_gpus}" if p.gpu_name else ""
    price = f" at {usd(p.dph_usd)}/h" if p.dph_usd is not None else ""
    cap = f", cost cap {usd(p.cost_cap_usd, 2)}" if p.cost_cap_usd is not None else ""
    return f"{p.request_id}: {p.action} {where}{gpu}{price}{cap}"


class ApprovalDesk:
    """Owned by the app; reads the pictures the campaign follower delivers and answers through ``app.control``."""

    def __init__(self, app: ConsoleHost) -> None:
        self._app = app
        self._answered: set[str] = set()          # answered here, until a picture no longer lists them
        self._seen: dict[str, PendingApproval] = {}
        self._announced: list[tuple[frozenset[str], Notification]] = []   # arrival toasts and the requests in each
        self.expired: list[PendingApproval] = []  # vanished unanswered once their time was up, oldest first
        self._offered: tuple[bool, bool] | None = None

    # --- reading --------------------------------------------------------------------------------------------------
    @property
    def wall(self) -> Clock:
        """The clock that the requests' ages and expiries are on: the broker's (the console's own without one)."""
        source = self._app.control.source
        return source.broker.wall if source is not None else self._app.services.clock

    def wall_now(self) -> float:
        return self.wall.now()

    def listed(self, state: ConsoleState | None = None) -> list[PendingApproval]:
        """The requests the campaign lists as pending, less those answered here already (oldest first)."""
        picture = (state or self._app.state).campaign
        if picture is None:
            return []
        listed = picture.snapshot.pending_approvals
        self._answered &= {p.request_id for p in listed}
        return [p for p in listed if p.request_id not in self._answered]

    def answerable(self) -> list[PendingApproval]:
        """Pending and still within their time."""
        now = self.wall_now()
        return [p for p in self.listed() if not p.is_expired(now)]

    def digest(self) -> PendingDigest | None:
        waiting = self.answerable()
        if not waiting:
            return None
        now = self.wall_now()
        return PendingDigest(len(waiting), max(p.waited_s(now) for p in waiting),
                             min(p.expires_in_s(now) for p in waiting))

    def offers(self, action: str) -> bool:
        """Whether the app-level approval key for ``action`` is live (and shown in the footer) now."""
        app = self._app
        if app.settings.readonly or app.screen is not app.screen_stack[0]:
            return False
        if action == POPUP_ACTION:
            return app.control.is_running or bool(self.listed()) or bool(self.expired)
        return action in ANSWER_ACTIONS and app.control.is_running and bool(self.answerable())

    # --- following ------------------------------------------------------------------------------------------------
    def noticed(self, state: ConsoleState) -> None:
        """A new picture: announce requests that arrived, keep those that expired, update the footer's keys."""
        now = self.wall_now()
        listed = self.listed(state)
        ids = {p.request_id for p in listed}
        for request_id, p in self._seen.items():
            if request_id not in ids and request_id not in self._answered and p.is_expired(now):
                self.expired = [*self.expired, p][-EXPIRED_KEPT:]
                self._app.notify(f"{facts(p)} — expired unanswered after {span(p.expires_wall_s - p.asked_wall_s)}; "
                                 "it counts as refused", title="Approval expired", severity="warning", timeout=30)
        arrived = [p for p in listed if p.request_id not in self._seen]
        if arrived:   # one toast per burst: a campaign often asks for several rents at once
            shown = [facts(p) for p in arrived[:TOASTED]]
            more = [f"… and {len(arrived) - TOASTED} more"] if len(arrived) > TOASTED else []
            title = "Approval needed" if len(arrived) == 1 else f"{len(arrived)} approvals needed"
            toast = self._app.toast("\n".join([*shown, *more, f"expire in {span(self._expiry_s(arrived[0]))} · a "
                                                "approve oldest · x refuse · ctrl+a list"]),
                                    title=title, severity="warning", timeout=20)
            self._announced.append((frozenset(p.request_id for p in arrived), toast))
            self._app.bell()
        self._seen = {p.request_id: p for p in listed}
        self._withdraw_settled()
        self.sync_keys()

    def _withdraw_settled(self) -> None:
        """Take down each arrival toast none of whose requests is still waiting: a toast saying "3 approvals
        needed" must not stay up for its 20 s once they were answered (or expired, or withdrawn)."""
        waiting = {p.request_id for p in self.answerable()}
        kept = []
        for ids, toast in self._announced:
            if ids & waiting:
                kept.append((ids, toast))
            else:
                self._app.withdraw(toast)
        self._announced = kept

    @staticmethod
    def _expiry_s(p: PendingApproval) -> float:
        return p.expires_wall_s - p.asked_wall_s

    def sync_keys(self) -> None:
        """Refresh the footer when what it should offer changed (pending or not, popup or not)."""
        offered = (self.offers("approve_oldest"), self.offers(POPUP_ACTION))
        if offered != self._offered:
            self._offered = offered
            self._app.refresh_bindings()

    # --- answering ------------------------------------------------------------------------------------------------
    def approve(self, request_id: str, *, by_key: str = "a") -> bool:
        """Grant one request; False (and said) when it is no longer pending or its time is up."""
        return self._answer(request_id, approve=True, by_key=by_key)

    def refuse(self, request_id: str, *, by_key: str = "x") -> bool:
        return self._answer(request_id, approve=False, by_key=by_key)

    def _answer(self, request_id: str, *, approve: bool, by_key: str) -> bool:
        p = next((p for p in self.listed() if p.request_id == request_id), None)
        control = self._app.control
        if p is not None and p.is_expired(self.wall_now()):
            self._app.notify(f"{request_id} has expired: it counts as refused and cannot be approved",
                             severity="warning")
            return False
        done = control.approve(request_id, key=by_key) if approve else control.refuse(request_id, key=by_key)
        self._answered.add(request_id)
        if not done:
            self._app.notify(f"{request_id} is no longer pending", severity="warning")
        elif p is not None:
            self._app.notify(f"{'approved' if approve else 'refused'} {facts(p)}")
        self._withdraw_settled()
        self._app.render_current()
        self.sync_keys()
        return done

    def oldest(self) -> PendingApproval | None:
        waiting = self.answerable()
        return waiting[0] if waiting else None

    def answer_oldest(self, *, approve: bool) -> None:
        oldest = self.oldest()
        if oldest is None:
            self._app.notify("no approval is pending", severity="warning")
            return
        self._answer(oldest.request_id, approve=approve, by_key="a (oldest)" if approve else "x (oldest)")
