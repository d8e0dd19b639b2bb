"""When to retry a marketplace request and how long to wait first, as the official CLI does (docs/api-notes.md §1.1).

429, 502, 503 and 504 are retried because they mean "not now" (a rate limit, or a gateway that never reached
the backend); 500 and other 4xx are not, because sending the same request again would give the same answer.
``Retry-After`` is honoured when it is a number of seconds up to 60; a longer wait means the server wants us
gone for a while, so we give up instead of hanging. Otherwise the wait grows 0.15 s x 1.5^n, capped.

Vast.ai's own 429s carry no ``Retry-After`` (docs/api-notes.md §1.4): the wire then waits the threshold the body
names or the endpoint's documented interval (``pacing.py``), and a 429 is retried up to ``max_rate_limited`` times
apart from ``max_attempts`` — a 429 means the server did nothing, and a client that paces itself is refused only
when another one shares its key, so it should wait its turn rather than give up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts in all (not retries), and the backoff curve between them."""

    max_attempts: int = 4
    base_s: float = 0.15
    factor: float = 1.5
    cap_s: float = 10.0
    max_retry_after_s: float = MAX_RETRY_AFTER_S
    max_rate_limited: int = 10        # plain 429s one request may meet before it gives up
    rate_limit_base_s: float = 1.0    # the first wait after a 429 that says nothing, on an endpoint of no known limit

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts counts every attempt and must be at least 1")
        if self.max_rate_limited < 1:
            raise ValueError("max_rate_limited counts 429s and must be at least 1")

    def backoff_s(self, retry_index: int) -> float:
        """The wait before retry number ``retry_index`` (0 for the first retry): 0.15, 0.225, 0.3375, ..."""
        return min(self.cap_s, self.base_s * self.factor ** retry_index)

    def has_attempts_left(self, attempts_made: int) -> bool:
        return attempts_made < self.max_attempts

    def rate_limit_backoff_s(self, retry_index: int) -> float:
        """The wait after a 429 with no ``Retry-After`` and no threshold, where no limit is documented: 1, 1.5, ..."""
        return min(self.cap_s, self.rate_limit_base_s * self.factor ** retry_index)

    def has_rate_limit_tries_left(self, times_limited: int) -> bool:
        return times_limited < self.max_rate_limited


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds, or None when absent or not a number (an HTTP date counts as not a number)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES
