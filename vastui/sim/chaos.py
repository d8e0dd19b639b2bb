"""Chaos knobs: rate limits, server errors, an exhausted search quota, offers taken by others, dropped replies.

All off by default. The knobs are plain mutable fields so a test or the demo can turn them on while the
simulator runs; the dice are seeded so a chaotic run can be replayed. ``PROFILES`` name a few mixes for
``vastui sim --chaos PROFILE``, and ``injected`` counts each fault by kind as it is injected.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

# Named mixes for `vastui sim --chaos PROFILE`: each sets some knobs, the rest stay off.
PROFILES: dict[str, dict[str, float | int | bool]] = {
    "flaky": {"rate_limit_every_n": 10, "retry_after_s": 0.5, "error_5xx_rate": 0.05, "offer_stolen_rate": 0.05,
              "drop_connection_rate": 0.01},
    "storm": {"rate_limit_every_n": 3, "retry_after_s": 1.0, "error_5xx_rate": 0.2, "offer_stolen_rate": 0.2,
              "drop_connection_rate": 0.05},
    "quota": {"search_quota_exhausted": True},
}


@dataclass(slots=True)
class Chaos:
    """What goes wrong, how often. Rates are probabilities per request (0 = never)."""

    rate_limit_every_n: int = 0            # every n-th API request answers 429 with Retry-After
    retry_after_s: float = 0.5             # the Retry-After of those 429s
    error_5xx_rate: float = 0.0            # share of API requests answered 502/503/504 (nothing applied)
    error_5xx_codes: tuple[int, ...] = (502, 503, 504)
    search_quota_exhausted: bool = False   # searches answer 429 search_quota_exceeded with X-RateLimit-Reset
    quota_reset_in_s: float = 3600.0
    offer_stolen_rate: float = 0.0         # share of rent attempts that find the offer just taken by someone else
    drop_connection_rate: float = 0.0      # share of API requests applied, then the connection drops mid-reply
    latency_s: float = 0.0                 # wall-clock delay added to every API request
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)
    _count: int = field(init=False, default=0, repr=False)
    injected: Counter[str] = field(init=False, default_factory=Counter, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @classmethod
    def from_profile(cls, name: str, *, seed: int) -> Chaos:
        """The knobs of ``PROFILES[name]`` with dice seeded by ``seed`` (KeyError for an unknown name)."""
        return cls(seed=seed, **PROFILES[name])  # type: ignore[arg-type]

    def describe(self) -> str:
        """What this chaos injects, in a line."""
        parts = []
        if self.rate_limit_every_n:
            parts.append(f"429 on 1 request in {self.rate_limit_every_n} (Retry-After {self.retry_after_s:g} s)")
        if self.error_5xx_rate:
            parts.append(f"{self.error_5xx_rate:.0%} answered 5xx")
        if self.offer_stolen_rate:
            parts.append(f"{self.offer_stolen_rate:.0%} of rents find the offer taken")
        if self.drop_connection_rate:
            parts.append(f"{self.drop_connection_rate:.0%} applied, then the connection dropped")
        if self.search_quota_exhausted:
            parts.append("the search quota exhausted")
        if self.latency_s:
            parts.append(f"{self.latency_s:g} s added to each request")
        return "; ".join(parts) or "nothing"

    def count(self, kind: str) -> None:
        """Record one injected fault of ``kind``."""
        self.injected[kind] += 1

    def summary(self) -> str:
        """The faults injected so far by kind, e.g. ``rate_limited 4, server_error 2``."""
        return ", ".join(f"{kind} {n}" for kind, n in sorted(self.injected.items())) or "none"

    def reseed(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._count = 0

    def next_is_rate_limited(self) -> bool:
        """Counts one API request; True when it is the n-th."""
        self._count += 1
        if self.rate_limit_every_n > 0 and self._count % self.rate_limit_every_n == 0:
            self.count("rate_limited")
            return True
        return False

    def server_error(self) -> int | None:
        """A 5xx status to answer instead of the real reply, or None."""
        if self.error_5xx_rate > 0 and self._rng.random() < self.error_5xx_rate:
            self.count("server_error")
            return self._rng.choice(self.error_5xx_codes)
        return None

    def offer_stolen(self) -> bool:
        stolen = self.offer_stolen_rate > 0 and self._rng.random() < self.offer_stolen_rate
        if stolen:
            self.count("offer_stolen")
        return stolen

    def drops_connection(self) -> bool:
        dropped = self.drop_connection_rate > 0 and self._rng.random() < self.drop_connection_rate
        if dropped:
            self.count("connection_dropped")
        return dropped
