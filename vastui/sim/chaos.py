"""Chaos knobs: rate limits, server errors, an exhausted search quota, offers taken by others, dropped replies.

All off by default. The knobs are plain mutable fields so a test or the demo can turn them on while the
simulator runs; the dice are seeded so a chaotic run can be replayed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


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

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def reseed(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._count = 0

    def next_is_rate_limited(self) -> bool:
        """Counts one API request; True when it is the n-th."""
        self._count += 1
        return self.rate_limit_every_n > 0 and self._count % self.rate_limit_every_n == 0

    def server_error(self) -> int | None:
        """A 5xx status to answer instead of the real reply, or None."""
        if self.error_5xx_rate > 0 and self._rng.random() < self.error_5xx_rate:
            return self._rng.choice(self.error_5xx_codes)
        return None

    def offer_stolen(self) -> bool:
        return self.offer_stolen_rate > 0 and self._rng.random() < self.offer_stolen_rate

    def drops_connection(self) -> bool:
        return self.drop_connection_rate > 0 and self._rng.random() < self.drop_connection_rate
