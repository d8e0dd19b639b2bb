"""The outer ASGI layer of the simulated API: path normalisation, the request log, Bearer auth and chaos.

Order matters: the path is normalised first (a trailing ``/`` on ``--url`` makes the CLI send ``//api/...``),
every request is logged whatever happens next, auth comes before rate limits and chaos (a bad key is never rate
limited), Vast.ai's documented rate limits (``Realism.rate_limits``, ``sim/rate_limits.py``) come next, and
chaos comes before the routes so an injected error never applies a mutation, except a dropped connection,
which by design happens after the work is done (the reply is what gets lost), and a slow reply, held either
before the work (it lands after the client gave up) or after it (the answer comes too late). A redirect answers
307 to the same URL, as a moved API host would; the client must follow it with the same method and body.

Every answer is stamped, as it leaves, with the market's own time: ``Date`` (as an HTTP server's clock would, to
the second) and, for clients on a scaled clock, the same moment with its fraction (``SIM_CLOCK_HEADER``) and the
clock's scale (``SIM_SCALE_HEADER``), so a console can label simulated durations.
"""

from __future__ import annotations

import asyncio
import re
from email.utils import formatdate
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vastui.clock import SIM_CLOCK_HEADER, SIM_SCALE_HEADER, clock_scale
from vastui.sim.market import Market
from vastui.sim.rate_limits import limit_of
from vastui.sim.request_log import RequestRecord
from vastui.sim.responses import error_response

PUBLIC_PATHS = ("/api/v0/gpu_names/unique/",)
SEARCH_PATHS = ("/api/v0/bundles/", "/api/v0/search/asks/")
_CREATE = re.compile(r"^/api/v0/asks/\d+/$")
_INSTANCE = re.compile(r"^/api/v0/instances/\d+/$")


class ChaosDrop(ConnectionAbortedError):
    """Raised after the response started, so the server cuts the connection mid-reply."""


