"""Instance logs the request_logs flow hands out: rendered once, then served from a result URL when ready.

In production the result is a presigned object-store URL that 404s until the log upload lands; the simulator
mimics that with a ``ready_at`` on the market clock (docs/api-notes.md §3.11).
"""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass

RESULT_DELAY_S = 1.0   # the official CLI polls every 0.3 s for ~9 s; a second keeps a first miss in every flow


@dataclass(frozen=True, slots=True)
class LogResult:
    ready_at: float
    text: str


class LogResults:
    """Tokens to pending or ready log texts."""

    def __init__(self) -> None:
        self._results: dict[str, LogResult] = {}

    def put(self, text: str, *, now: float, delay_s: float = RESULT_DELAY_S) -> str:
        token = secrets.token_urlsafe(18)
        self._results[token] = LogResult(ready_at=now + delay_s, text=text)
        return token

    def get(self, token: str, *, now: float) -> str | None:
        """The text once ready; None while pending or for an unknown token."""
        result = self._results.get(token)
        if result is None or now < result.ready_at:
            return None
        return result.text


def render_log(lines: list[tuple[float, str]], *, tail: int | None, grep: str | None,
               daemon: bool, instance_id: int) -> str:
    """Log text like ``vastai logs`` prints: timestamped lines, optionally filtered and tailed."""
    rendered = [f"{_stamp(at)} {text}" for at, text in lines]
    if daemon:
        rendered = [f"{_stamp(at)} [daemon] instance {instance_id}: {text}" for at, text in lines] + rendered
    if grep:
        rendered = [line for line in rendered if grep in line]
    if tail is not None and tail >= 0:
        rendered = rendered[-tail:] if tail else []
    return "\n".join(rendered) + ("\n" if rendered else "")


def render_container_log(*, daemon_lines: list[tuple[float, str]], container_lines: list[str], tail: int | None,
                         grep: str | None, daemon: bool) -> str:
    """Log text as the real service hands it out (``Realism.container_logs``, docs/api-notes.md §3.11): the
    container's own output, unstamped, or with ``daemon_logs`` the container daemon's lines, stamped the way the
    daemon stamps them (RFC 3339, nanoseconds). Nothing in either says "pulled N MB" or "container started"."""
    rendered = ([f"{_stamp_ns(at)} {text}" for at, text in daemon_lines] if daemon else list(container_lines))
    if grep:
        rendered = [line for line in rendered if grep in line]
    if tail is not None and tail >= 0:
        rendered = rendered[-tail:] if tail else []
    return "\n".join(rendered) + ("\n" if rendered else "")


def _stamp_ns(at: float) -> str:
    whole = int(at)
    nanos = min(999_999_999, int(round((at - whole) * 1e9)))
    return dt.datetime.fromtimestamp(whole, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def _stamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
