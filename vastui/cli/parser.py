"""The CLI's argument parser: argparse whose error messages never echo a value the operator typed.

Plain argparse quotes what it could not parse (``invalid choice: 'KEY'``), and what it could not parse is often the
API key: ``vastui --api-key KEY instances`` puts the key where the command belongs. So every message argparse
would print is rewritten here before it is shown: values are dropped (a short hint says what was wrong), option
names are kept, and whatever still looks like a secret (a token given to ``--api-key``, the key from the environment
or the official CLI's key file, a URL's ``user:pass``) is redacted as a last guard. Part of the composition root.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

# argparse's own message shapes (Python 3.11), each holding a value the operator typed
_INVALID_CHOICE = re.compile(r"^(?P<where>argument [^:]+): invalid choice: .* \(choose from (?P<choices>.*)\)$",
                             re.DOTALL)
_INVALID_VALUE = re.compile(r"^(?P<where>argument [^:]+): invalid (?P<type>\S+) value: .*$", re.DOTALL)
_AMBIGUOUS = re.compile(r"^ambiguous option: (?P<option>\S+) could match (?P<matches>.*)$", re.DOTALL)
_IGNORED_EXPLICIT = re.compile(r"^(?P<where>argument [^:]+): ignored explicit argument .*$", re.DOTALL)
# a quoted value anywhere else (an ArgumentTypeError that quotes what it refused)
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.DOTALL)
_OPTION_NAME = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*$")
_SUBCOMMAND_METAVARS = ("COMMAND", "ACTION")
_KEY_OPTION = "--api-key"
_CONNECTION_OPTIONS = ("--api-key", "--url")


class SafeArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser (the root and, through ``add_subparsers``, every subparser) whose errors show no values.

    Call ``parse_safely`` on the root: it tells every parser below it what argv was (to know the tokens given to
    ``--api-key``) and reports unrecognized arguments by their option names only.
    """

    argv: tuple[str, ...] = ()

    def parse_safely(self, argv: Sequence[str]) -> argparse.Namespace:
        """``parse_args(argv)``, with every error message shown without the values typed."""
        for parser in _parser_tree(self):
            parser.argv = tuple(argv)
        args, extras = self.parse_known_args(argv)
        if extras:
            self._refuse(unrecognized_message(extras, secrets=argv_secrets(argv)))
        return args

    def error(self, message: str) -> NoReturn:
        """Print the usage and the message with every value dropped and every secret redacted; exit 2."""
        self._refuse(safe_message(message, secrets=argv_secrets(self.argv)))

    def _refuse(self, shown: str) -> NoReturn:
        self.print_usage(sys.stderr)
        hint = _misplaced_option_hint(self.argv) if " " not in self.prog else ""  # the root's prog is one word
        self.exit(2, f"{self.prog}: error: {shown}{hint}\n")


def _parser_tree(root: SafeArgumentParser) -> list[SafeArgumentParser]:
    found: list[SafeArgumentParser] = [root]
    for parser in found:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.extend(child for child in action.choices.values()
                             if isinstance(child, SafeArgumentParser) and child not in found)
    return found


def _misplaced_option_hint(argv: Sequence[str]) -> str:
    """``vastui --api-key KEY instances``: the connection options belong to the command, after its name."""
    first = argv[0].split("=", 1)[0] if argv else ""
    if any(len(first) > 2 and option.startswith(first) for option in _CONNECTION_OPTIONS):
        return " (--api-key and --url go after the command's name, e.g. vastui instances --api-key ...)"
    return ""


def argv_secrets(argv: Sequence[str]) -> list[str]:
    """Every token argv gives to ``--api-key`` (or an abbreviation of it), and the key from the environment or the
    official CLI's key file: the values no message may show."""
    secrets: list[str] = []
    for index, token in enumerate(argv):
        name, has_value, value = token.partition("=")
        if len(name) > 3 and _KEY_OPTION.startswith(name):
            if has_value:
                secrets.append(value)
            elif index + 1 < len(argv):
                secrets.append(argv[index + 1])
    secrets.extend(_known_keys())
    return secrets


def _known_keys() -> list[str]:
    from vastui.config import known_api_key

    key = known_api_key()
    return [] if key is None else [key.reveal()]


def unrecognized_message(extras: Sequence[str], *, secrets: Iterable[str]) -> str:
    """``unrecognized arguments``, naming the option names among them and only counting the values."""
    hidden = set(secrets)
    names = [token.split("=", 1)[0] for token in extras
             if _OPTION_NAME.match(token.split("=", 1)[0]) and token.split("=", 1)[0] not in hidden]
    values = len(extras) - len(names)
    parts = [" ".join(names)] if names else []
    if values:
        parts.append(f"{values} value{'s' if values > 1 else ''} (not shown)")
    return f"unrecognized arguments: {' and '.join(parts)} (see --help)"


def safe_message(message: str, *, secrets: Iterable[str]) -> str:
    """argparse's ``message`` with the values it quotes dropped and every secret and URL password redacted."""
    if match := _INVALID_CHOICE.match(message):
        where = match["where"]
        if where.removeprefix("argument ") in _SUBCOMMAND_METAVARS:
            shown = f"invalid {where.removeprefix('argument ').lower()} (choose from {match['choices']}; see --help)"
        else:
            shown = f"{where}: invalid choice (choose from {match['choices']})"
    elif match := _INVALID_VALUE.match(message):
        shown = f"{match['where']}: invalid {match['type']} value (not shown)"
    elif match := _AMBIGUOUS.match(message):
        shown = f"ambiguous option: {match['option'].split('=', 1)[0]} could match {match['matches']}"
    elif match := _IGNORED_EXPLICIT.match(message):
        shown = f"{match['where']}: takes no value"
    elif message.startswith("unrecognized arguments:"):  # plain parse_args: the tokens are not told apart here
        shown = "unrecognized arguments (not shown; see --help)"
    else:
        shown = _QUOTED.sub("(not shown)", message)
    return _redact(shown, secrets)


def _redact(text: str, secrets: Iterable[str]) -> str:
    from vastui.config import Redactor

    return Redactor(secrets)(text)
