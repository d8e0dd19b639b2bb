"""How hard the simulated marketplace is: ``Realism.vast()`` models what the real Vast.ai does (each rule is cited
in docs/api-notes.md), ``Realism.kind()`` is the older, kinder marketplace kept for the fastest unit tests.

The simulator must never be kinder than Vast.ai where it matters: a behaviour found on the real service goes here,
with its source, and the client is made to survive it. Each group of fields belongs to one part of the simulator
(the API's middleware, the instance lifecycle, the SSH hosts, the rows and logs); a field's default is the kind
behaviour, ``vast()`` switches every group on. Frequencies are drawn from the simulator's own seeded dice.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields, replace


class RealismLevel(enum.StrEnum):
    VAST = "vast"
    KIND = "kind"


@dataclass(frozen=True, slots=True)
class Realism:
    level: RealismLevel = RealismLevel.KIND

    # --- rate limits and errors (the API's middleware) ---------------------------------------------------------
    rate_limits: bool = False                 # per-endpoint minimum intervals, 429 without Retry-After

    # --- keys and the instance lifecycle -----------------------------------------------------------------------
    auth_error_404: bool = False              # a bad or revoked key is answered 404 {"error": "auth_error"}
    cancel_unavail: bool = False              # seeded scheduling failures: an error, or a stopped instance if false
    lifecycle_turns: bool = False             # scheduling phase, transient unknown, null first show, OCI failures
    destroy_404_documented: bool = False      # destroying a missing instance: 404 {"error": "not_found"}

    # --- SSH hosts ---------------------------------------------------------------------------------------------
    ssh_proxy: bool = False                   # instances reached through a proxy endpoint; direct only when asked
    ssh_keys_late: bool = False               # the account's keys reach a host late; authorized_keys is rewritten
    sshd_late: bool = False                   # sshd accepts a little after the row says running

    # --- rows and logs -----------------------------------------------------------------------------------------
    container_logs: bool = False              # logs are the container's own output, or the daemon's with stamps
    padded_strings: bool = False              # string fields of listing rows carry stray whitespace

    @classmethod
    def kind(cls) -> Realism:
        """The kinder simulator: every rule off (only for the fastest unit tests, named as such)."""
        return cls()

    @classmethod
    def vast(cls) -> Realism:
        """Every rule on: the simulator as hard as the real marketplace is known to be."""
        switched = {f.name: True for f in fields(cls) if f.type in ("bool", bool)}
        return replace(cls(), level=RealismLevel.VAST, **switched)

    @classmethod
    def named(cls, level: str) -> Realism:
        """``vast`` or ``kind`` (the ``--realism`` option)."""
        return cls.vast() if RealismLevel(level) is RealismLevel.VAST else cls.kind()
