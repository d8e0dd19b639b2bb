"""The small protocols through which a campaign reaches the marketplace, the hosts and the store.

The composition root (vastui/cli/) passes the real ones: ``HttpVastClient``, ``SshRunner``, ``SqliteStore``. Keeping the
campaign on protocols keeps it free of httpx, asyncssh and aiosqlite (docs/architecture.md, Dependency rules).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from vastui.approval import Approval
from vastui.remote.protocol import AgentError, GpuSample, Phase, Progress, Result
from vastui.vast.models import Answered, CreatedInstance, Instance, InstanceListing, Offer

Record = GpuSample | Progress | Phase | Result | AgentError


class Marketplace(Protocol):
    async def search_offers(self, query: str = "", *, order: str = "score-", type_: str = "on-demand",
                            limit: int | None = None, storage_gib: float = 5.0,
                            no_default: bool = False) -> list[Offer]: ...

    async def list_instances(self) -> InstanceListing: ...

    async def show_instance(self, instance_id: int) -> Instance | None: ...

    async def request_logs(self, instance_id: int, *, tail: int | None = None, daemon: bool = False) -> str: ...

    async def create_instance(self, *, offer_id: int, image: str, disk_gib: float, label: str, approval: Approval,
                              onstart: str | None = None, env: Mapping[str, str] | None = None,
                              runtype: str = ...) -> CreatedInstance: ...

    async def destroy_instance(self, instance_id: int, *, approval: Approval) -> Answered | None: ...


class AgentSession(Protocol):
    """One agent run: iterate its records; leaving the context stops it."""

    result: Result | None

    def __aiter__(self) -> AsyncIterator[Record]: ...

    def abandon(self) -> None:
        """Leave without stopping the remote run: its instance is about to be destroyed, which ends it."""
        ...


class HostExecutor(Protocol):
    async def wait_ready(self, host: str, port: int, *, deadline_s: float) -> None: ...

    def hold(self, host: str, port: int, *, deadline_s: float) -> AbstractAsyncContextManager[None]:
        """Wait until the host accepts SSH, then reuse that one connection for every call inside the block."""
        ...

    def hold_first(self, endpoints: Sequence[tuple[str, int]], *,
                   deadline_s: float) -> AbstractAsyncContextManager[tuple[str, int]]:
        """``hold`` on the first of one instance's endpoints (in order) that accepts SSH; yields that endpoint."""
        ...

    async def put_chunks(self, host: str, port: int, *, open_chunks: Callable[[], Iterable[bytes]],
                         remote_path: str) -> None:
        """Stream ``open_chunks()`` to ``remote_path`` atomically; an error the source raises ends it unwritten."""
        ...

    def run_agent(self, host: str, port: int, argv: Sequence[str], *, interval_s: float = 1.0,
                  output_file: str | None = None) -> AbstractAsyncContextManager[AgentSession]: ...

    def forget_host(self, host: str, port: int) -> int: ...
