"""Chaos knobs: 429 storms, 5xx bursts, an API outage, slow and dropped replies, redirects, a search quota that runs
out, offers taken by others, and instances that get stuck in ``loading``, go ``offline``, exit, lose SSH or compute
wrong outputs.

All off by default. The knobs are plain mutable fields so a test or the demo can turn them on while the
simulator runs; the dice are seeded so a chaotic run can be replayed. ``PROFILES`` name a few mixes for
``vastui sim --chaos PROFILE``, and ``injected`` counts each fault by kind as it is injected.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from dataclasses import dataclass, field, fields

# Named mixes for `vastui sim --chaos PROFILE`: each sets some knobs, the rest stay off.
PROFILES: dict[str, dict[str, float | int | bool]] = {
    "flaky": {"rate_limit_every_n": 10, "retry_after_s": 0.5, "error_5xx_rate": 0.05, "offer_stolen_rate": 0.05,
              "drop_connection_rate": 0.01},
    "storm": {"rate_limit_every_n": 3, "retry_after_s": 1.0, "error_5xx_rate": 0.2, "offer_stolen_rate": 0.2,
              "drop_connection_rate": 0.05},
    "quota": {"search_quota_exhausted": True},
}


class InstanceFault(enum.StrEnum):
    """What chaos may do to one rented instance (drawn once, at the create)."""

    STUCK_LOADING = "stuck_loading"    # never leaves ``loading``
    GOES_OFFLINE = "goes_offline"      # the host goes ``offline`` some time after it started running
    EXITS = "exited"                   # the container exits (``exited``) some time after it started running
    SSH_CUT = "ssh_cut"                # every SSH connection to it is cut, once, some time into the run
    WRONG_OUTPUT = "wrong_output"      # runs fine, but the workload's outputs are wrong


@dataclass(frozen=True, slots=True)
class DrawnFault:
    """An instance's chaos fault and, for those that strike later, when (seconds after it started running)."""

    fault: InstanceFault
    after_running_s: float | None


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
    drop_mutation_rate: float = 0.0        # the same, for creates and destroys only (the replies that matter most)
    latency_s: float = 0.0                 # wall-clock delay added to every API request
    rate_limit_storm_len: int = 1          # once a 429 comes, this many requests in a row answer 429 (a storm)
    error_5xx_burst_len: int = 1           # once a 5xx comes, this many requests in a row answer 5xx (a burst)
    slow_reply_rate: float = 0.0           # share of API requests answered only after ``slow_reply_s`` (wall)
    slow_reply_s: float = 35.0             # longer than the client's timeout: the answer is lost, the work is not
    redirect_rate: float = 0.0             # share of API requests answered 307 to the same URL (to be followed)
    search_quota_n: int = 0                # searches answered before the quota runs out (0: it never does)
    stuck_loading_rate: float = 0.0        # share of rented instances stuck in ``loading``
    offline_rate: float = 0.0              # share of rented instances whose host goes ``offline`` mid-run
    exit_rate: float = 0.0                 # share of rented instances whose container exits mid-run
    ssh_cut_rate: float = 0.0              # share of rented instances whose SSH connections are cut mid-run
    wrong_output_rate: float = 0.0         # share of rented instances that compute wrong outputs
    fault_after_s: tuple[float, float] = (30.0, 900.0)  # when a mid-run fault strikes, after running began
    outage_after_n: int = 0                # an API outage begins at this request (0: never)...
    outage_s: float = 0.0                  # ...and lasts this many wall seconds: every request answers 503
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)
    _count: int = field(init=False, default=0, repr=False)
    _storm_left: int = field(init=False, default=0, repr=False)
    _burst_left: int = field(init=False, default=0, repr=False)
    _burst_code: int = field(init=False, default=502, repr=False)
    _searches: int = field(init=False, default=0, repr=False)
    _outage_until: float | None = field(init=False, default=None, repr=False)
    instance_faults: dict[int, DrawnFault] = field(init=False, default_factory=dict, repr=False)
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
        if self.drop_mutation_rate:
            parts.append(f"{self.drop_mutation_rate:.0%} of creates and destroys applied, then the reply lost")
        if self.search_quota_exhausted:
            parts.append("the search quota exhausted")
        if self.latency_s:
            parts.append(f"{self.latency_s:g} s added to each request")
        if self.slow_reply_rate:
            parts.append(f"{self.slow_reply_rate:.0%} answered after {self.slow_reply_s:g} s")
        if self.redirect_rate:
            parts.append(f"{self.redirect_rate:.0%} redirected")
        if self.search_quota_n:
            parts.append(f"the search quota runs out after {self.search_quota_n} searches")
        if self.outage_after_n and self.outage_s:
            parts.append(f"the API down for {self.outage_s:g} s from request {self.outage_after_n}")
        for name, rate in (("stuck in loading", self.stuck_loading_rate), ("go offline", self.offline_rate),
                           ("exit", self.exit_rate), ("lose SSH", self.ssh_cut_rate),
                           ("compute wrong outputs", self.wrong_output_rate)):
            if rate:
                parts.append(f"{rate:.0%} of instances {name}")
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
        self._count = self._storm_left = self._burst_left = self._searches = 0
        self._outage_until = None

    def calm(self) -> None:
        """Turn every knob off (faults already drawn for instances stay drawn; ``injected`` keeps its counts)."""
        calm = Chaos(seed=self.seed)
        for knob in fields(self):
            if knob.init:
                setattr(self, knob.name, getattr(calm, knob.name))
        self._storm_left = self._burst_left = 0
        self._outage_until = None

    def next_is_rate_limited(self) -> bool:
        """Counts one API request; True when it is the n-th, or one of the storm that follows it."""
        self._count += 1
        if self._storm_left > 0:
            self._storm_left -= 1
            self.count("rate_limited")
            return True
        if self.rate_limit_every_n > 0 and self._count % self.rate_limit_every_n == 0:
            self._storm_left = max(0, self.rate_limit_storm_len - 1)
            self.count("rate_limited")
            return True
        return False

    def server_error(self) -> int | None:
        """A 5xx status to answer instead of the real reply, or None (a burst answers the same code in a row)."""
        if self._burst_left > 0:
            self._burst_left -= 1
            self.count("server_error")
            return self._burst_code
        if self.error_5xx_rate > 0 and self._rng.random() < self.error_5xx_rate:
            self.count("server_error")
            self._burst_code = self._rng.choice(self.error_5xx_codes)
            self._burst_left = max(0, self.error_5xx_burst_len - 1)
            return self._burst_code
        return None

    def in_outage(self, *, wall_now: float) -> bool:
        """Whether the API is down for this request (the ``outage_after_n``-th request starts the outage, which
        lasts ``outage_s`` wall seconds; counted once, as ``outage``). Call after ``next_is_rate_limited``."""
        if self._outage_until is None and 0 < self.outage_after_n <= self._count and self.outage_s > 0:
            self._outage_until = wall_now + self.outage_s
            self.count("outage")
        return self._outage_until is not None and wall_now < self._outage_until

    def search_quota_left(self) -> bool:
        """Counts one search; False once the quota is gone (exhausted from the start, or after ``search_quota_n``)."""
        self._searches += 1
        exhausted = self.search_quota_exhausted or (0 < self.search_quota_n < self._searches)
        if exhausted:
            self.count("search_quota")
        return not exhausted

    def slow_reply(self) -> str | None:
        """None, or where a slow answer is held: ``"before"`` the work is done (it lands after the client gave up)
        or ``"after"`` it (the work is done, the answer comes too late)."""
        if self.slow_reply_rate > 0 and self._rng.random() < self.slow_reply_rate:
            self.count("slow_reply")
            return self._rng.choice(("before", "after"))
        return None

    def redirects(self) -> bool:
        redirected = self.redirect_rate > 0 and self._rng.random() < self.redirect_rate
        if redirected:
            self.count("redirect")
        return redirected

    def draw_instance_fault(self, instance_id: int) -> DrawnFault | None:
        """At a create: the fault this instance will suffer, if any (remembered in ``instance_faults``).

        Faults that show at once (stuck in loading, wrong outputs) are counted now; the ones that strike
        mid-run are counted by ``strike`` when they happen (an instance destroyed first never suffers them)."""
        roll = self._rng.random()
        for fault, rate in ((InstanceFault.STUCK_LOADING, self.stuck_loading_rate),
                            (InstanceFault.GOES_OFFLINE, self.offline_rate), (InstanceFault.EXITS, self.exit_rate),
                            (InstanceFault.SSH_CUT, self.ssh_cut_rate),
                            (InstanceFault.WRONG_OUTPUT, self.wrong_output_rate)):
            if roll < rate:
                later = fault in (InstanceFault.GOES_OFFLINE, InstanceFault.EXITS, InstanceFault.SSH_CUT)
                drawn = DrawnFault(fault, round(self._rng.uniform(*self.fault_after_s), 1) if later else None)
                self.instance_faults[instance_id] = drawn
                if not later:
                    self.count(fault.value)
                return drawn
            roll -= rate
        return None

    def strike(self, instance_id: int) -> None:
        """A mid-run fault of this instance happens now."""
        self.count(self.instance_faults[instance_id].fault.value)

    def offer_stolen(self) -> bool:
        stolen = self.offer_stolen_rate > 0 and self._rng.random() < self.offer_stolen_rate
        if stolen:
            self.count("offer_stolen")
        return stolen

    def drops_connection(self, *, mutation: str | None = None) -> bool:
        """Whether this request's reply is lost after its work is done; ``mutation`` names a create or destroy
        (counted as ``create_dropped`` / ``destroy_dropped`` when ``drop_mutation_rate`` drops it)."""
        if mutation is not None and self.drop_mutation_rate > 0 and self._rng.random() < self.drop_mutation_rate:
            self.count(f"{mutation}_dropped")
            return True
        dropped = self.drop_connection_rate > 0 and self._rng.random() < self.drop_connection_rate
        if dropped:
            self.count("connection_dropped")
        return dropped
