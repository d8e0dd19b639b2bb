"""A request the simulated marketplace refuses: an HTTP status, a machine code and a message for the operator."""

from __future__ import annotations


class MarketError(Exception):
    """Answered as ``{"success": false, "error": code, "msg": msg}`` with ``status`` (docs/api-notes.md §1.2)."""

    def __init__(self, status: int, code: str, msg: str) -> None:
        super().__init__(msg)
        self.status = status
        self.code = code
        self.msg = msg
