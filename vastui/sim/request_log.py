"""The simulator's own record of the HTTP requests it answered (never headers, so never the API key), bounded."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import overload


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One answered request. ``target_ids`` names the instances or offers a mutating request acted on."""

    method: str
    path: str            # as routed: duplicate slashes collapsed, no query string
    query: str           # the raw query string
    status: int
    at: float            # market clock, when the answer was sent
    target_ids: tuple[int, ...] = ()
    arrived_at: float | None = None   # market clock, when the request entered the API (rate limits count it)
    client: str = ""     # the client's IP address (an identity of Vast.ai's rate limits; never the key)

    @property
    def target_id(self) -> int | None:
        """The single target of a one-item request, else None."""
        return self.target_ids[0] if len(self.target_ids) == 1 else None

    @property
    def is_mutating(self) -> bool:
        return self.method in ("POST", "PUT", "DELETE", "PATCH")


DEFAULT_CAPACITY = 10_000


class RequestLog:
    """The most recent ``capacity`` records, oldest first, and a count of the older ones dropped.

    Bounded so a simulator serving for hours keeps flat memory; 10,000 records hold every request of a whole demo
    campaign, so tests that read the log see all of it (and can check ``dropped == 0`` to be sure).
    """

    __slots__ = ("_records", "_total")

    def __init__(self, *, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("a request log holds at least one record")
        self._records: deque[RequestRecord] = deque(maxlen=capacity)
        self._total = 0

    def append(self, record: RequestRecord) -> None:
        self._records.append(record)
        self._total += 1

    @property
    def total(self) -> int:
        """Records ever appended (kept or dropped): a mark for ``since``."""
        return self._total

    @property
    def dropped(self) -> int:
        """Records pushed out by newer ones."""
        return self._total - len(self._records)

    def since(self, mark: int) -> list[RequestRecord]:
        """The kept records appended after ``total`` read ``mark``."""
        newer = self._total - mark
        if newer <= 0:
            return []
        return list(self._records)[-newer:]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self._records)

    @overload
    def __getitem__(self, index: int) -> RequestRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[RequestRecord]: ...
    def __getitem__(self, index: int | slice) -> RequestRecord | list[RequestRecord]:
        if isinstance(index, slice):
            return list(self._records)[index]
        return self._records[index]

    def __repr__(self) -> str:
        return f"RequestLog(dropped={self.dropped}, records={list(self._records)!r})"
