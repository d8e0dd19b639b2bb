"""`vastui watch`: the leak watch as a service — a round every few minutes, alerts to the log and a webhook, and a
standing approval's destroys (vastui/campaign/lookout.py; docs/architecture.md, The leak watch)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from vastui.cli.terminal import add_connection_args, vast_client

if TYPE_CHECKING:
    from vastui.campaign.lookout import RoundResult

EPILOG = """\
configuration (config.toml in the config dir, e.g. ~/.config/vastui/config.toml):
  [watch]
  interval_min = 5          minutes between rounds
  quiet_min = 1440          one condition alerts once per this long
  runway_h = 24             alert when credit lasts fewer hours than this at the current burn
  blind_rounds = 3          alert when this many rounds in a row cannot read the whole listing
  webhook_url = "https://hooks.slack.com/services/..."   (or VASTUI_WEBHOOK_URL; never shown)

  [watch.destroy]           a standing approval to destroy leaks; without it the watch never destroys
  older_than_min = 120      only instances up this long...
  max_usd_per_h = 2.0       ...billing at most this...
  labels = ["vastui-*"]     ...whose label matches one of these ("*" also matches no label)
  include_unowned = false   true: instances vastui did not create too (still only those the labels match)

A leak is destroyed only once two rounds' complete listings agree on it; each destroy is approved for that
instance alone and written to the audit log. Alerts are kept in the store until the webhook takes them.
exit status with --rounds: 0 no leaks, 3 listing incomplete (unknown), 4 leaks remain, 1 error.
examples/vastui-watch.service runs it under systemd."""


def add_watch_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("watch", help="watch the account for leaks, alert, and destroy under a standing approval",
                       description="Reconcile the account's instances with the store every few minutes; alert on a\n"
                                   "new leak, an instance past its deadline, a stopped instance billing storage, low\n"
                                   "runway and an API key that stops working.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_connection_args(p)
    p.add_argument("--db", help="the store: a SQLite file or a team's postgresql:// URL (default: $VASTUI_DB, "
                                "config db_path/db_url, or the data dir)")
    p.add_argument("--interval", type=float, metavar="MINUTES",
                   help="minutes between rounds (default: config watch.interval_min, else 5)")
    p.add_argument("--rounds", type=int, metavar="N", help="stop after N rounds (1: one check, as from cron)")
    p.add_argument("--no-destroy", action="store_true",
                   help="leave the standing approval unused: report what it would destroy, destroy nothing")
    p.add_argument("--poll-interval", type=float, default=5.0, metavar="SECONDS",
                   help="seconds between the listings that prove a destroyed instance gone (default 5)")
    p.set_defaults(handler=_cmd_watch)


def _log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} vastui watch: {message}", file=sys.stderr, flush=True)


async def _cmd_watch(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib
    import dataclasses

    from vastui.campaign.lookout import Lookout
    from vastui.cli.webhook import WebhookSink
    from vastui.clock import MarketClock
    from vastui.config import load_settings
    from vastui.errors import ConfigError
    from vastui.store import open_store

    if args.interval is not None and not args.interval > 0:
        raise ConfigError("--interval must be a positive number of minutes")
    if args.rounds is not None and args.rounds < 1:
        raise ConfigError("--rounds must be 1 or more")
    settings = load_settings(url=args.url, api_key=args.api_key, db_path=args.db)
    watch = settings.watch
    if args.interval is not None:
        watch = dataclasses.replace(watch, interval_s=60.0 * args.interval)
    clock = MarketClock()
    store = await open_store(settings.db, data_dir=settings.data_dir, operator=settings.operator)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(store)
        sink = None
        if watch.webhook_url is not None:
            store.register_secret(watch.webhook_url)
            sink = await stack.enter_async_context(WebhookSink(watch.webhook_url))
        client = await stack.enter_async_context(vast_client(args, audit=store, clock=clock))
        _log(f"every {watch.interval_s / 60:g} min: {settings.url} against the store {settings.db_shown}, as "
             f"{store.writer.short}; alerts to this log"
             f"{f' and the webhook at {sink.shown}' if sink is not None else ''}, each condition once per "
             f"{watch.quiet_s / 3600:g} h")
        if watch.destroy is None:
            _log("no standing approval ([watch.destroy]): nothing is destroyed, only reported")
        else:
            off = " — OFF for this run (--no-destroy)" if args.no_destroy else ""
            _log(f"standing approval: destroys {watch.destroy.describe()}{off}")
        lookout = Lookout(market=client, store=store, clock=clock, settings=watch, sink=sink, log=_log,
                          destroy=not args.no_destroy, poll_s=args.poll_interval, who=f"vastui watch "
                          f"({store.writer.short})")
        last: list[RoundResult] = []

        def told(result: RoundResult) -> None:
            last[:] = [result]
            _log(f"round: {result.summary()}")

        await lookout.run(stop=asyncio.Event(), rounds=args.rounds, on_round=told)
    if not last:
        return 1
    report = last[0].report
    if not report.is_complete:
        return 3
    gone = {g.instance_id for g in last[0].destroyed.gone} if last[0].destroyed is not None else set()
    return 4 if [leak for leak in report.leaked if leak.instance_id not in gone] else 0
