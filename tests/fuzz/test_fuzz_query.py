"""Fuzzing the search query parser and the search body: any text a user types (or pastes) is a search body the
marketplace can read, or one ``QueryError`` whose reason is one line and whose column points into the query."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from vastui.errors import QueryError, VastuiError
from vastui.vast.query import build_search_body, parse_order
from vastui.vast.query_fields import KNOWN_FIELDS

FIELDS = sorted(KNOWN_FIELDS | {"gpu_ram", "dph", "cuda_vers", "geolocation", "verified", "rentable"})
PIECES = [*FIELDS, "=", "==", "!=", "<", "<=", ">", ">=", "in", "notin", "nin", "not", "eq", "gte", "lt", " ", "  ",
          "[", "]", ",", '"', "'", "RTX_4090", "true", "false", "any", "*", "?", "null", "None", "1", "0", "-1",
          "1e999", "nan", "inf", "-inf", "1e-400", "9" * 400, "12.1.3", "0x10", "1_000", "\t", "\n", "\u00e9",
          "\u0130", "\u2028", "\x00", "_", "."]

query_like = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
any_text = st.text(max_size=80)


def _check_query(query: str) -> None:
    try:
        body = build_search_body(query)
    except QueryError as exc:
        assert "\n" not in exc.reason and exc.reason.strip(), exc.reason
        assert 1 <= exc.column <= len(query) + 1, (exc.column, query)
        assert exc.query == query
        return
    # what is sent must be JSON the marketplace can read: no NaN, no Infinity, nothing json cannot write
    text = json.dumps(body, allow_nan=False)
    assert json.loads(text) == body


@given(query_like)
def test_any_query_like_text_is_a_body_or_a_query_error_with_its_column(query: str) -> None:
    _check_query(query)


@given(any_text)
def test_any_text_is_a_body_or_a_query_error_with_its_column(query: str) -> None:
    _check_query(query)


@given(st.lists(st.sampled_from([*FIELDS, "score", "+", "-", ",", " ", "dlperf_usd", "x", "", "--", "é"]),
                max_size=8).map("".join))
def test_any_order_is_parsed_or_a_query_error(order: str) -> None:
    try:
        parsed = parse_order(order)
    except QueryError as exc:
        assert "\n" not in exc.reason and 1 <= exc.column <= len(order) + 1
        return
    assert parsed and all(direction in ("asc", "desc") for _, direction in parsed)


@given(limit=st.one_of(st.none(), st.integers(min_value=-(2**70), max_value=2**70)),
       storage=st.floats(allow_nan=True, allow_infinity=True), type_=st.text(max_size=12))
def test_any_limit_storage_and_type_is_a_body_or_one_error(limit: int | None, storage: float, type_: str) -> None:
    try:
        body = build_search_body("", limit=limit, storage_gib=storage, type_=type_)
    except VastuiError as exc:
        assert isinstance(exc, QueryError) and "\n" not in exc.reason
        return
    assert math.isfinite(float(body["allocated_storage"]))  # type: ignore[arg-type]
    json.dumps(body, allow_nan=False)
