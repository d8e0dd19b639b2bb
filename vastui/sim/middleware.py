"""The outer ASGI layer of the simulated API: path normalisation, the request log, Bearer auth and chaos.

Order matters: the path is normalised first (a trailing ``/`` on ``--url`` makes the CLI send ``//api/...``),
every request is logged whatever happens next, auth comes before chaos (a bad key is never rate limited), and
chaos comes before the routes so an injected error never applies a mutation, except a dropped connection,
which by design happens after the work is done (the reply is what gets lost).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vastui.sim.market import Market
from vastui.sim.request_log import RequestRecord
from vastui.sim.responses import error_response

PUBLIC_PATHS = ("/api/v0/gpu_names/unique/",)
RESULTS_PREFIX = "/_results/"
SEARCH_PATHS = ("/api/v0/bundles/", "/api/v0/search/asks/")


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

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self._dispatch(scope, receive, tracking_send)
        finally:
            self.market.record(RequestRecord(
                method=scope["method"], path=path, query=scope.get("query_string", b"").decode("latin-1"),
                status=status[0], at=self.market.clock.now(),
                target_ids=tuple(scope["state"].get("target_ids", ())),
            ))

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if not path.startswith("/api/") or path in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        if not self._authorised(scope):
            await error_response(401, "auth_error", "Invalid user key")(scope, receive, send)
            return
        refusal = await self._chaos_refusal(path)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if self.market.chaos.drops_connection():
            await self._drop_after(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        value = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, key = value.partition(" ")
        return scheme.lower() == "bearer" and bool(key.strip()) and self.market.accepts_key(key.strip())

    async def _chaos_refusal(self, path: str) -> Any:
        chaos = self.market.chaos
        if chaos.latency_s > 0:
            await asyncio.sleep(chaos.latency_s)
        if chaos.search_quota_exhausted and path in SEARCH_PATHS:
            chaos.count("search_quota")
            reset = int(self.market.clock.now() + chaos.quota_reset_in_s)
            return error_response(429, "search_quota_exceeded", "Search quota exceeded.",
                                  headers={"X-RateLimit-Reset": str(reset)})
        if chaos.next_is_rate_limited():
            return error_response(429, "rate_limited", "Too many requests, slow down.",
                                  headers={"Retry-After": f"{chaos.retry_after_s:g}"})
        code = chaos.server_error()
        if code is not None:
            return error_response(code, "server_error", f"Simulated server error {code}.")
        return None

    async def _drop_after(self, scope: Scope, receive: Receive, send: Send) -> None:
        messages: list[Message] = []

        async def capture(message: Message) -> None:
            messages.append(message)

        await self.app(scope, receive, capture)
        if messages:
            await send(messages[0])
        raise ChaosDrop("chaos: connection dropped after the request was applied")
