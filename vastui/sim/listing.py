"""``GET /api/v1/instances/``: select_filters, order_by, keyset pagination with after_token, select_cols.

The page token encodes the sort key of the last row sent, not an offset, so instances created or destroyed
between two page requests never shift a row out of the listing or into it twice.
"""

from __future__ import annotations

import base64
import binascii
import collections
import json
from collections.abc import Mapping, Sequence
from typing import Any

from vastui.sim.filters import (
    Condition,
    FilterError,
    Getter,
    OrderKey,
    compare_rows,
    conditions_for,
    matches,
    parse_order,
    sort_rows,
)
from vastui.sim.instance import INSTANCE_COLUMNS

MAX_PAGE = 25


def _getter(column: str) -> Getter:
    if column not in INSTANCE_COLUMNS:
        raise FilterError(f"Unknown column '{column}'.", column=column)
    return lambda row: row.get(column)


def _conditions(select_filters: Any) -> list[Condition]:
    if select_filters is None:
        return []
    if not isinstance(select_filters, Mapping):
        raise FilterError("select_filters must be a JSON object.", column="select_filters")
    result: list[Condition] = []
    for column, spec in select_filters.items():
        result.extend(conditions_for(str(column), spec, _getter(str(column))))
    return result


def _order(order_by: Any) -> list[OrderKey]:
    keys = parse_order(order_by if order_by is not None else [{"col": "id", "dir": "asc"}], resolve=_getter)
    if not any(key.column == "id" for key in keys):
        keys += parse_order([{"col": "id", "dir": "asc"}], resolve=_getter)
    return keys


def _limit(limit: Any) -> int:
    if limit is None:
        return MAX_PAGE
    try:
        value = int(limit)
    except (TypeError, ValueError) as exc:
        raise FilterError(f"Invalid limit '{limit}'.", column="limit") from exc
    return max(1, min(MAX_PAGE, value))


def encode_token(row: Mapping[str, Any], keys: Sequence[OrderKey]) -> str:
    raw = json.dumps([key.getter(row) for key in keys]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor(token: str, keys: Sequence[OrderKey]) -> dict[str, Any]:
    try:
        values = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError) as exc:
        raise FilterError("Invalid after_token.", column="after_token") from exc
    if not isinstance(values, list) or len(values) != len(keys):
        raise FilterError("after_token does not belong to this ordering.", column="after_token")
    return {key.column: value for key, value in zip(keys, values, strict=True)}


def _project(row: Mapping[str, Any], select_cols: Any) -> dict[str, Any]:
    if select_cols is None or select_cols == ["*"]:
        return dict(row)
    if not isinstance(select_cols, list):
        raise FilterError("select_cols must be a list.", column="select_cols")
    # Unknown columns come back as null: the CLI's verbose table asks for some the simulator does not model.
    return {str(c): row.get(str(c)) for c in select_cols}


def list_instances(rows: Sequence[Mapping[str, Any]], *, select_filters: Any, order_by: Any, limit: Any,
                   after_token: str | None, select_cols: Any) -> dict[str, Any]:
    """One page of the v1 listing envelope."""
    conditions = _conditions(select_filters)
    keys = _order(order_by)
    page_size = _limit(limit)
    hits = sort_rows([row for row in rows if matches(row, conditions)], keys)
    start = 0
    if after_token:
        cursor = _cursor(after_token, keys)
        start = next((i for i, row in enumerate(hits) if compare_rows(row, cursor, keys) > 0), len(hits))
    page = hits[start:start + page_size]
    more = start + page_size < len(hits)
    labels = collections.Counter(str(row["label"]) for row in rows if row.get("label") is not None)
    return {
        "instances": [_project(row, select_cols) for row in page],
        "next_token": encode_token(page[-1], keys) if more and page else None,
        "total_instances": len(hits),
        "label_counts": dict(labels),
    }
