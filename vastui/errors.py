"""The one exception tree of vastui: every error a user can see is a VastuiError."""

from __future__ import annotations


class VastuiError(Exception):
    """Root of every error vastui raises on purpose.

    ``message`` is a full sentence for the operator; ``title`` is a short heading for a dialog.
    """

    def __init__(self, message: str, *, title: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.title = title or type(self).__name__

    def __str__(self) -> str:
        return self.message


class ConfigError(VastuiError):
    """Settings or paths are unusable (a missing key file, a bad value)."""


class ApiError(VastuiError):
    """The marketplace answered with an error, or not at all."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None, title: str = "") -> None:
        super().__init__(message, title=title)
        self.status = status
        self.code = code


class AuthError(ApiError):
    """The API key was rejected (401/403)."""


class NotFound(ApiError):
    """The thing asked for does not exist (404, or an empty show). ``server_message`` is the reply's own ``msg``
    (or its text): a 404 from an unknown endpoint or a proxy is not "no such instance", and callers that count a
    404 as "gone" must check it says so."""

    def __init__(self, message: str, *, status: int | None = 404, code: str | None = None, title: str = "",
                 server_message: str = "") -> None:
        super().__init__(message, status=status, code=code, title=title)
        self.server_message = server_message


class RateLimited(ApiError):
    """429 that was still refused after the retries ran out."""

    def __init__(self, message: str, *, retry_after_s: float | None = None, status: int | None = 429,
                 code: str | None = None, title: str = "") -> None:
        super().__init__(message, status=status, code=code, title=title)
        self.retry_after_s = retry_after_s


class QuotaExceeded(RateLimited):
    """The search quota is spent; retrying before the reset time cannot help."""


class TransportError(ApiError):
    """The connection failed, timed out or was dropped."""


class CreateFailed(ApiError):
    """A create request failed in transit and a complete listing shows nothing was rented.

    Not retried: renting again needs a new approval."""


class CreateUncertain(ApiError):
    """A create request failed in transit and no listing could settle whether an instance exists.

    ``label`` is what to look for; treat the instance as possibly billing until a complete listing says no."""

    def __init__(self, message: str, *, label: str, offer_id: int, status: int | None = None) -> None:
        super().__init__(message, status=status, title="Rent possibly happened")
        self.label = label
        self.offer_id = offer_id


class QueryError(VastuiError):
    """A search query could not be parsed; ``column`` is the 1-based position of the bad token."""

    def __init__(self, message: str, *, query: str, column: int, title: str = "Bad query") -> None:
        pointer = " " * (column - 1) + "^"
        super().__init__(f"{message} (column {column})\n  {query}\n  {pointer}", title=title)
        self.reason = message
        self.query = query
        self.column = column


class ApprovalRequired(VastuiError):
    """A mutating action was attempted without a valid, unused approval for it."""


class StoreError(VastuiError):
    """The local database could not be read or written."""


class WebhookError(VastuiError):
    """An alert's webhook did not take it (no answer, or an error status); the alert is kept and sent again."""


class ManifestError(VastuiError):
    """A workload manifest is invalid; says file, line and field."""

    def __init__(self, reason: str, *, path: str, line: int | None, field: str, title: str = "Bad manifest") -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {field} — {reason}", title=title)
        self.reason = reason
        self.path = path
        self.line = line
        self.field = field


class InputChanged(VastuiError):
    """A manifest's input file is no longer the file (or the bytes) that was loaded and digested: the campaign
    stops rather than upload anything else to a host."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"input {path!r} changed since the manifest was loaded ({why}); check the file and start "
                         "again", title="Input changed")
        self.path = path
        self.why = why


class RemoteError(VastuiError):
    """Remote execution over SSH failed."""


class RemoteTimeout(RemoteError, TimeoutError):
    """A remote step missed its deadline."""


class HostKeyMismatch(RemoteError):
    """A host presented a different key than the one recorded on first contact."""


class CampaignError(VastuiError):
    """A campaign cannot go on (budget, plan, or state problems)."""
