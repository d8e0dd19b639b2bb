"""A campaign in the console (part of the composition root): ``vastui demo`` and ``vastui campaign run`` on a
terminal open the console on the planned campaign, waiting for approvals by key; when the operator detaches, the
campaign runs on here, headless, to its receipt.

Textual loads only when a console opens; headless runs never import it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from vastui.bench.receipt import Receipt, render_markdown
from vastui.campaign.broker import ApprovalBroker
from vastui.campaign.handle import CampaignHandle, CampaignResult
from vastui.campaign.session import CampaignServices
from vastui.cli.signals import run_async, watch_for_exit
from vastui.events import Event
from vastui.store import Store

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from vastui.tui.services import ConsoleMarket, ConsoleSettings


def console_settings(*, time_scale: float) -> ConsoleSettings:
    """Refresh intervals on the campaign's clock, so that at any time scale the console polls the marketplace at
    the same wall-clock pace (the simulator's clock may run 120 times faster than the wall)."""
    from vastui.tui.services import ConsoleSettings

    return ConsoleSettings(initial_view="campaign", offers_interval_s=60.0 * time_scale,
                           instances_interval_s=5.0 * time_scale, account_interval_s=15.0 * time_scale,
                           leaks_interval_s=30.0 * time_scale, logs_interval_s=5.0 * time_scale)


async def run_in_console(services: CampaignServices, handle: CampaignHandle, *, market: ConsoleMarket, store: Store,
                         time_scale: float, on_detach: Callable[[Event], None]) -> CampaignResult:
    """Show the campaign in the console until the operator leaves; then await its end here (headless, printing
    with ``on_detach``, when the operator detached). Ctrl-C on the headless wait aborts it and proves it gone.
    ``market`` is the client behind ``services.market``, as the console calls it (it rents and funds too), and
    ``store`` the store behind ``services.store``, as the console reads it."""
    from vastui.tui.app import VastuiApp
    from vastui.tui.campaign_control import Leaving
    from vastui.tui.services import ConsoleServices

    console_services = ConsoleServices(market=market, clock=services.clock, bus=services.bus, store=store, audit=store)
    app = VastuiApp(services=console_services, settings=console_settings(time_scale=time_scale), campaign=handle)
    try:
        await app.run_async()
    except BaseException as exc:
        # The terminal went away under the console (a closed window: SIGHUP, then EIO on every write) or the
        # console failed: nobody can watch or answer any more. The campaign is aborted and its teardown awaited
        # here, before the store and the client close — a console's end never leaves instances billing.
        log.error("the console ended (%s): aborting the campaign and tearing it down", type(exc).__name__)
        handle.abort("the console ended while the campaign ran")
        with contextlib.suppress(Exception):
            await handle.result(abort_if_cancelled="the console ended while the campaign ran")
        raise
    if handle.is_done:
        return await handle.result()
    if app.control.leaving is not Leaving.DETACHED:
        handle.abort("the console closed while the campaign ran")
    elif (command := leave_pending(handle.broker, store, campaign_id=handle.campaign_id,
                                   keep=app.control.kept_for_command)) is not None:
        print(f"detached; {len(handle.broker.pending())} request(s) wait for an answer now, and later ones will: "
              f"each is kept until it expires. List and answer them with: {shlex.join(command)}", file=sys.stderr,
              flush=True)
    stop = services.bus.listen(on_detach)
    try:
        return await handle.result(abort_if_cancelled="interrupted at the terminal after detaching")
    finally:
        stop()


def leave_pending(broker: ApprovalBroker, store: Store, *, campaign_id: str,
                  keep: bool) -> tuple[str, ...] | None:
    """What becomes of the requests nobody at the keys will answer, once the operator detached (the leave dialog
    asked). ``keep``: each request that waits for a human is kept in the store until `vastui campaign approve` (or
    refuse) answers it there, or it expires; returns that command. Otherwise a request that no rule or approved plan
    grants is refused at once (no new spend without an operator); returns None. Either way what is rented is
    measured, decided, destroyed and proven gone."""
    if keep:
        broker.keep_for_command(store, campaign_id=campaign_id)
        return approve_command(campaign_id, store.location)
    broker.stop_asking("the operator detached the console")
    return None


def approve_command(campaign_id: str, db: str | Path) -> tuple[str, ...]:
    """The exact command that answers a detached campaign's kept requests (its store named: the demo's is not the
    default one; a server's URL without its password, which the operator's own config or $VASTUI_DB supplies)."""
    return ("vastui", "campaign", "approve", campaign_id, "--db", str(db))


def demo_in_console(args: argparse.Namespace, *, data_dir: Path | None,
                    printer: Callable[[Event], None], summary: Callable[[Receipt], str], expiry_s: float) -> int:
    """``vastui demo`` on a terminal: the console on the embedded simulator, the demo campaign waiting for keys
    (each request for ``expiry_s`` wall seconds, however fast the simulated clock runs)."""
    from vastui.sim.demo import open_demo

    async def run() -> tuple[CampaignResult, int, Path]:
        async with open_demo(seed=args.seed, time_scale=args.time_scale,
                             data_dir=data_dir) as demo:
            handle = demo.start(plan_approved=False, expiry_s=expiry_s)
            watch_for_exit(handle, ())
            result = await run_in_console(demo.services, handle, market=demo.client, store=demo.store, time_scale=args.time_scale,
                                          on_detach=printer)
            return result, await demo.instances_left(), demo.db_path

    result, left, db_path = run_async(run())
    console = Console(soft_wrap=True)
    receipt = result.receipt
    if result.aborted:
        console.print(f"aborted: {result.aborted}", highlight=False, markup=False)
    console.print(render_markdown(receipt), highlight=False, markup=False)
    console.print(summary(receipt), highlight=False, markup=False)
    console.print(f"the simulator lists {left} instance(s) after the campaign; store: {db_path}",
                  highlight=False, markup=False)
    return 0 if receipt.teardown_passed and left == 0 else 1
