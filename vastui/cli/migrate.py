"""`vastui migrate`: copy one operator's store into the team's (vastui/store/copying.py; README, A team's store)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
The copy is one transaction: it lands whole or not at all. Campaign ids, instance ids and who wrote each row are
kept; row ids too, unless the team's store already uses them (then the copied rows are renumbered and their
references follow). A store copied before is refused. The password may come from PGPASSWORD or ~/.pgpass instead
of the URL; it is never printed.

example:
  vastui migrate --from sqlite:~/.local/share/vastui/vastui.sqlite3 --to postgresql://ana@db.lab:5432/vastui"""


def add_migrate_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("migrate", help="copy this operator's store into a team's PostgreSQL store",
                       description="Copy every campaign, instance record, run, measurement, bad host, approval and\n"
                                   "audit record of one store into another.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source", metavar="SOURCE",
                   help="sqlite:PATH or a SQLite file (default: this operator's store, as the other commands use "
                        "it without --db)")
    p.add_argument("--to", dest="target", required=True, metavar="TARGET",
                   help="the team's store: a postgresql:// URL (or another SQLite file)")
    p.set_defaults(handler=_cmd_migrate)


async def _cmd_migrate(args: argparse.Namespace) -> int:
    from vastui.campaign.owner import OwnerState, owner_state
    from vastui.config import load_settings, without_password
    from vastui.errors import ConfigError
    from vastui.store import is_postgres_url, open_store
    from vastui.store.copying import copy_store

    settings = load_settings()
    source = _sqlite_path(args.source) if args.source else settings.db_path
    if not source.is_file():
        raise ConfigError(f"no store at {source} to copy from (--from sqlite:PATH names one)")
    target: str | Path = args.target if is_postgres_url(args.target) else _sqlite_path(args.target)
    if isinstance(target, Path) and target.resolve() == source.resolve():
        raise ConfigError("--from and --to name the same store")
    shown_target = without_password(target) if isinstance(target, str) else str(target)
    async with await open_store(source, data_dir=settings.data_dir) as from_store:
        owners = await from_store.campaign_owners()
        running = [c.campaign_id for c in await from_store.campaigns()
                   if c.is_active and c.campaign_id in owners
                   and owner_state(owners[c.campaign_id]) is OwnerState.ALIVE]
        if running:
            raise ConfigError(f"campaign(s) {', '.join(running)} still run on this store: let them finish (or stop "
                              "them) first, or their last writes would stay behind", title="Campaign running")
        async with await open_store(target, data_dir=settings.data_dir, operator=settings.operator) as to_store:
            print(f"copying {source} into {shown_target}", file=sys.stderr)
            report = await copy_store(from_store, to_store,
                                      on_table=lambda table, n: print(f"  {table:<22}{n:>9}", file=sys.stderr))
    kept = ("row ids kept" if not report.renumbered
            else f"row ids kept, except in {', '.join(report.renumbered)} (taken there: renumbered)")
    there = "".join(f"; {n} row(s) of {table} were there already" for table, n in report.already_there.items())
    print(f"copied {report.total} row(s) from {source} into {shown_target}; {kept}{there}")
    print(f"use it: db_url = \"{shown_target}\" in config.toml, or VASTUI_DB={shown_target}; name yourself with "
          "operator = \"...\"")
    return 0


def _sqlite_path(text: str) -> Path:
    return Path(text.removeprefix("sqlite:")).expanduser()