class SimMiddleware:
    def __init__(self, app: ASGIApp, *, market: Market) -> None:
        self.app = app
        self.market = market

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = re.sub(r"/{2,}", "/", scope["path"])
        scope = {**scope, "path": path, "raw_path": path.encode(), "state": dict(scope.get("state") or {})}
        status = [500]
        arrived = float(self.market.clock.now())
        client = scope.get("client")
        scope["state"]["client"] = str(client[0]) if client else ""
        scope["state"]["arrived"] = arrived

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), *self._clock_headers()]}
            await send(message)

        self.market.requests_in_flight += 1
        try:
            await self._dispatch(scope, receive, tracking_send)
        finally:
            self.market.requests_in_flight -= 1
            self.market.record(RequestRecord(
                method=scope["method"], path=path, query=scope.get("query_string", b"").decode("latin-1"),
                status=status[0], at=self.market.clock.now(),
                target_ids=tuple(scope["state"].get("target_ids", ())), arrived_at=arrived,
                client=scope["state"]["client"],
            ))

    def _clock_headers(self) -> list[tuple[bytes, bytes]]:
        """The market's time as the answer leaves: ``Date`` to the second, and precisely (the test rig's bridge)."""
        now = float(self.market.clock.now())
        headers = [(SIM_CLOCK_HEADER.lower().encode("latin-1"), repr(now).encode("latin-1")),
                   (SIM_SCALE_HEADER.lower().encode("latin-1"),
                    repr(clock_scale(self.market.clock)).encode("latin-1"))]
        try:
            headers.append((b"date", formatdate(now, usegmt=True).encode("latin-1")))
        except (OverflowError, ValueError, OSError):  # a test clock set past year 9999 has no HTTP date
            pass
        return headers

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if not path.startswith("/api/") or path in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        if not self._authorised(scope):
            status = 404 if self.market.realism.auth_error_404 else 401   # the real service often says 404
            await error_response(status, "auth_error", "Invalid user key")(scope, receive, send)
            return
        if self.market.on_request is not None:
            self.market.on_request(scope["method"], path)
        if self.market.realism.rate_limits:
            too_soon = self._too_soon(scope)
            if too_soon is not None:
                await too_soon(scope, receive, send)
                return
        refusal = await self._chaos_refusal(path)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if self.market.chaos.drops_connection(mutation=_mutation(scope["method"], path)):
            await self._drop_after(scope, receive, send)
            return
        slow = self.market.chaos.slow_reply()
        if slow is not None:
            await self._slow(scope, receive, send, before=slow == "before")
            return
        await self.app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        key = _bearer_key(scope)
        return bool(key) and self.market.accepts_key(key)

    def _too_soon(self, scope: Scope) -> Response | None:
        """A 429 when this request comes sooner than its endpoint's documented interval allows (no Retry-After)."""
        limit = limit_of(scope["method"], scope["path"])
        if limit is None:
            return None
        refusal = self.market.rate_limits.check(limit=limit, key=_bearer_key(scope), client=scope["state"]["client"],
                                                now=scope["state"]["arrived"])
        if refusal is None:
            return None
        return Response(refusal.body, status_code=429, media_type=refusal.media_type)

    async def _chaos_refusal(self, path: str) -> Any:
        chaos = self.market.chaos
        if chaos.latency_s > 0:
            await asyncio.sleep(chaos.latency_s)
        if path in SEARCH_PATHS and not chaos.search_quota_left():
            reset = int(self.market.clock.now() + chaos.quota_reset_in_s)
            return error_response(429, "search_quota_exceeded", "Search quota exceeded.",
                                  headers={"X-RateLimit-Reset": str(reset)})
        limited = chaos.next_is_rate_limited()
        if chaos.in_outage(wall_now=asyncio.get_running_loop().time()):
            return error_response(503, "service_unavailable", "The API is down for maintenance.")
        if limited:
            return error_response(429, "rate_limited", "Too many requests, slow down.",
                                  headers={"Retry-After": f"{chaos.retry_after_s:g}"})
        code = chaos.server_error()
        if code is not None:
            return error_response(code, "server_error", f"Simulated server error {code}.")
        if chaos.redirects():
            return _redirect_to_self
        return None

    async def _slow(self, scope: Scope, receive: Receive, send: Send, *, before: bool) -> None:
        """Hold the answer past the client's timeout (wall seconds): before the work is done, or after it."""
        hold = self.market.chaos.slow_reply_s
        if before:
            body = await _whole_body(receive)  # the server has the request: the client leaving cancels nothing
            await asyncio.sleep(hold)
            await self.app(scope, _replay(body), send)
            return
        messages: list[Message] = []

        async def capture(message: Message) -> None:
            messages.append(message)

        await self.app(scope, receive, capture)
        await asyncio.sleep(hold)
        for message in messages:
            await send(message)

    async def _drop_after(self, scope: Scope, receive: Receive, send: Send) -> None:
        messages: list[Message] = []

        async def capture(message: Message) -> None:
            messages.append(message)

        await self.app(scope, receive, capture)
        if messages:
            await send(messages[0])
        raise ChaosDrop("chaos: connection dropped after the request was applied")


def _bearer_key(scope: Scope) -> str:
    """The key of ``Authorization: Bearer <key>`` ("" when there is none)."""
    headers = dict(scope.get("headers") or [])
    value = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, key = value.partition(" ")
    return key.strip() if scheme.lower() == "bearer" else ""


async def _redirect_to_self(scope: Scope, receive: Receive, send: Send) -> None:
    """307 to the very URL asked (same host and port, so the client keeps its key; same method and body)."""
    query = scope.get("query_string", b"").decode("latin-1")
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"127.0.0.1").decode("latin-1")
    location = f"http://{host}{scope['path']}" + (f"?{query}" if query else "")
    await Response(status_code=307, headers={"Location": location})(scope, receive, send)


async def _whole_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # nothing more will come; the app only waits for a disconnect here
        return {"type": "http.disconnect"}
    return receive


def _mutation(method: str, path: str) -> str | None:
    """``"create"`` or ``"destroy"`` for the one-instance requests that rent or destroy, else None."""
    if method == "PUT" and _CREATE.match(path):
        return "create"
    if method == "DELETE" and _INSTANCE.match(path):
        return "destroy"
    return None
