"""Vast.ai's rate limits, as the simulator enforces them (``Realism.rate_limits``; docs/api-notes.md §1.4).

Vast.ai documents a *minimum interval* per endpoint and identity (OpenAPI ``x-rate-limit`` thresholds), sends no
``Retry-After``, and answers a request that comes too soon with HTTP 429 and a body that is either plain text
(``API requests too frequent`` or ``API requests too frequent: endpoint threshold=4.5``) or JSON
(``{"detail": "API requests too frequent endpoint threshold=4.5"}``, or the ``success``/``error``/``msg`` shape
that the destroy spec shows). Offer search is limited to 10 requests a minute per client IP instead.

Every request counts, the refused ones too: the interval runs from the previous request's arrival, so a client
that waits the threshold after each answer always gets through, and one that retries at once never does. The
clock is the market's; a request's arrival is read as it enters the API, after the key was checked (a bad key is
never rate limited). Which body a refusal gets is drawn from the simulator's seeded dice.
"""

from __future__ import annotations

import json
import random
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from vastui.sim.request_log import RequestRecord


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``calls`` requests in any ``per_s`` seconds (``calls == 1``: a minimum interval of ``per_s``)."""

    name: str
    method: str
    pattern: re.Pattern[str]
    calls: int
    per_s: float
    per_ip: bool = False     # counted per client IP alone (search), else per API key and IP

    @property
    def threshold_s(self) -> float | None:
        """The documented minimum interval, for interval limits (None for a count per period)."""
        return self.per_s if self.calls == 1 else None


# OpenAPI x-rate-limit of each endpoint the client uses (vast-ai/docs api-reference/openapi/yaml/*.yaml).
LIMITS: tuple[Limit, ...] = (
    Limit("create instance", "PUT", re.compile(r"^/api/v0/asks/\d+/$"), 1, 4.5),
    Limit("destroy instance", "DELETE", re.compile(r"^/api/v0/instances/\d+/$"), 1, 3.0),
    Limit("show instance", "GET", re.compile(r"^/api/v0/instances/\d+/$"), 1, 2.0),
    Limit("show instances", "GET", re.compile(r"^/api/v1/instances/$"), 1, 1.0),
    Limit("manage instance", "PUT", re.compile(r"^/api/v0/instances/\d+/$"), 1, 1.0),
    Limit("prepay instance", "PUT", re.compile(r"^/api/v0/instances/prepay/\d+/$"), 1, 2.0),
    Limit("transfer credit", "PUT", re.compile(r"^/api/v0/commands/transfer_credit/$"), 1, 2.5),
    Limit("create ssh key", "POST", re.compile(r"^/api/v0/ssh/$"), 1, 1.0),
    Limit("search offers", "POST", re.compile(r"^/api/v0/bundles/$"), 10, 60.0, per_ip=True),
    Limit("search offers", "PUT", re.compile(r"^/api/v0/search/asks/$"), 10, 60.0, per_ip=True),
)
TOO_FREQUENT = "API requests too frequent"


def limit_of(method: str, path: str) -> Limit | None:
    """The documented limit of ``method path`` (a routed path: ``/api/v0/...``), or None when none is documented."""
    for limit in LIMITS:
        if limit.method == method and limit.pattern.match(path):
            return limit
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """A 429 to send: its body and media type (never a ``Retry-After``)."""

    body: bytes
    media_type: str


@dataclass(slots=True)
class RateLimits:
    """The arrivals of each (endpoint, identity), and the refusals made. ``check`` is called once per request."""

    seed: int = 0
    refused: int = 0
    _arrivals: dict[tuple[str, str], deque[float]] = field(default_factory=dict)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"rate-limits:{self.seed}")

    def check(self, *, limit: Limit, key: str, client: str, now: float) -> Refusal | None:
        """Count this arrival; a refusal when it comes too soon after the earlier ones of its endpoint."""
        identity = client if limit.per_ip else f"{key}@{client}"
        arrivals = self._arrivals.setdefault((limit.name, identity), deque(maxlen=limit.calls))
        too_soon = len(arrivals) == limit.calls and now - arrivals[0] < limit.per_s
        arrivals.append(now)
        if not too_soon:
            return None
        self.refused += 1
        return self._refusal(limit)

    def _refusal(self, limit: Limit) -> Refusal:
        """One of the documented bodies, drawn: plain text with or without the threshold, or JSON."""
        threshold = limit.threshold_s
        said = TOO_FREQUENT if threshold is None else f"{TOO_FREQUENT} endpoint threshold={threshold:g}"
        shape = self._rng.randrange(4)
        if shape == 0:
            return Refusal(TOO_FREQUENT.encode(), "text/plain")
        if shape == 1:
            text = TOO_FREQUENT if threshold is None else f"{TOO_FREQUENT}: endpoint threshold={threshold:g}"
            return Refusal(text.encode(), "text/plain")
        if shape == 2:
            return Refusal(json.dumps({"detail": said}).encode(), "application/json")
        return Refusal(json.dumps({"success": False, "error": "rate_limit_exceeded", "msg": said}).encode(),
                       "application/json")


def interval_violations(records: Iterable[RequestRecord]) -> list[str]:
    """Each request (by the log) that came sooner than its endpoint's documented limit allows, in words.

    Arrivals are grouped by endpoint and client (the simulator accepts one API key); every request counts, the
    refused ones too, as the simulator counts them."""
    arrivals: dict[tuple[str, str], list[float]] = {}
    for record in records:
        limit = limit_of(record.method, record.path)
        if limit is None or record.arrived_at is None or record.status == 401:   # a bad key is never counted
            continue
        arrivals.setdefault((limit.name, record.client), []).append(record.arrived_at)
    found = []
    for (name, client), times in arrivals.items():
        limit = next(lim for lim in LIMITS if lim.name == name)
        times.sort()
        for i in range(limit.calls, len(times)):
            gap = times[i] - times[i - limit.calls]
            if gap < limit.per_s:
                found.append(f"{name} from {client or 'a client'}: {limit.calls + 1} requests within {gap:.3f} s "
                             f"(at most {limit.calls} per {limit.per_s:g} s)")
    return found
