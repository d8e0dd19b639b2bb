"""What the console is given: the services it calls and the settings it runs under.

The composition root (``vastui console``) builds the real ones — ``HttpVastClient``, ``Store``, the wall clock,
an ``EventBus`` — and hands them over; tests hand over the same kinds pointed at the simulator. The console never
builds a client, a connection or an SSH session itself, which keeps httpx, aiosqlite and asyncssh out of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from vastui.approval import Approval, AuditSink
from vastui.clock import Clock
from vastui.events import EventBus
from vastui.vast.models import Answered, CreatedInstance, Instance, InstanceListing, Offer, Prepaid, User

if TYPE_CHECKING:
    from vastui.store import Store


class ConsoleMarket(Protocol):
    """The marketplace calls the console makes (``HttpVastClient`` has them all)."""

    async def search_offers_body(self, body: Mapping[str, object]) -> list[Offer]: ...

    async def list_instances(self) -> InstanceListing: ...

    async def show_instance(self, instance_id: int) -> Instance | None: ...

    async def get_user(self) -> User: ...

    async def request_logs(self, instance_id: int, *, tail: int | None = None, daemon: bool = False) -> str: ...

    async def search_offers(self, query: str = "", *, order: str = "score-", type_: str = "on-demand",
                            limit: int | None = None, storage_gib: float = 5.0,
                            no_default: bool = False) -> list[Offer]: ...

    async def create_instance(self, *, offer_id: int, image: str, disk_gib: float, label: str, approval: Approval,
                              onstart: str | None = None, env: Mapping[str, str] | None = None,
                              runtype: str = ...) -> CreatedInstance: ...

    async def destroy_instance(self, instance_id: int, *, approval: Approval) -> Answered | None: ...

    async def stop_instance(self, instance_id: int, *, approval: Approval) -> None: ...

    async def start_instance(self, instance_id: int, *, approval: Approval) -> None: ...

    async def label_instance(self, instance_id: int, label: str, *, approval: Approval) -> None: ...

    async def prepay_instance(self, instance_id: int, amount_usd: float, *, approval: Approval) -> Prepaid: ...

    async def transfer_credit(self, recipient: str, amount_usd: float, *, approval: Approval) -> None: ...


@dataclass(frozen=True, slots=True)
class ConsoleServices:
    """The console's services. ``store`` is optional: without one there is no host knowledge and no leak watch."""

    market: ConsoleMarket
    clock: Clock
    bus: EventBus
    store: Store | None = None
    audit: AuditSink | None = None


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """How the console behaves. Intervals are seconds on the services' clock.

    ``live=False`` refreshes every source once at start and then only on request (snapshot tests, frozen clocks).
    """

    readonly: bool = False
    theme: str = "dark"
    money_confirm_over_usd: float = 20.0      # a prepay or transfer above this must be typed to be approved
    offers_query: str = ""
    offers_order: str = "score-"
    offers_limit: int = 500
    offers_interval_s: float = 30.0           # searches count against the account's search quota
    instances_interval_s: float = 10.0
    account_interval_s: float = 30.0
    leaks_interval_s: float = 60.0
    logs_interval_s: float = 5.0
    live: bool = True
    rent_image: str = "pytorch/pytorch"
    rent_disk_gib: float = 20.0
    rent_cap_hours: float = 24.0              # a rent's approval caps its spend at this many hours of its $/h
    workload_digest: str | None = None        # whose measured $/1k units to show; None: the latest campaign's
    initial_view: str = "offers"
    campaign_redraw_s: float = 0.25           # wall seconds between two pictures of a followed campaign (at most)
    view_memory_path: Path | None = None      # where each view's filter and sort are remembered; None: not kept

    def stale_after_s(self, interval_s: float) -> float:
        """A source is stale when its last good refresh is older than three of its intervals."""
        return 3.0 * interval_s + 5.0
