"""The simulator's own record of every HTTP request it answered (never headers, so never the API key)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One answered request. ``target_ids`` names the instances or offers a mutating request acted on."""

    method: str
    path: str            # as routed: duplicate slashes collapsed, no query string
    query: str           # the raw query string
    status: int
    at: float            # market clock, when the answer was sent
    target_ids: tuple[int, ...] = ()

    @property
    def target_id(self) -> int | None:
        """The single target of a one-item request, else None."""
        return self.target_ids[0] if len(self.target_ids) == 1 else None

    @property
    def is_mutating(self) -> bool:
        return self.method in ("POST", "PUT", "DELETE", "PATCH")
