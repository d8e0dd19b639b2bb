"""The offer search language of ``vastai search offers``, parsed into the JSON the official CLI sends.

Same syntax and same output as vastai 1.9.1 (``api/query.py``) for every query it accepts and we accept:
numbers stay strings, GB fields are multiplied by 1000 (MB), ``duration`` by 86400 (days to seconds),
``driver_version`` becomes an int, ``_`` becomes a space, ``in``/``notin`` give lists of strings, ``any``/``*``/``?``
remove a field (defaults included), aliases are applied and several operators on one field merge.

Where the official parser prints a warning, crashes or silently sends garbage, this one raises ``QueryError`` with
the 1-based column of the offending token: unconsumed text, an unknown operator or field (with a suggestion),
a blank value, a wildcard with an operator other than ``=``, ``in`` on a multiplied field, single quotes, stray
double quotes, and values of the wrong kind (``num_gpus>=two``).

Why one module past the usual size: the tokenizer, both parsers (the fast plain one and the careful one that
explains its error), ``-o`` order and the request body share one error helper and one column arithmetic; the
vocabulary is apart, in ``query_fields``.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from vastui.errors import QueryError
from vastui.vast.query_fields import (
    BOOL_FIELDS,
    DEFAULT_FILTERS,
    FIELD_ALIASES,
    FIELD_MULTIPLIERS,
    KNOWN_FIELDS,
    NUMERIC_FIELDS,
    OFFER_TYPES,
    OPERATORS,
    ORDER_FIELDS,
    VERSION_FIELD,
    WILDCARDS,
)

# The official CLI's term regex, verbatim: field, operator, spaces, value, spaces.
_TERM = re.compile(
    r"([a-zA-Z0-9_]+)( *[=><!]+| +(?:[lg]te?|nin|neq|eq|not ?eq|not ?in|in) )?( *)"
    r"(\[[^\]]+\]|\"[^\"]+\"|[^ ]+)?( *)"
)
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_VERSION_PART = re.compile(r"[0-9]{1,3}")
_VERSION_PARTS = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}")
_BOOL_WORDS = frozenset({"true", "True", "false", "False", "0", "1", "null", "None"})

FilterValue = str | float | int | bool | None | list[str] | list[int]
Filters = dict[str, dict[str, object]]


@dataclass(frozen=True, slots=True)
class Term:
    """One ``field op value`` term as written, with 0-based offsets into the full query."""

    field: str
    field_at: int
    op: str
    op_at: int
    value: str
    value_at: int


def tokenize(query: str) -> list[Term]:
    """Split a query into terms exactly as the official regex does; raise QueryError on text it cannot consume."""
    terms: list[Term] = []
    pos = len(query) - len(query.lstrip())
    end = len(query.rstrip())
    for match in _TERM.finditer(query, pos, end):
        if match.start() != pos:
            _check_ascii_field(query, pos)
            _fail(query, pos, f"unexpected {query[pos]!r}: each term starts with a field name, e.g. num_gpus>=2")
        _check_ascii_field(query, match.start(1))
        op_raw = match.group(2) or ""
        op_at = match.start(2) + (len(op_raw) - len(op_raw.lstrip(" "))) if op_raw else match.end(1)
        terms.append(Term(field=match.group(1), field_at=match.start(1), op=op_raw.strip(" "), op_at=op_at,
                          value=match.group(4) or "", value_at=match.start(4) if match.group(4) else match.end(3)))
        pos = match.end()
    if pos < end:
        _check_ascii_field(query, pos)
        _fail(query, pos, f"unexpected {query[pos]!r}: each term starts with a field name, e.g. num_gpus>=2")
    return terms


def _check_ascii_field(query: str, at: int) -> None:
    """A field name written with a non-ASCII letter (``gpü_name``) is reported whole, not as the ASCII part the
    official regex stops at (``'gp'``), with the column of the first such letter."""
    word = _WORD.match(query, at)
    if word is None:
        return
    bad = next((i for i, char in enumerate(word.group(), at) if not char.isascii()), None)
    if bad is not None:
        _fail(query, bad, f"field name {word.group()!r} has the non-ASCII character {query[bad]!r}; field names "
                          "are ASCII letters, digits and _ (e.g. gpu_name)")


def parse_query(query: str, *, base: Mapping[str, Mapping[str, object]] | None = None) -> Filters:
    """Parse a search query into ``{field: {op: value}}``, merged on top of ``base`` (not modified).

    Raises QueryError (with the column of the offending token) for anything the official CLI would reject,
    crash on, or send although it is surely a mistake.
    """
    try:
        return _parse_plain(query, base)
    except _NotPlain:
        return _parse_careful(query, base)


def _parse_careful(query: str, base: Mapping[str, Mapping[str, object]] | None) -> Filters:
    """Term by term with every check, so an error names its column."""
    result: Filters = {key: dict(ops) for key, ops in (base or {}).items()}
    for index, term in enumerate(tokenize(query)):
        field = _canonical_field(query, term, follows_value=index > 0 and not term.op)
        op = _operator(query, term)
        value = _value(query, term, field, op)
        ops = result.setdefault(field, {})
        if isinstance(value, _Wildcard):
            del result[field]
            continue
        ops[op] = value
    return result


class _Kind(enum.StrEnum):
    """What a field's values are, for the plain path's checks."""

    MULTIPLIED = "multiplied"   # a number scaled by the field's multiplier
    NUMBER = "number"
    BOOL = "bool"
    VERSION = "version"         # the driver version: dotted, or one number
    TEXT = "text"


# The plain path compares kinds per term: a module global is read about 15x faster than an enum member on 3.11.
_MULTIPLIED_KIND, _NUMBER_KIND, _BOOL_KIND, _VERSION_KIND, _TEXT_KIND = _Kind

# field or alias -> (canonical field, kind): the plain path's one lookup per term.
_FIELD_KINDS: Mapping[str, tuple[str, _Kind]] = {
    name: (FIELD_ALIASES.get(name, name), kind)
    for name in KNOWN_FIELDS | set(FIELD_ALIASES)
    for canonical in [FIELD_ALIASES.get(name, name)]
    for kind in [_Kind.MULTIPLIED if canonical in FIELD_MULTIPLIERS else _Kind.NUMBER if canonical in NUMERIC_FIELDS
                 else _Kind.BOOL if canonical in BOOL_FIELDS else _Kind.VERSION if canonical == VERSION_FIELD
                 else _Kind.TEXT]
}
_LITERALS: Mapping[str, bool | None] = {"true": True, "True": True, "false": False, "False": False,
                                        "null": None, "None": None}


class _NotPlain(Exception):
    """The plain path met something it leaves to the careful one (never escapes this module)."""


def _parse_plain(query: str, base: Mapping[str, Mapping[str, object]] | None) -> Filters:
    """The common case in one pass, as cheaply as the official parser: known fields and operators, well-formed
    values. Raises _NotPlain for anything else; the careful path then parses it (and finds any error's column). For
    every query it accepts it answers exactly as the careful path does."""
    text = query.strip()
    terms = _TERM.findall(text)
    if "".join(["".join(term) for term in terms]) != text:
        raise _NotPlain
    result: Filters = {key: dict(ops) for key, ops in base.items()} if base else {}
    for name, op_raw, _, raw, _ in terms:
        info = _FIELD_KINDS.get(name)
        op = OPERATORS.get(op_raw) or OPERATORS.get(op_raw.strip(" "))
        if info is None or op is None or not raw or "'" in raw:
            raise _NotPlain
        field, kind = info
        stripped = raw.strip(",[]")
        value: object
        if not stripped:
            raise _NotPlain
        if op == "in" or op == "notin":
            value = _plain_list(stripped, kind)
        elif kind is _VERSION_KIND and "." in stripped:
            value = _plain_version(stripped)
        elif stripped in WILDCARDS:
            if op != "eq":
                raise _NotPlain
            result.pop(field, None)
            continue
        elif kind is _TEXT_KIND and '"' not in stripped:
            text = stripped.replace("_", " ")
            value = _LITERALS.get(text, text)
        elif kind is _NUMBER_KIND and (stripped.isascii() and stripped.isdigit() or _NUMBER.fullmatch(stripped)):
            value = stripped
        else:
            value = _plain_scalar(stripped, field, kind)
        result.setdefault(field, {})[op] = value
    return result


def _unquoted(text: str) -> str:
    """``text`` without its one pair of enclosing double quotes (or as it is, unquoted); _NotPlain otherwise."""
    if '"' not in text:
        return text
    if len(text) > 2 and text[0] == '"' == text[-1] and text.count('"') == 2:
        return text[1:-1]
    raise _NotPlain


def _plain_scalar(stripped: str, field: str, kind: _Kind) -> object:
    text = _unquoted(stripped).replace("_", " ")
    if kind is _MULTIPLIED_KIND:
        scaled = float(text) * FIELD_MULTIPLIERS[field] if _NUMBER.fullmatch(text) else math.nan
        if not math.isfinite(scaled):
            raise _NotPlain
        return scaled
    if not text or text not in ("null", "None") and (
            kind is _NUMBER_KIND and not _NUMBER.fullmatch(text) or kind is _BOOL_KIND and text not in _BOOL_WORDS
            or kind is _VERSION_KIND and not (text.isascii() and text.isdigit())):
        raise _NotPlain
    return _LITERALS.get(text, text)


def _plain_list(stripped: str, kind: _Kind) -> list[str]:
    if kind is _MULTIPLIED_KIND or kind is _VERSION_KIND:
        raise _NotPlain
    values = [_unquoted(item).replace("_", " ") for piece in stripped.split(",") if (item := piece.strip())]
    if not values or not WILDCARDS.isdisjoint(values):
        raise _NotPlain
    for text in values:
        if (not text.strip(" ") or kind is _NUMBER_KIND and not _NUMBER.fullmatch(text)
                or kind is _BOOL_KIND and text not in _BOOL_WORDS):
            raise _NotPlain
    return values


def _plain_version(text: str) -> int:
    """``535.86.05`` -> ``535086005``: three parts of 1-3 digits, not all zero."""
    parts = text.split(".")
    if len(parts) != 3 or not _VERSION_PARTS.fullmatch(text) or not text.strip("0."):
        raise _NotPlain
    return int(parts[0]) * 1_000_000 + int(parts[1]) * 1_000 + int(parts[2])


class _Wildcard:
    """Marks a term that removes its field (``field=any``)."""


_WILDCARD = _Wildcard()


def _fail(query: str, offset: int, reason: str) -> None:
    raise QueryError(reason, query=query, column=min(max(offset, 0), max(len(query) - 1, 0)) + 1)


def _canonical_field(query: str, term: Term, *, follows_value: bool) -> str:
    field = FIELD_ALIASES.get(term.field, term.field)
    if field not in KNOWN_FIELDS and follows_value:
        _fail(query, term.field_at, f"unexpected {term.field!r}: a value with spaces must be double-quoted or "
                                    'written with _ (gpu_name="RTX 4090" or gpu_name=RTX_4090)')
    if field not in KNOWN_FIELDS:
        choices = sorted(KNOWN_FIELDS | set(FIELD_ALIASES))
        close = _close_matches(term.field, choices)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; see `vastui offers --help` for the fields"
        _fail(query, term.field_at, f"unknown field {term.field!r}{hint}")
    return field


def _operator(query: str, term: Term) -> str:
    if not term.op:
        where = term.value_at if term.value else term.field_at
        _fail(query, where, f"expected an operator after {term.field!r} (= != < <= > >= in notin); "
                            "quote multi-word values with double quotes")
    op = OPERATORS.get(term.op)
    if op is None:
        _fail(query, term.op_at, f"unknown operator {term.op!r}; use one of = != < <= > >= in notin")
    assert op is not None
    return op


def _value(query: str, term: Term, field: str, op: str) -> FilterValue | _Wildcard:
    raw = term.value
    at = term.value_at if raw else term.op_at
    quote = raw.find("'")
    if quote >= 0:
        _fail(query, at + quote, "single quotes are not part of the query language; use double quotes")
    stripped = raw.strip(",[]")
    if not stripped:
        _fail(query, at, f"value cannot be blank for {term.field!r}")
    if op in ("in", "notin"):
        if field in FIELD_MULTIPLIERS:
            _fail(query, term.op_at, f"{term.field!r} is given in {_unit(field)} and cannot be used with {term.op!r}; "
                                     "use a range such as >= and <=")
        return _list_value(query, term, field)
    _check_double_quotes(query, stripped, at + raw.find(stripped))
    if field == VERSION_FIELD and "." in stripped:
        return _driver_version(query, stripped, at)
    if stripped in WILDCARDS:
        if op != "eq":
            _fail(query, at, f"wildcard {stripped!r} only makes sense with '=' (it removes the filter)")
        return _WILDCARD
    text = stripped.replace("_", " ").strip('"')
    if not text:
        _fail(query, at, f"value cannot be blank for {term.field!r}")
    if field in FIELD_MULTIPLIERS:
        return _scaled(query, text, at, field)
    _check_kind(query, text, at, field)
    return {"true": True, "True": True, "false": False, "False": False,
            "null": None, "None": None}.get(text, text)


def _check_double_quotes(query: str, text: str, at: int) -> None:
    """A value is either unquoted, or wholly inside one pair of double quotes."""
    if '"' not in text:
        return
    if not text.startswith('"'):
        _fail(query, at + text.find('"'), "stray double quote inside a value")
    if len(text) < 2 or not text.endswith('"'):
        _fail(query, at, 'unclosed double quote (a quoted value must end with ")')
    inner = text.find('"', 1)
    if inner != len(text) - 1:
        _fail(query, at + inner, "stray double quote inside a value")


def _list_value(query: str, term: Term, field: str) -> list[str] | list[int]:
    raw = term.value
    stripped = raw.strip(",[]")
    base = raw.find(stripped)
    items: list[tuple[str, int]] = []
    pos = 0
    for piece in stripped.split(","):
        item = piece.strip()
        if item:
            items.append((item, term.value_at + base + pos + len(piece) - len(piece.lstrip())))
        pos += len(piece) + 1
    if not items:
        _fail(query, term.value_at, f"the list for {term.field!r} is empty")
    if field == VERSION_FIELD and "." in stripped:
        # The official parser crashes here; we encode each version as it encodes a single one.
        return [_driver_version(query, item, col) for item, col in items]
    values: list[str] = []
    for item, col in items:
        _check_double_quotes(query, item, col)
        if item in WILDCARDS:
            _fail(query, col, f"wildcard {item!r} makes no sense in a list; use {term.field}=any to drop the filter")
        text = item.replace("_", " ").strip('"')
        if not text:
            _fail(query, col, "list items cannot be blank")
        if field in NUMERIC_FIELDS and not _NUMBER.fullmatch(text):
            _fail(query, col, f"{field} takes numbers, not {text!r}")
        if field == VERSION_FIELD and not (text.isascii() and text.isdigit()):
            _fail(query, col, f"not a driver version: {text!r} (write it like 535.86.05)")
        if field in BOOL_FIELDS and text not in _BOOL_WORDS:
            _fail(query, col, f"{field} takes true or false, not {text!r}")
        values.append(text)
    return values


def _driver_version(query: str, text: str, at: int) -> int:
    """``535.86.05`` -> ``535086005``, as the official CLI encodes driver versions."""
    parts = text.split(".")
    if len(parts) != 3 or not all(_VERSION_PART.fullmatch(part) for part in parts) or not text.strip("0."):
        _fail(query, at, f"not a driver version: {text!r} (write it like 535.86.05)")
    return int("".join(part.zfill(3) for part in parts))


def _scaled(query: str, text: str, at: int, field: str) -> float:
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not _NUMBER.fullmatch(text.strip()) or not math.isfinite(number):
        _fail(query, at, f"{field} takes a number of {_unit(field)}, not {text!r}")
    return number * FIELD_MULTIPLIERS[field]


def _check_kind(query: str, text: str, at: int, field: str) -> None:
    if text in ("null", "None"):
        return
    if field in NUMERIC_FIELDS and not _NUMBER.fullmatch(text):
        _fail(query, at, f"{field} takes a number, not {text!r}")
    if field in BOOL_FIELDS and text not in _BOOL_WORDS:
        _fail(query, at, f"{field} takes true or false, not {text!r}")
    if field == VERSION_FIELD and not (text.isascii() and text.isdigit()):
        _fail(query, at, f"not a driver version: {text!r} (write it like 535.86.05)")


def _close_matches(word: str, choices: list[str]) -> list[str]:
    import difflib  # only on an error: keeps the CLI's start-up light

    return difflib.get_close_matches(word, choices, n=3, cutoff=0.6)


def _unit(field: str) -> str:
    return "days" if field == "duration" else "GB"


def parse_order(order: str) -> list[list[str]]:
    """``"-dph,+num_gpus,flops_usd-,cuda_vers"`` -> ``[["dph_total","desc"], ["num_gpus","asc"], ...]``.

    A leading or trailing ``-`` means descending, ``+`` (or nothing) ascending; aliases are applied.
    Raises QueryError for an unknown column or a term marked both ``+`` and ``-``.
    """
    if not order.replace(",", "").strip():
        _fail(order, 0, "empty order: name a column, e.g. score- or dph+,num_gpus-")
    parsed: list[list[str]] = []
    for piece in order.split(","):  # the common case: known columns, one kind of sign
        name = piece.strip()
        bare = name.strip("+-")
        field = FIELD_ALIASES.get(bare, bare)
        if field not in ORDER_FIELDS or ("+" in name and "-" in name):
            break
        parsed.append([field, "desc" if name[0] == "-" or name[-1] == "-" else "asc"])
    else:
        return parsed
    parsed = []
    pos = 0
    for piece in order.split(","):
        at = pos + len(piece) - len(piece.lstrip())
        pos += len(piece) + 1
        name = piece.strip()
        if not name:
            continue
        bare = name.strip("+-")
        if "-" in name.replace(bare, "", 1) and "+" in name.replace(bare, "", 1):
            _fail(order, at, f"{name!r} is marked both ascending (+) and descending (-)")
        if not bare:
            _fail(order, at, "a sign without a column name")
        direction = "desc" if name.strip("-") != name else "asc"
        field = FIELD_ALIASES.get(bare, bare)
        if field not in ORDER_FIELDS:
            close = _close_matches(bare, sorted(ORDER_FIELDS | set(FIELD_ALIASES)))
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            _fail(order, at + name.find(bare), f"cannot order by unknown column {bare!r}{hint}")
        parsed.append([field, direction])
    return parsed


def build_search_body(
    query: str,
    *,
    order: str = "score-",
    type_: str = "on-demand",
    limit: int | None = None,
    storage_gib: float = 5.0,
    no_default: bool = False,
) -> dict[str, object]:
    """The JSON body of ``POST /api/v0/bundles/``, key for key as ``vastai search offers`` builds it."""
    base = {} if no_default else DEFAULT_FILTERS
    body = cast(dict[str, object], parse_query(query, base=base))  # a fresh dict: widened, not copied
    body["order"] = parse_order(order)
    offer_type = OFFER_TYPES.get(type_)
    if offer_type is None:
        raise QueryError(f"unknown offer type {type_!r}; use on-demand, bid or reserved", query=type_, column=1,
                         title="Bad offer type")
    body["type"] = offer_type
    if limit is not None and limit < 1:  # 0 must not mean "no limit": refused, so it cannot return everything
        raise QueryError(f"limit must be at least 1, not {limit}", query=str(limit), column=1, title="Bad limit")
    if limit is not None:
        body["limit"] = int(limit)
    if not math.isfinite(storage_gib) or storage_gib < 0:
        raise QueryError(f"storage must be a positive number of GiB, not {storage_gib}", query=str(storage_gib),
                         column=1, title="Bad storage")
    body["allocated_storage"] = float(storage_gib)
    return body
