"""Pacing: the client keeps to Vast.ai's per-endpoint rate limits *before* sending (docs/api-notes.md §1.4).

Vast.ai enforces a minimum interval per endpoint and identity (create 4.5 s, destroy 3.0 s, ...; offer search 10
a minute) and answers a request that comes too soon with 429 and no ``Retry-After``. One ``Pacer`` belongs to one
``Wire`` (one API key) and is shared by every caller of it, so parallel creates queue instead of colliding.

Each endpoint has a lane: one request of it in flight at a time, and the next one sent no sooner than its limit
allows *after the previous answer came back*. An answer comes back after its request arrived, so counting from the
answer keeps the arrivals apart by at least the interval whatever the network's delays (on a simulator's x300
clock a millisecond of jitter is a third of a simulated second). A threshold that a 429 names (``threshold=4.5``)
and that is longer than the documented one is learnt for the lane. All waits are on the injected clock; a
``MarketClock`` is read without its offset (``local_now``), which jumps when the marketplace's answers first show
its time and would otherwise make a wait look already served.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from vastui.clock import Clock, MarketClock

SAFETY = 1.02          # waits are a little longer than the documented ones: clocks may differ in rate


@dataclass(frozen=True, slots=True)
class PaceRule:
    """At most ``calls`` requests to one endpoint in any ``per_s`` seconds (``calls == 1``: an interval)."""

    name: str
    method: str
    pattern: re.Pattern[str]
    calls: int
    per_s: float

    @property
    def interval_s(self) -> float:
        """The wait to fall back on after a 429 that names no threshold: one request's share of the period."""
        return self.per_s / self.calls


# vast-ai/docs OpenAPI x-rate-limit thresholds (api-reference/openapi/yaml/*.yaml), on full /api/vN paths.
VAST_RULES: tuple[PaceRule, ...] = (
    PaceRule("create instance", "PUT", re.compile(r"^/api/v0/asks/\d+/$"), 1, 4.5),
    PaceRule("destroy instance", "DELETE", re.compile(r"^/api/v0/instances/\d+/$"), 1, 3.0),
    PaceRule("show instance", "GET", re.compile(r"^/api/v0/instances/\d+/$"), 1, 2.0),
    PaceRule("show instances", "GET", re.compile(r"^/api/v1/instances/$"), 1, 1.0),
    PaceRule("manage instance", "PUT", re.compile(r"^/api/v0/instances/\d+/$"), 1, 1.0),
    PaceRule("prepay instance", "PUT", re.compile(r"^/api/v0/instances/prepay/\d+/$"), 1, 2.0),
    PaceRule("transfer credit", "PUT", re.compile(r"^/api/v0/commands/transfer_credit/$"), 1, 2.5),
    PaceRule("create ssh key", "POST", re.compile(r"^/api/v0/ssh/$"), 1, 1.0),
    PaceRule("search offers", "POST", re.compile(r"^/api/v0/bundles/$"), 10, 60.0),
    PaceRule("search offers", "PUT", re.compile(r"^/api/v0/search/asks/$"), 10, 60.0),
)
_THRESHOLD = re.compile(r"threshold\s*=\s*([0-9]+(?:\.[0-9]+)?)")


def threshold_in(text: str) -> float | None:
    """The ``threshold=4.5`` a Vast.ai 429 body names (plain text or JSON alike), in seconds; None when absent."""
    found = _THRESHOLD.search(text[:2000])
    return float(found.group(1)) if found else None


@dataclass(slots=True)
class _Lane:
    rule: PaceRule
    per_s: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    answered: deque[float] = field(default_factory=deque)

    def ready_at(self) -> float:
        """When the next request may go: ``per_s`` after the answer of the ``calls``-th latest one."""
        if len(self.answered) < self.rule.calls:
            return -float("inf")
        return self.answered[0] + self.per_s * SAFETY


class Pacer:
    """The lanes of one API key's endpoints. ``turn`` is held around each attempt of a request."""

    def __init__(self, *, clock: Clock, rules: tuple[PaceRule, ...] = VAST_RULES) -> None:
        self._clock = clock
        self._rules = rules
        self._lanes: dict[str, _Lane] = {}
        self.waited_s = 0.0          # clock seconds spent waiting for a turn, all lanes together

    def rule_for(self, method: str, path: str) -> PaceRule | None:
        """The rule of ``method path`` (the full ``/api/vN/...`` path), or None when no limit is documented."""
        for rule in self._rules:
            if rule.method == method and rule.pattern.match(path):
                return rule
        return None

    def interval_s(self, rule: PaceRule) -> float:
        """The lane's wait after a 429 that names no threshold (a learnt threshold included)."""
        lane = self._lane(rule)
        return lane.per_s / rule.calls

    def learn(self, rule: PaceRule, threshold_s: float) -> None:
        """A 429 named a longer interval than the documented one: keep to it from now on (intervals only)."""
        lane = self._lane(rule)
        if rule.calls == 1 and threshold_s > lane.per_s:
            lane.per_s = threshold_s

    @asynccontextmanager
    async def turn(self, method: str, path: str) -> AsyncIterator[None]:
        """Wait for this endpoint's turn, then hold it while the request is out; the answer's moment is noted."""
        rule = self.rule_for(method, path)
        if rule is None:
            yield
            return
        lane = self._lane(rule)
        async with lane.lock:
            wait = lane.ready_at() - self._now()
            if wait > 0:
                self.waited_s += wait
                await self._clock.sleep(wait)
            try:
                yield
            finally:
                lane.answered.append(self._now())
                while len(lane.answered) > rule.calls:
                    lane.answered.popleft()

    def _now(self) -> float:
        """The clock's steady reading: a ``MarketClock`` without the offset that its answers move."""
        return self._clock.local_now() if isinstance(self._clock, MarketClock) else self._clock.now()

    def _lane(self, rule: PaceRule) -> _Lane:
        lane = self._lanes.get(rule.name)
        if lane is None:
            lane = self._lanes[rule.name] = _Lane(rule=rule, per_s=rule.per_s)
        return lane
