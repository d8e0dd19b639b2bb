"""Typed reading of TOML tables, with errors that point at the line of the offending key.

tomllib returns plain values without positions, so the line of a field is found again in the source text: the
table header ``[section]``, then the ``key =`` line inside that table (or a dotted ``section.key =`` / inline table).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from typing import NoReturn

from vastui.errors import ManifestError

_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY_LINE = re.compile(r"^\s*[\"']?([A-Za-z0-9_.-]+)[\"']?\s*=")
_DECODE_LINE = re.compile(r"at line (\d+), column \d+")


class Locator:
    """Finds the 1-based source line of a dotted field in a TOML text."""

    def __init__(self, text: str, *, path: str) -> None:
        self.path = path
        self._lines = text.splitlines()

    def _header_index(self, section: str) -> int | None:
        for index, line in enumerate(self._lines):
            match = _HEADER.match(line)
            if match and match.group(1).strip("\"'") == section:
                return index
        return None

    def line_of(self, section: str, key: str | None = None) -> int:
        """Line of ``section.key`` (or of the section when key is None); 1 when the section is not written at all."""
        header = self._header_index(section)
        if header is not None and key is not None:
            for index in range(header + 1, len(self._lines)):
                line = self._lines[index]
                if _HEADER.match(line):
                    break
                match = _KEY_LINE.match(line)
                if match and match.group(1) == key:
                    return index + 1
        for index, line in enumerate(self._lines):
            match = _KEY_LINE.match(line)
            if match and match.group(1) in (f"{section}.{key}", section):
                return index + 1
        return header + 1 if header is not None else 1

    def line_from_decode_error(self, message: str) -> int | None:
        match = _DECODE_LINE.search(message)
        return int(match.group(1)) if match else None

    def field_at(self, line: int) -> str:
        """The dotted field written on a line (for syntax errors), e.g. ``measure.block_s``."""
        if not 1 <= line <= len(self._lines):
            return "<toml>"
        section = ""
        for index in range(line - 1, -1, -1):
            match = _HEADER.match(self._lines[index])
            if match:
                section = match.group(1).strip("\"'")
                break
        key_match = _KEY_LINE.match(self._lines[line - 1])
        if key_match is None:
            return section or "<toml>"
        return f"{section}.{key_match.group(1)}" if section else key_match.group(1)

    def error(self, section: str, key: str | None, reason: str) -> ManifestError:
        field = f"{section}.{key}" if key else section
        return ManifestError(reason, path=self.path, line=self.line_of(section, key), field=field)

    def unknown(self, key: str, *, known: Iterable[str], section: str | None = None) -> NoReturn:
        """Raise for a key nobody reads: a typo would otherwise silently fall back to a default."""
        close = difflib.get_close_matches(key, list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        if section is None:
            raise ManifestError(f"unknown section{hint}", path=self.path, line=self.line_of(key), field=key)
        raise self.error(section, key, f"unknown key{hint}")


class TableReader:
    """Reads typed values from one TOML table; ``finish()`` rejects keys that were never read."""

    def __init__(self, table: dict[str, object], *, name: str, locator: Locator, present: bool) -> None:
        self._table = table
        self._name = name
        self._locator = locator
        self._read: set[str] = set()
        self.present = present

    @classmethod
    def section(cls, data: dict[str, object], name: str, locator: Locator, *,
                required: bool = False) -> TableReader:
        value = data.get(name)
        if value is None:
            if required:
                raise locator.error(name, None, f"missing section [{name}]")
            return cls({}, name=name, locator=locator, present=False)
        if not isinstance(value, dict):
            raise locator.error(name, None, "must be a table")
        return cls(value, name=name, locator=locator, present=True)

    def fail(self, key: str | None, reason: str) -> NoReturn:
        raise self._locator.error(self._name, key, reason)

    def finish(self) -> None:
        for key in self._table:
            if key not in self._read:
                self._locator.unknown(key, known=self._read, section=self._name)

    def _get(self, key: str) -> object | None:
        self._read.add(key)
        return self._table.get(key)

    def optional_text(self, key: str, *, non_empty: bool = False) -> str | None:
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(key, f"must be a string, not {_kind(value)}")
        if non_empty and not value.strip():
            self.fail(key, "must not be empty")
        self._check_passable(key, value, where="")
        return value

    def text(self, key: str, *, default: str | None = None, non_empty: bool = False) -> str:
        """A string; required when ``default`` is None."""
        value = self.optional_text(key, non_empty=non_empty)
        if value is None:
            if default is None:
                self.fail(key, "is required")
            return default
        return value

    def optional_texts(self, key: str, *, non_empty: bool = False) -> tuple[str, ...] | None:
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.fail(key, "must be a list of strings")
        if non_empty and (not value or not all(item.strip() for item in value)):
            self.fail(key, "must be a non-empty list of non-empty strings")
        for index, item in enumerate(value):
            self._check_passable(key, item, where=f"item {index} ")
        return tuple(value)

    def _check_passable(self, key: str, value: str, *, where: str) -> None:
        """Refuse a string that no argv, environment, path or label can carry: the OS would cut it at a NUL byte
        (or the SSH channel drop it), and a lone surrogate has no UTF-8 form, so it would fail on every host."""
        if "\x00" in value:
            self.fail(key, f"{where}contains a NUL byte (\\x00) at character {value.index(chr(0))}: no command "
                           "line, environment variable or file name can carry one")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            self.fail(key, f"{where}contains a character with no UTF-8 form ({value[exc.start]!a}) at character "
                           f"{exc.start}")

    def texts(self, key: str, *, non_empty: bool = False) -> tuple[str, ...]:
        """A required list of strings."""
        value = self.optional_texts(key, non_empty=non_empty)
        if value is None:
            self.fail(key, "is required")
        return value

    def optional_number(self, key: str, *, minimum: float | None = None, maximum: float | None = None,
                        exclusive: bool = False) -> float | None:
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            self.fail(key, f"must be a finite number, not {_kind(value)}")
        number = float(value)
        if minimum is not None and (number < minimum or (exclusive and number == minimum)):
            self.fail(key, f"must be {'>' if exclusive else '>='} {minimum:g}, not {number:g}")
        if maximum is not None and number > maximum:
            self.fail(key, f"must be <= {maximum:g}, not {number:g}")
        return number

    def number(self, key: str, *, default: float | None = None, minimum: float | None = None,
               maximum: float | None = None, exclusive: bool = False) -> float:
        """A float (an integer is accepted); required when ``default`` is None."""
        value = self.optional_number(key, minimum=minimum, maximum=maximum, exclusive=exclusive)
        if value is None:
            if default is None:
                self.fail(key, "is required")
            return default
        return value

    def boolean(self, key: str, *, default: bool) -> bool:
        """A true/false switch; ``default`` when absent."""
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {_kind(value)}")
        return value

    def integer(self, key: str, *, default: int | None = None, minimum: int | None = None) -> int:
        """An integer; required when ``default`` is None."""
        value = self._get(key)
        if value is None:
            if default is None:
                self.fail(key, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be an integer, not {_kind(value)}")
        if minimum is not None and value < minimum:
            self.fail(key, f"must be >= {minimum}, not {value}")
        return value

    def integers(self, key: str, *, minimum: int) -> tuple[int, ...]:
        """An optional list of distinct integers >= minimum; () when absent."""
        value = self._get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            self.fail(key, "must be a list of integers")
        if any(v < minimum for v in value):
            self.fail(key, f"every value must be >= {minimum}")
        if len(set(value)) != len(value):
            self.fail(key, "lists a value twice")
        return tuple(value)


def _kind(value: object) -> str:
    names = {bool: "a boolean", str: "a string", list: "a list", dict: "a table", int: "an integer", float: "a float"}
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return names.get(type(value), type(value).__name__)
