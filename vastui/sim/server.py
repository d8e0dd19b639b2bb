"""Serving the simulated API over real HTTP on loopback, inside the caller's event loop.

uvicorn's ``Server.serve()`` installs process signal handlers; the simulator runs inside tests and inside the
``vastui sim`` command, which own their signals, so the server is driven through startup / main_loop / shutdown.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

import uvicorn

from vastui.sim.app import create_app
from vastui.sim.market import Market


class SimServer:
    """``async with SimServer(market, port=0) as server: server.url`` — the API and the market's lifecycle poll."""

    def __init__(self, market: Market, *, host: str = "127.0.0.1", port: int = 0, poll: bool = True) -> None:
        self.market = market
        self.host = host
        self.port = port
        self._poll = poll
        self._server: uvicorn.Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._poll_task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """Base URL to give the client or ``vastai --url`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> SimServer:
        config = uvicorn.Config(create_app(self.market), host=self.host, port=self.port, lifespan="off",
                                log_level="warning", access_log=False, timeout_graceful_shutdown=2)
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup()
        if not server.started:
            raise OSError(f"the simulator could not listen on {self.host}:{self.port}")
        self._server = server
        self.port = server.servers[0].sockets[0].getsockname()[1]
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
        await server.shutdown()
        if self._poll_task is not None:
            self._poll_task.cancel()
            try:
                await self._poll_task
            except asyncio.CancelledError:
                pass
        await self.market.aclose()
