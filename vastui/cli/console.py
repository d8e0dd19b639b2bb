"""`vastui console` (and bare `vastui` on a terminal): build the real services and run the Textual console.

Only argparse is imported here at module level; the console (Textual) and the services load when it runs.
"""

from __future__ import annotations

import argparse
import functools
import sys

from vastui.cli.terminal import add_connection_args
from vastui.errors import VastuiError


def add_console_command(parser: argparse.ArgumentParser,
                        sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("console", help="open the console (also what `vastui` alone does on a terminal)")
    add_console_args(p)
    p.set_defaults(handler=run_console)
    add_console_args(parser, top_level=True)
    # the parser is handed to the bare command (its help is what a script gets), never imported back from vastui.cli
    parser.set_defaults(handler=functools.partial(run_bare, parser=parser))


def add_console_args(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    if not top_level:
        add_connection_args(parser)
    parser.add_argument("--readonly", action="store_true", help="console: open with every mutation disabled")
    parser.add_argument("--theme", type=theme_name,
                        help="console theme: dark or light (default: config key 'theme', else dark)")


def theme_name(text: str) -> str:
    """argparse type: the name of a theme in themes/ (the message lists them; the value typed is not echoed)."""
    from vastui.errors import ConfigError
    from vastui.tui.themes import check_theme, theme_names

    try:
        return check_theme(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(f"unknown theme; the themes are: {', '.join(theme_names()) or 'none found'}") from None


def run_bare(args: argparse.Namespace, *, parser: argparse.ArgumentParser) -> int | object:
    """``vastui`` with no command: the console on a terminal, ``parser``'s help otherwise (scripts get no surprise)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        parser.print_help()
        return 2
    args.url = None
    args.api_key = None
    return run_console(args)


async def run_console(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Textual would wait for ever for a terminal that is not there
        raise VastuiError("the console needs a terminal (stdin and stdout); without one use the headless "
                          "commands: vastui offers, instances, leaks, campaign plan/run, demo --headless "
                          "(see vastui --help)", title="No terminal")
    from vastui.cli.terminal import vast_client
    from vastui.clock import MarketClock
    from vastui.config import load_settings
    from vastui.events import EventBus
    from vastui.store import open_store
    from vastui.tui.app import VastuiApp
    from vastui.tui.services import ConsoleServices, ConsoleSettings
    from vastui.tui.themes import check_theme
    from vastui.tui.view_memory import FILE_NAME as VIEW_MEMORY_FILE

    settings = load_settings(url=args.url, api_key=args.api_key)
    theme = check_theme(args.theme or settings.theme or "dark")
    console = ConsoleSettings(readonly=bool(args.readonly), theme=theme,
                              money_confirm_over_usd=settings.money_confirm_over_usd,
                              view_memory_path=settings.config_dir / VIEW_MEMORY_FILE)
    clock = MarketClock()   # the marketplace's time, from its answers: accrued cost and deadlines are on it
    store = await open_store(settings.db, data_dir=settings.data_dir, operator=settings.operator)
    async with store, vast_client(args, audit=store, clock=clock) as client:
        services = ConsoleServices(market=client, clock=clock, bus=EventBus(), store=store, audit=store)
        await VastuiApp(services=services, settings=console).run_async()
    return 0
