"""Fakes for the parts that cannot be real here. Every fake is named Fake*."""

from __future__ import annotations

import asyncio

import httpx


class FakeClock:
    """A clock that only moves when someone sleeps on it (or ``advance`` is called); records every sleep."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now += max(0.0, seconds)
        await asyncio.sleep(0)


class FakeVastApi:
    """A scripted stand-in for the live Vast.ai API (the one thing tests cannot reach): an ``httpx`` transport
    handler that answers from a queue of scripted responses (then ``default``) and records every request.

    Script entries are ``httpx.Response`` objects, or exceptions to raise (e.g. ``httpx.ConnectError``).
    """

    def __init__(self, default: httpx.Response | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.script: list[httpx.Response | Exception] = []
        self.default = default if default is not None else httpx.Response(200, json={"success": True})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        answer = self.script.pop(0) if self.script else self.default
        if isinstance(answer, Exception):
            raise answer
        return answer
