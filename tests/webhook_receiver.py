"""A Slack-compatible incoming webhook on loopback for the watch's tests: a real HTTP server on a real socket that
keeps every JSON body it took, and refuses (503, nothing kept) while ``refusing`` is set or for the next
``refuse_next`` posts."""

from __future__ import annotations

import asyncio
import json
import secrets
from types import TracebackType
from typing import Any


class WebhookReceiver:
    def __init__(self) -> None:
        self.token = secrets.token_hex(12)   # the path's credential, as a Slack webhook URL carries one
        self.bodies: list[dict[str, Any]] = []
        self.refused = 0
        self.refusing = False
        self.refuse_next = 0
        self._server: asyncio.Server | None = None
        self._port = 0
        self._arrived = asyncio.Condition()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}/services/T0/B0/{self.token}"

    def keys(self) -> list[str]:
        return [body["vastui"]["key"] for body in self.bodies]

    async def wait_for(self, count: int) -> None:
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.bodies) >= count)

    async def __aenter__(self) -> WebhookReceiver:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length)
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                status = await self._answer(method, path, body)
                reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[status]
                text = b"ok" if status == 200 else b"no"
                writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(text)}\r\n"
                             "Content-Type: text/plain\r\n\r\n".encode() + text)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def _answer(self, method: str, path: str, body: bytes) -> int:
        if method != "POST" or path != f"/services/T0/B0/{self.token}":
            return 404
        if self.refusing or self.refuse_next > 0:
            self.refuse_next = max(0, self.refuse_next - 1)
            self.refused += 1
            return 503
        async with self._arrived:
            self.bodies.append(json.loads(body))
            self._arrived.notify_all()
        return 200
