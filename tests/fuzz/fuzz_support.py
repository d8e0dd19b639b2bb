"""Strategies and checks shared by the fuzz suites: JSON a hostile peer could send, and the one-line-error rule."""

from __future__ import annotations

import json
import math

from hypothesis import strategies as st

from vastui.errors import VastuiError

MAX_MESSAGE = 600   # an error says what and where; it never carries a whole hostile value

# Numbers that break naive code: huge integers (past 2**53, past float range), non-finite floats, -0.0, bools.
odd_numbers = st.one_of(
    st.integers(), st.integers(min_value=2**53, max_value=2**64), st.just(10**400), st.just(-(10**19)),
    st.floats(allow_nan=True, allow_infinity=True), st.just(-0.0), st.booleans(),
)
odd_text = st.one_of(st.text(max_size=30), st.just(""), st.just("\n\r\x00"), st.just("x" * 5000),
                     st.just("\u202e\ufeff"), st.just("1e999"))
json_scalars = st.one_of(st.none(), odd_numbers, odd_text)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)


def deep(depth: int) -> str:
    """A JSON text nested ``depth`` arrays deep (past the recursion limit when large)."""
    return "[" * depth + "]" * depth


def dumps(value: object) -> str:
    """JSON text as a sloppy server writes it: NaN and Infinity allowed, huge integers as digits."""
    return json.dumps(value, allow_nan=True)


def assert_one_line(exc: BaseException, *, kind: type[VastuiError] = VastuiError, where: str = "") -> str:
    """The error is a ``kind``, one line, of bounded length, and (when given) names ``where``."""
    assert isinstance(exc, kind), f"{type(exc).__name__} is not a {kind.__name__}: {exc!r}"[:400]
    message = str(exc)
    assert message.strip(), "an empty error message"
    assert "\n" not in message and "\r" not in message, message[:300]
    assert len(message) <= MAX_MESSAGE, f"{len(message)} characters: {message[:200]}..."
    assert "Traceback" not in message
    if where:
        assert where in message, (where, message)
    return message


def finite(value: float) -> bool:
    return math.isfinite(value)
