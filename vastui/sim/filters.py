"""Query semantics shared by offer search and the instance listing: ``{column: {op: value}}`` filters and ordering.

The official CLI sends numbers as strings (``{"num_gpus": {"eq": "1"}}``), the SDK sends real JSON numbers, lists
hold strings (``{"verified": {"in": ["true"]}}``) and ``null`` means "missing": every value is coerced to the
type of the row's column before comparing, the way the real server must.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

Row = Mapping[str, Any]
RowT = TypeVar("RowT", bound=Mapping[str, Any])
Getter = Callable[[Row], Any]

OPS = {"eq": "eq", "neq": "neq", "noteq": "neq", "ne": "neq", "gt": "gt", "gte": "gte", "lt": "lt", "lte": "lte",
       "in": "in", "notin": "notin", "nin": "notin"}
_TRUE = {"true", "1", "yes", "t"}
_FALSE = {"false", "0", "no", "f"}


class FilterError(ValueError):
    """A query the server refuses (HTTP 400): unknown column or operator, or a value that fits no column type."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


@dataclass(frozen=True, slots=True)
class Condition:
    """One ``column op value`` test; ``getter`` reads the (possibly virtual) column from a row."""

    column: str
    op: str
    value: Any
    getter: Getter

    def holds(self, row: Row) -> bool:
        return compare(self.getter(row), self.op, self.value, column=self.column)


def conditions_for(column: str, spec: Any, getter: Getter, *, scale: float = 1.0) -> list[Condition]:
    """Conditions of one query entry; a bare value (not an ``{op: value}`` dict) means ``eq``."""
    ops = spec if isinstance(spec, Mapping) else {"eq": spec}
    result = []
    for raw_op, value in ops.items():
        op = OPS.get(str(raw_op).lower())
        if op is None:
            raise FilterError(f"Unknown operator '{raw_op}' for column '{column}'.", column=column)
        if op in ("in", "notin") and not isinstance(value, list):
            value = [value]
        if scale != 1.0:
            value = _scaled(value, scale, column=column)
        result.append(Condition(column=column, op=op, value=value, getter=getter))
    return result


def _scaled(value: Any, scale: float, *, column: str) -> Any:
    if isinstance(value, list):
        return [_scaled(item, scale, column=column) for item in value]
    if value is None:
        return None
    return _as_number(value, column=column) * scale


def matches(row: Row, conditions: Sequence[Condition]) -> bool:
    return all(condition.holds(row) for condition in conditions)


def compare(actual: Any, op: str, expected: Any, *, column: str) -> bool:
    """``actual op expected`` with ``expected`` coerced to the type of ``actual``."""
    if op in ("in", "notin"):
        found = any(_equal(actual, item, column=column) for item in expected)
        return found if op == "in" else not found
    if op == "eq":
        return _equal(actual, expected, column=column)
    if op == "neq":
        return not _equal(actual, expected, column=column)
    if actual is None or expected is None:
        return False
    left, right = _comparable(actual, expected, column=column)
    if op == "gt":
        return bool(left > right)
    if op == "gte":
        return bool(left >= right)
    if op == "lt":
        return bool(left < right)
    return bool(left <= right)


def _equal(actual: Any, expected: Any, *, column: str) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    if isinstance(actual, (list, dict)):
        return bool(actual == expected)
    left, right = _comparable(actual, expected, column=column)
    if isinstance(left, float):
        return bool(abs(left - right) <= 1e-9 * max(1.0, abs(left)))
    return bool(left == right)


def _comparable(actual: Any, expected: Any, *, column: str) -> tuple[Any, Any]:
    if isinstance(actual, bool):
        return actual, _as_bool(expected, column=column)
    if isinstance(actual, (int, float)):
        return float(actual), _as_number(expected, column=column)
    if isinstance(expected, bool):
        return str(actual).lower(), str(expected).lower()
    return str(actual), str(expected)


