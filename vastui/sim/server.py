"""Serving the simulated API over real HTTP on loopback, inside the caller's event loop.

uvicorn's ``Server.serve()`` installs process signal handlers; the simulator runs inside tests and inside the
``vastui sim`` command, which own their signals, so the server is driven through startup / main_loop / shutdown.
"""

from __future__ import annotations

import asyncio
import socket
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp

from vastui.sim.app import create_app
from vastui.sim.market import Market


class SimServer:
    """``async with SimServer(market, port=0) as server: server.url`` — the API and the market's lifecycle poll."""

    def __init__(self, market: Market, *, host: str = "127.0.0.1", port: int = 0, poll: bool = True,
                 app: ASGIApp | None = None) -> None:
        """``app`` replaces the simulated API (benchmarks serve a bare app on the same stack: the HTTP floor)."""
        self.market = market
        self._app = app
        self.host = host
        self.port = port
        self._poll = poll
        self._server: uvicorn.Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._poll_task: asyncio.Task[None] | None = None
        self._sockets: list[socket.socket] = []

    @property
    def url(self) -> str:
        """Base URL to give the client or ``vastai --url`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> SimServer:
        # the simulated API stamps its own Date, from the market's clock (uvicorn's would be the wall clock's)
        config = uvicorn.Config(self._app or create_app(self.market), host=self.host, port=self.port, lifespan="off",
                                log_level="warning", access_log=False, timeout_graceful_shutdown=2,
                                date_header=self._app is not None)
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        sock = _bind(self.host, self.port)  # our own socket: uvicorn would sys.exit() on a bind error
        await server.startup(sockets=[sock])
        self._server, self._sockets = server, [sock]
        self.port = sock.getsockname()[1]
        self._serve_task = asyncio.create_task(server.main_loop(), name="vastui-sim-http")
        if self._poll:
            self._poll_task = asyncio.create_task(self.market.run(), name="vastui-sim-market")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop serving (idempotent). The market's hosts are stopped too."""
        server, self._server = self._server, None
        if server is None:
            return
        server.should_exit = True
        if self._serve_task is not None:
            await self._serve_task
        await server.shutdown(sockets=self._sockets)
        if self._poll_task is not None:
            self._poll_task.cancel()
            try:
                await self._poll_task
            except asyncio.CancelledError:
                pass
        await self.market.aclose()


def _bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on ``host:port`` (OSError if taken); port 0 picks a free one.

    The protocol is named (IPPROTO_TCP, not 0) because accepted sockets inherit it and asyncio sets TCP_NODELAY only
    on sockets whose protocol says TCP: without it every kept-alive reply waits ~40 ms for Nagle + delayed ACK.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
