"""How fresh each data source is: the last good refresh, the last error, and whether the data is stale.

The status bar renders this; the feeds update it. Ages are on the services' clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Source(enum.StrEnum):
    OFFERS = "offers"
    INSTANCES = "instances"
    ACCOUNT = "account"
    LEAKS = "leaks"


@dataclass(frozen=True, slots=True)
class SourceHealth:
    """One source. ``last_ok_at`` None: never refreshed successfully yet."""

    source: Source
    stale_after_s: float
    last_ok_at: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    failures_in_row: int = 0

    def ok(self, at: float) -> SourceHealth:
        return replace(self, last_ok_at=at, failures_in_row=0)

    def failed(self, at: float, error: str) -> SourceHealth:
        return replace(self, last_error=error, last_error_at=at, failures_in_row=self.failures_in_row + 1)

    def age_s(self, now: float) -> float | None:
        return None if self.last_ok_at is None else max(0.0, now - self.last_ok_at)

    def is_stale(self, now: float) -> bool:
        """Stale: never refreshed, failing since its last success, or too old."""
        age = self.age_s(now)
        return age is None or self.failures_in_row > 0 or age > self.stale_after_s

    @property
    def is_failing(self) -> bool:
        return self.failures_in_row > 0


def format_age(seconds: float | None) -> str:
    """``12s``, ``4m``, ``3h``, ``2d``; ``never`` for None."""
    if seconds is None:
        return "never"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"
