"""Rows a listing could not read: what one odd row leaves behind, so that it never hides the rest of a listing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["UnreadableRow", "row_id"]


def row_id(row: object) -> int | None:
    """The ``id`` of a row that may be garbage otherwise: an integer (or a string of digits), else None."""
    ident = row.get("id") if isinstance(row, Mapping) else None
    if isinstance(ident, bool):
        return None
    if isinstance(ident, int):
        return ident
    if isinstance(ident, float) and ident.is_integer() and abs(ident) < 2**53:
        return int(ident)
    if isinstance(ident, str) and ident.isascii() and ident.isdigit() and len(ident) <= 18:
        return int(ident)
    return None


@dataclass(frozen=True, slots=True)
class UnreadableRow:
    """A row of a listing that could not be parsed: reported (by its id where readable) and skipped, so one odd
    row never hides the rest. ``label`` is kept when it is a string (a lost create is recognised by it)."""

    where: str                                # e.g. "row 3 of page 1"
    reason: str                               # what is wrong with it (one line)
    id: int | None
    label: str | None = None

    @classmethod
    def of(cls, row: object, *, where: str, reason: str) -> UnreadableRow:
        label = row.get("label") if isinstance(row, Mapping) else None
        return cls(where=where, reason=reason, id=row_id(row), label=label if isinstance(label, str) else None)

    def describe(self, kind: str = "instance") -> str:
        name = f"{kind} {self.id}" if self.id is not None else self.where
        return f"{name}: unreadable row ({self.reason})"
