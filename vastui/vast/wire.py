"""The wire: one ``httpx.AsyncClient``, requests shaped as the official CLI shapes them, bounded retries through
the injected clock, and every failure translated into a ``VastuiError`` whose text has passed the redactor.

Paths are sent exactly as given (trailing slashes matter to Vast); ``/api/v0`` is prepended unless the path
already names an API version. Query values that are not strings are ``json.dumps``-ed, then ``quote_plus``-ed,
as the CLI does. POST/PUT/DELETE always carry a JSON body (``{}`` when empty). The API key goes only into the
``Authorization`` header of marketplace requests, never into result-URL fetches, logs or messages.

When the clock is a ``MarketClock``, every answer's ``Date`` (or the simulator's precise clock header) keeps it on
the marketplace's time, so money is measured on one clock (docs/api-notes.md, "Time").
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import json
import logging
import math
import re
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from urllib.parse import quote_plus

import httpx

from vastui import __version__
from vastui.clock import SIM_CLOCK_HEADER, SIM_SCALE_HEADER, Clock, MarketClock
from vastui.config import Redactor, Secret, redact_url_passwords
from vastui.errors import ApiError, AuthError, NotFound, QuotaExceeded, RateLimited, TransportError
from vastui.vast.backoff import RetryPolicy, is_retryable_status, parse_retry_after
from vastui.vast.pacing import SAFETY, Pacer, PaceRule, threshold_in

_log = logging.getLogger("vastui.vast")
_VERSIONED = re.compile(r"^/api/v\d+/")
QUOTA_CODE = "search_quota_exceeded"
AUTH_CODE = "auth_error"   # a bad or revoked key, often answered 404 rather than 401 (docs/api-notes.md, "Keys")


class GarbledReply(ApiError):
    """A 2xx answer whose body could not be read: the server may well have acted on the request."""


class NotSent(TransportError):
    """The connection could not be made (refused, or no connect in time): the request never reached the server."""


class Retry(enum.Enum):
    """What may be sent again. IDEMPOTENT requests are retried on 429/502/503/504 and transport errors.
    REFUSED_ONLY requests (create, money) are retried only on a plain 429, which means the server did not act
    (every request is retried on a plain 429, up to ``RetryPolicy.max_rate_limited`` times)."""

    IDEMPOTENT = "idempotent"
    REFUSED_ONLY = "refused-only"


MAX_REDIRECTS = 5
# httpx's timeout is per read: a server that sends a byte now and then never trips it. A whole answer (redirects
# included) must come within this many times the per-read timeout, or the attempt counts as timed out.
WHOLE_ANSWER_FACTOR = 2.0
# A call that changes something (create, destroy, label, money) is given four times the reads' timeout, as the
# official CLI gives every call 120 s against vastui's 30 s reads (docs/api-notes.md §9): a create that is slow to
# answer is waited for rather than made "uncertain" and reconciled from listings.
MUTATION_TIMEOUT_FACTOR = 4.0
# Requests that are sent with PUT/POST but change nothing: they keep the reads' timeout.
_READS_BY_BODY = ("/api/v0/bundles/", "/api/v0/search/asks/", "/api/v0/instances/request_logs/")


def _is_vast_host(host: str) -> bool:
    return host == "vast.ai" or host.endswith(".vast.ai")


class Wire:
    """Sends one marketplace request at a time and returns its decoded JSON."""

    def __init__(self, *, base_url: str, api_key: Secret | None, clock: Clock,
                 transport: httpx.AsyncBaseTransport | None, timeout_s: float, policy: RetryPolicy,
                 redactor: Redactor, key_source: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._key_source = key_source   # where the key came from (--api-key, VAST_API_KEY, a file): safe to show
        self._clock = clock
        self._policy = policy
        self.redact = redactor
        self.pacer = Pacer(clock=clock)   # one per API key, shared by every caller: see pacing.py
        # Redirects are followed here (``_following_redirects``), as the official CLI follows them: the key stays
        # on the origin it was given for and on https hosts of vast.ai, never anywhere else; a loop ends after
        # MAX_REDIRECTS in a one-line error.
        self._timeout_s = timeout_s
        self._http = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(timeout_s),
                                       headers={"User-Agent": f"vastui/{__version__}"}, follow_redirects=False)

    def __repr__(self) -> str:
        return f"Wire(base_url={redact_url_passwords(self.base_url)!r}, api_key={self._api_key!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    def url(self, path: str, params: Mapping[str, object] | None = None) -> str:
        """The full URL the official CLI would build for ``path`` and ``params``."""
        url = self.base_url + api_path(path)
        if params:
            url += "?" + "&".join(
                f"{name}={quote_plus(value if isinstance(value, str) else json.dumps(value))}"
                for name, value in params.items()
            )
        return url

    def log(self, level: int, text: str) -> None:
        _log.log(level, "%s", self.redact(text))

    async def call(self, method: str, path: str, *, params: Mapping[str, object] | None = None,
                   body: Mapping[str, object] | None = None, retry: Retry = Retry.IDEMPOTENT) -> object:
        """Send when the endpoint's pace allows, retrying as ``retry`` allows, and return the decoded JSON of a 2xx
        answer (else raise). A plain 429 (the server did nothing) is retried whatever ``retry`` says, after the
        wait it asks for, up to ``RetryPolicy.max_rate_limited``; other failures count against ``max_attempts``."""
        what = f"{method} {path}"
        url = self.url(path, params)
        full_path = api_path(path)
        headers = {"Authorization": f"Bearer {self._api_key.reveal()}"} if self._api_key else {}
        content = None
        if method != "GET":
            content = json.dumps(dict(body or {})).encode()
            headers["Content-Type"] = "application/json"
        attempt = 0
        limited = 0
        while True:
            attempt += 1
            try:
                response = await self._send(method, full_path, url, content, headers)
            except (httpx.TransportError, TimeoutError) as exc:
                if isinstance(exc, TimeoutError):
                    whole_s = self.timeout_for(method, full_path) * WHOLE_ANSWER_FACTOR
                    reason = f"no whole answer within {whole_s:g} s (the server is sending too slowly)"
                else:
                    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                if retry is Retry.IDEMPOTENT and self._policy.has_attempts_left(attempt - limited):
                    await self._wait(what, attempt, None, reason, uncounted=limited)
                    continue
                kind = NotSent if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) else TransportError
                raise kind(self.redact(f"{what} failed after {attempt} attempt(s): {reason}")) from exc
            except httpx.HTTPError as exc:
                raise ApiError(self.redact(f"{what} failed: {type(exc).__name__}: {exc}")) from exc
            self.log(logging.DEBUG, f"{what} -> {response.status_code} (attempt {attempt})")
            if not is_retryable_status(response.status_code) or self._is_quota(response):
                return self._decode(response, what)
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if response.status_code == 429:
                limited += 1
                delay = self._rate_limit_wait(what, self.pacer.rule_for(method, full_path), response, retry_after,
                                              limited)
                if delay is None:
                    return self._decode(response, what, attempts=attempt)
                await self._wait(what, attempt, delay, "HTTP 429", limited=limited)
                continue
            if retry_after is not None and retry_after > self._policy.max_retry_after_s:
                raise self._too_long(what, response.status_code, retry_after)
            if not (retry is Retry.IDEMPOTENT and self._policy.has_attempts_left(attempt - limited)):
                return self._decode(response, what, attempts=attempt)
            await self._wait(what, attempt, retry_after, f"HTTP {response.status_code}", uncounted=limited)

    async def _send(self, method: str, full_path: str, url: str, content: bytes | None,
                    headers: dict[str, str]) -> httpx.Response:
        """One attempt, in the endpoint's turn (``pacing.py``), its answer read whole and its time kept."""
        timeout_s = self.timeout_for(method, full_path)
        async with self.pacer.turn(method, full_path):
            sent = self._clock.local_now() if isinstance(self._clock, MarketClock) else 0.0
            request = self._http.build_request(method, url, content=content, headers=headers,
                                               timeout=httpx.Timeout(timeout_s))
            response = await asyncio.wait_for(self._following_redirects(request), timeout_s * WHOLE_ANSWER_FACTOR)
        self._keep_time(response, sent)
        return response

    async def _following_redirects(self, request: httpx.Request) -> httpx.Response:
        """Send, following up to MAX_REDIRECTS redirects. httpx drops the key when one leaves the origin; it is put
        back only where the official CLI sends it too and it is safe to: an https host of vast.ai, when the key was
        given for vast.ai (docs/api-notes.md §9)."""
        response = await self._http.send(request)
        for _ in range(MAX_REDIRECTS):
            following = response.next_request
            if following is None:
                return response
            await response.aclose()
            if "Authorization" in request.headers and "Authorization" not in following.headers \
                    and self._keeps_key_at(following.url):
                following.headers["Authorization"] = request.headers["Authorization"]
            request, response = following, await self._http.send(following)
        if response.next_request is None:
            return response
        await response.aclose()
        raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.", request=request)

    def _keeps_key_at(self, url: httpx.URL) -> bool:
        base = httpx.URL(self.base_url)
        return url.scheme == "https" and _is_vast_host(url.host) and _is_vast_host(base.host)

    def timeout_for(self, method: str, full_path: str) -> float:
        """The per-read timeout of one request: longer for a call that changes something."""
        if method == "GET" or full_path.startswith(_READS_BY_BODY):
            return self._timeout_s
        return self._timeout_s * MUTATION_TIMEOUT_FACTOR

    def _rate_limit_wait(self, what: str, rule: PaceRule | None, response: httpx.Response,
                         retry_after: float | None, limited: int) -> float | None:
        """How long to wait before sending again after a plain 429 (None: give up). A ``Retry-After`` is honoured;
        without one (as Vast.ai answers), the ``threshold=`` its body names, else the endpoint's documented
        interval, else a backoff that starts at a second. A wait over ``max_retry_after_s`` raises."""
        threshold = threshold_in(response.text)
        if retry_after is not None:
            delay = retry_after
        elif threshold is not None:
            delay = threshold * SAFETY
            if rule is not None and threshold <= self._policy.max_retry_after_s:
                self.pacer.learn(rule, threshold)
        elif rule is not None:
            delay = self.pacer.interval_s(rule) * SAFETY
        else:
            delay = self._policy.rate_limit_backoff_s(limited - 1)
        if delay > self._policy.max_retry_after_s:
            raise self._too_long(what, 429, delay)
        return delay if self._policy.has_rate_limit_tries_left(limited) else None

    def _too_long(self, what: str, status: int, wait_s: float) -> RateLimited:
        return RateLimited(self.redact(
            f"{what}: the marketplace asked us to wait {wait_s:.0f} s (HTTP {status}); "
            f"giving up instead of waiting over {self._policy.max_retry_after_s:.0f} s"),
            retry_after_s=wait_s, status=status)

    def _keep_time(self, response: httpx.Response, sent_local: float) -> None:
        """Tell a ``MarketClock`` what the marketplace's clock read when it answered (an answer without a readable
        time tells it nothing)."""
        if not isinstance(self._clock, MarketClock):
            return
        reading = market_time_of(response.headers)
        if reading is not None:
            self._clock.observe(market_time=reading[0], resolution_s=reading[1], sent_local=sent_local,
                                received_local=self._clock.local_now())
        scale = sim_scale_of(response.headers)
        if scale is not None:
            self._clock.announced_scale = scale

    async def _wait(self, what: str, attempt: int, retry_after: float | None, reason: str, *,
                    limited: int = 0, uncounted: int = 0) -> None:
        """Wait before the next attempt: ``limited`` for a 429 (counted apart from the other failures, so
        ``uncounted`` of the attempts so far were 429s and do not count against ``max_attempts``)."""
        delay = retry_after if retry_after is not None else self._policy.backoff_s(attempt - 1)
        bound = (f"rate limited {limited} of at most {self._policy.max_rate_limited} times" if limited
                 else f"attempt {attempt - uncounted + 1} of {self._policy.max_attempts}")
        self.log(logging.WARNING, f"{what}: {reason}; retrying in {delay:.3g} s ({bound})")
        await self._clock.sleep(delay)

    @staticmethod
    def _is_quota(response: httpx.Response) -> bool:
        if response.status_code != 429:
            return False
        try:
            body = response.json()
        except (ValueError, RecursionError):
            return False
        return isinstance(body, Mapping) and body.get("error") == QUOTA_CODE

    def _decode(self, response: httpx.Response, what: str, *, attempts: int = 1) -> object:
        status = response.status_code
        try:
            body: object = response.json()
        except (ValueError, RecursionError):  # RecursionError: arrays nested past the recursion limit
            snippet = one_line(response.text[:200], 80)
            if status < 400:
                raise GarbledReply(self.redact(f"{what}: HTTP {status} with a body that is not JSON: {snippet!r}"),
                                   status=status) from None
            body = None
            message = snippet or response.reason_phrase
        else:
            message = _message(body) or response.reason_phrase
        code = body.get("error") if isinstance(body, Mapping) and isinstance(body.get("error"), str) else None
        if status >= 400 or 300 <= status < 400:
            raise self._http_error(response, what, status, code, message, attempts)
        if isinstance(body, Mapping) and body.get("success") is False:
            raise ApiError(self.redact(f"{what} was refused: {message or 'success: false with no message'}"),
                           status=status, code=code)
        return body

    def _http_error(self, response: httpx.Response, what: str, status: int, code: str | None, message: str,
                    attempts: int) -> ApiError:
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        text = f"{what}: HTTP {status}{tried}: {message}"
        if status in (401, 403) or is_key_rejection(status, code, message):
            source = f" (from {self._key_source})" if self._key_source else ""
            return AuthError(self.redact(f"{text} — the API key was rejected{source}; check it for {self.base_url}"),
                             status=status, code=code, title=f"API key rejected{source}")
        if status == 404:
            return NotFound(self.redact(text), status=status, code=code, server_message=self.redact(message)[:200])
        if status == 429 and code == QUOTA_CODE:
            reset = parse_retry_after(response.headers.get("X-RateLimit-Reset"))
            when = ""
            wait = None
            if reset is not None:
                try:
                    stamp = dt.datetime.fromtimestamp(reset, tz=dt.UTC).strftime("%Y-%m-%d %H:%M")
                except (OverflowError, ValueError, OSError):  # a reset time past year 9999 is no time at all
                    reset = None
                else:
                    when = f" Resets at {stamp} UTC."
                    wait = max(0.0, reset - self._clock.now())
            return QuotaExceeded(self.redact(f"{what}: search quota exceeded: {message}.{when}"),
                                 retry_after_s=wait, status=status, code=code, title="Search quota exceeded")
        if status == 429:
            return RateLimited(self.redact(text), retry_after_s=parse_retry_after(response.headers.get("Retry-After")),
                               status=status, code=code)
        return ApiError(self.redact(text), status=status, code=code)

    async def fetch_result(self, url: str) -> tuple[int, str]:
        """GET a presigned result URL with no Authorization header; (status, text). Transport errors -> (0, why)."""
        try:
            response = await self._http.get(url, follow_redirects=True)   # no key: any host may serve it
        except httpx.TransportError as exc:
            return 0, type(exc).__name__
        return response.status_code, response.text


