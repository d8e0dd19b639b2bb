"""Leaving a console that rented by hand: quitting while instances it rented still bill asks first.

What the console rented is what its ad-hoc campaign owns (``campaign/adhoc.py``); whether each still bills is read
from a fresh instance listing at the moment of quitting, not from the last refresh (a rent a second ago counts).
The answers: stay, quit and leave them billing (they stay owned until their deadline), or destroy them — through
the normal confirmation — and quit once the destroys went out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vastui.errors import VastuiError
from vastui.tui.dialogs.choice import ChoiceDialog
from vastui.vast.models import Instance, InstanceStatus

if TYPE_CHECKING:
    from vastui.tui.host import ConsoleHost



class QuitAnswer(enum.StrEnum):
    """Quitting while instances rented here still bill."""

    CANCEL = "cancel"
    LEAVE = "leave"        # quit, leaving them billing
    DESTROY = "destroy"    # destroy them (each approved), then quit


@dataclass(frozen=True, slots=True)
class StillBilling:
    """The console's own rentals at the moment of quitting: listed ones, and how sure that list is."""

    instances: tuple[Instance, ...]
    unsure: str | None          # why more may bill than listed (an incomplete listing, a create not yet bound)

    @property
    def burn_usd_per_h(self) -> float:
        return sum(_burn(i) for i in self.instances)


def _burn(instance: Instance) -> float:
    if InstanceStatus.STOPPED in (instance.actual_status, instance.intended_status):
        return instance.storage_total_cost or 0.0
    return instance.dph_total or 0.0


def billing_lines(billing: StillBilling) -> list[str]:
    lines = [f"instance {i.id}  {i.num_gpus or '?'}x {i.gpu_name or '?'}  {i.actual_status or 'provisioning'}  "
             f"${_burn(i):.3f}/h" for i in billing.instances]
    lines.append(f"together ${billing.burn_usd_per_h:.3f}/h, billing until destroyed")
    if billing.unsure:
        lines.append(f"(maybe more: {billing.unsure})")
    return lines


class RentalsQuit:
    """The no-campaign quit of the console (``q``, ``ctrl+c``, ``:q``)."""

    def __init__(self, app: ConsoleHost) -> None:
        self._app = app
        self._asking = False

    def ask_quit(self) -> None:
        if self._app.actions.owner is None or self._app.actions.owner.campaign_id is None:
            self._app.exit()   # rented nothing this session (or has no store to own it with)
            return
        if not self._asking:
            self._asking = True
            self._app.run_worker(self._check_then_ask(), name="quit-rentals", group="quit-rentals", exclusive=True,
                                 exit_on_error=False)

    async def still_billing(self) -> StillBilling:
        """A fresh listing against what the ad-hoc campaign owns."""
        owner, store = self._app.actions.owner, self._app.services.store
        assert owner is not None and owner.campaign_id is not None and store is not None
        owned = await store.owned_instances(campaign_id=owner.campaign_id)
        listing = await self._app.services.market.list_instances()
        ids = {o.intent.instance_id for o in owned if o.intent.instance_id is not None}
        unbound = sum(1 for o in owned if o.intent.instance_id is None)
        unsure = None if listing.is_complete else f"the listing is incomplete: {listing.error}"
        if unbound:
            unsure = "; ".join(filter(None, (unsure, f"{unbound} rent(s) not confirmed yet")))
        return StillBilling(instances=tuple(i for i in listing.instances if i.id in ids), unsure=unsure)

    async def _check_then_ask(self) -> None:
        try:
            billing = await self.still_billing()
        except VastuiError as exc:  # the worker boundary: unable to tell, so ask as if they bill
            billing = StillBilling(instances=(), unsure=f"could not list the instances: {exc.message}")
        if not billing.instances and billing.unsure is None:
            await self._close_then_exit(leaving_billing=False)
            return

        def answered(choice: QuitAnswer | None) -> None:
            self._asking = False
            if choice is QuitAnswer.LEAVE:
                self._app.run_worker(self._close_then_exit(leaving_billing=True), group="quit-rentals")
            elif choice is QuitAnswer.DESTROY:
                self._app.run_worker(self._destroy_then_exit(billing), group="quit-rentals")

        self._app.push_screen(ChoiceDialog(
            title=f"{len(billing.instances)} instance(s) rented here still bill",
            lines=billing_lines(billing),
            choices=[(QuitAnswer.CANCEL, "Cancel"), (QuitAnswer.LEAVE, "Quit, leave them billing"),
                     (QuitAnswer.DESTROY, "Destroy them…")]),
            callback=answered)

    async def _close_then_exit(self, *, leaving_billing: bool) -> None:
        owner = self._app.actions.owner
        try:
            if owner is not None:
                await owner.close(leaving_billing=leaving_billing)
        except VastuiError as exc:  # quitting anyway: the watcher judges them by their claim and deadline
            self._app.notify(exc.message, title="Ad-hoc campaign", severity="error")
        self._app.exit()

    async def _destroy_then_exit(self, billing: StillBilling) -> None:
        try:
            outcome = await self._app.actions.destroy(list(billing.instances))
        except VastuiError as exc:
            self._app.notify(exc.message, title="Destroy failed", severity="error")
            return
        self._app.outcomes.append(outcome)
        self._app.notify(outcome.summary(), severity="error" if outcome.errors else "information")
        if outcome.declined or outcome.errors:
            return   # stay: something still bills
        await self._close_then_exit(leaving_billing=False)