def _as_bool(value: Any, *, column: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise FilterError(f"Invalid boolean value '{value}' for column '{column}'.", column=column)


def _as_number(value: Any, *, column: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise FilterError(f"Invalid numeric value '{value}' for column '{column}'.", column=column) from exc


# --- ordering ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OrderKey:
    column: str
    descending: bool
    getter: Getter


def parse_order(order: Any, *, resolve: Callable[[str], Getter]) -> list[OrderKey]:
    """Order specs as the CLI (``[["dph_total", "desc"]]``) or the v1 listing (``[{"col", "dir"}]``) sends them."""
    if order is None:
        return []
    if not isinstance(order, list):
        raise FilterError("order must be a list.", column="order")
    keys = []
    for item in order:
        if isinstance(item, Mapping):
            column, direction = item.get("col"), item.get("dir", "asc")
        elif isinstance(item, (list, tuple)) and item:
            column, direction = item[0], item[1] if len(item) > 1 else "asc"
        elif isinstance(item, str):
            column, direction = item, "asc"
        else:
            raise FilterError(f"Invalid order entry {item!r}.", column="order")
        if str(direction).lower() not in ("asc", "desc"):
            raise FilterError(f"Invalid order direction '{direction}'.", column=str(column))
        keys.append(OrderKey(column=str(column), descending=str(direction).lower() == "desc",
                             getter=resolve(str(column))))
    return keys


def compare_rows(a: Row, b: Row, keys: Sequence[OrderKey]) -> int:
    """-1/0/1 under ``keys``; missing values sort last in either direction."""
    for key in keys:
        left, right = key.getter(a), key.getter(b)
        if left == right:
            continue
        if left is None or right is None:
            return 1 if left is None else -1
        try:
            less = left < right
        except TypeError:
            less = str(left) < str(right)
        result = -1 if less else 1
        return -result if key.descending else result
    return 0


def sort_rows(rows: Sequence[RowT], keys: Sequence[OrderKey]) -> list[RowT]:
    if not keys:
        return list(rows)

    def cmp(a: RowT, b: RowT) -> int:
        return compare_rows(a, b, keys)

    return sorted(rows, key=functools.cmp_to_key(cmp))


# --- prepared rows: conditions and orderings specialised once per query ----------------------------------------

def column_kind(values: Sequence[Any]) -> type | None:
    """``bool``, ``float`` (ints too) or ``str`` when every non-null value is of that kind, else None."""
    kinds = {bool if isinstance(v, bool) else float if isinstance(v, (int, float)) else str if isinstance(v, str)
             else object for v in values if v is not None}
    if len(kinds) != 1 or object in kinds:
        return None
    return kinds.pop()


def fast_predicate(condition: Condition, kind: type | None) -> Callable[[Row], bool]:
    """The test of ``condition`` over rows whose column has one ``kind``: the expected value is coerced once here,
    not per row (same answers as ``Condition.holds``; a bad value is refused even when no row reaches it)."""
    get, op, value, column = condition.getter, condition.op, condition.value, condition.column
    if kind is None or op in ("in", "notin") or (kind is str and isinstance(value, bool)):
        return condition.holds
    if value is None:
        if op == "eq":
            return lambda row: get(row) is None
        if op == "neq":
            return lambda row: get(row) is not None
        return lambda row: False
    expected: Any
    if kind is float:
        expected = _as_number(value, column=column)
    elif kind is bool:
        expected = _as_bool(value, column=column)
    else:
        expected = str(value)
    if op == "eq" or op == "neq":
        want = op == "eq"
        if kind is float:
            return lambda row: ((a := get(row)) is not None
                                and (abs(a - expected) <= 1e-9 * max(1.0, abs(a)))) is want
        return lambda row: ((a := get(row)) is not None and a == expected) is want
    if kind is not float:
        return condition.holds
    if op == "gt":
        return lambda row: (a := get(row)) is not None and a > expected
    if op == "gte":
        return lambda row: (a := get(row)) is not None and a >= expected
    if op == "lt":
        return lambda row: (a := get(row)) is not None and a < expected
    return lambda row: (a := get(row)) is not None and a <= expected


def fast_sort(rows: Sequence[RowT], keys: Sequence[OrderKey]) -> list[RowT]:
    """``sort_rows`` by one stable native sort per key (last key first), nulls last in either direction; falls back
    to the comparator when a column mixes types that do not compare."""
    ordered = list(rows)
    try:
        for key in reversed(keys):
            get = key.getter
            present = [row for row in ordered if get(row) is not None]
            missing = [row for row in ordered if get(row) is None]
            present.sort(key=get, reverse=key.descending)
            ordered = present + missing
    except TypeError:
        return sort_rows(rows, keys)
    return ordered