def is_key_rejection(status: int, code: str | None, message: str) -> bool:
    """Whether an error answer says the API key is bad: 401/403, or the ``auth_error`` code (or its
    "Invalid user key" text) on any status — the real service often answers a revoked key with 404."""
    return status in (401, 403) or code == AUTH_CODE or (status == 404 and "invalid user key" in message.lower())


def api_path(path: str) -> str:
    """``path`` as the API names it: ``/api/v0`` prepended unless it already names a version."""
    return path if _VERSIONED.match(path) else "/api/v0" + path


def market_time_of(headers: httpx.Headers) -> tuple[float, float] | None:
    """What the marketplace's clock read when it sent an answer, and to what resolution: the simulator's precise
    header (a test-rig bridge, docs/simulator.md), else the standard ``Date`` (RFC 9110, to the second); None when
    neither is there once and readable (two Dates could be two clocks)."""
    precise = headers.get_list(SIM_CLOCK_HEADER)
    if len(precise) == 1:
        try:
            value = float(precise[0])
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return value, 0.0
    dates = headers.get_list("Date")
    if len(dates) != 1:
        return None
    try:
        stamp = parsedate_to_datetime(dates[0])
    except (TypeError, ValueError, IndexError):
        return None
    if stamp.tzinfo is None:       # "-0000": UTC with no zone said
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp(), 1.0


def sim_scale_of(headers: httpx.Headers) -> float | None:
    """The scale a simulator announces for its clock (a test-rig bridge, like its precise time); None otherwise."""
    values = headers.get_list(SIM_SCALE_HEADER)
    if len(values) != 1:
        return None
    try:
        scale = float(values[0])
    except ValueError:
        return None
    return scale if math.isfinite(scale) and scale > 0 else None


MAX_SERVER_TEXT = 160                 # characters of a server's own words kept in an error
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


def one_line(text: str, limit: int = MAX_SERVER_TEXT) -> str:
    """A server's text made fit for a one-line error: control characters and line breaks become spaces, and
    anything past ``limit`` characters is cut (with an ellipsis)."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _message(body: object) -> str:
    if isinstance(body, Mapping):
        msg = body.get("msg")
        return one_line(msg) if isinstance(msg, str) else ""
    return ""
