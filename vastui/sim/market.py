"""The mutable state of the simulated marketplace, driven by a Clock: offers taken and freed, instance lifecycle,
per-second billing, the account, logs, and the hook that gives running instances a real SSH host.

The lifecycle is computed lazily from the clock on every operation (``refresh``), so a FakeClock test only has to
advance time; ``run()`` is an optional background poll that starts hosts even when nobody asks. One lock
serialises every operation, host starts and stops included, so a request never sees a half-made transition.

Why one module past the usual size: it is that one lock's critical sections; the steps that need no lock already
live apart (``lifecycle``, ``listing``, ``account``, ``logs``, ``instance``), and what is left reads and writes the
same state under the lock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from vastui.clock import Clock
from vastui.sim.account import Account, validated_public_key
from vastui.sim.chaos import Chaos, InstanceFault
from vastui.sim.instance import CreateRequest, InstanceState, InstanceStatus, instance_row
from vastui.sim.lifecycle import Charges, advance, begin_loading, charge_bandwidth, discount_for, halt
from vastui.sim.listing import list_instances
from vastui.sim.logs import LogResults, render_container_log, render_log
from vastui.sim.machine import Machine, World
from vastui.sim.market_error import MarketError
from vastui.sim.offers import HOURS_PER_MONTH, OfferBook
from vastui.sim.rate_limits import RateLimits
from vastui.sim.realism import Realism
from vastui.sim.request_log import RequestLog, RequestRecord
from vastui.sim.sshpaths import direct_allowed, without_open_ports
from vastui.sim.truth import Fault, MachineTruth
from vastui.sim.turns import SCHEDULING_FAILURE, LifecycleOdds, draw_fate, runtime_broken

logger = logging.getLogger(__name__)

INSTANCE_ID_BASE = 30_000_000
PLACEHOLDER_HOST = "127.0.0.1"
POLL_INTERVAL_S = 0.25


@runtime_checkable
class UpdatesKeys(Protocol):
    """A host provider that can change a running host's authorized keys (keys attached after the start)."""

    def set_authorized_keys(self, *, instance_id: int, authorized_keys: list[str]) -> None: ...


@runtime_checkable
class ProxiesSsh(Protocol):
    """A host provider whose hosts also answer on a proxy endpoint, and can refuse their direct port."""

    def proxy_endpoint(self, *, instance_id: int) -> tuple[str, int] | None: ...

    def refuse_direct(self, *, instance_id: int) -> None: ...


@runtime_checkable
class DropsConnections(Protocol):
    """A host provider that can cut a running host's SSH connections (chaos: SSH cut mid-run)."""

    def drop_connections(self, *, instance_id: int) -> int: ...


# A chaos fault that lives in the machine's truth for the rented instance (the host and its workload read it).
_TRUTH_FAULTS = {InstanceFault.STUCK_LOADING: Fault.STUCK_LOADING, InstanceFault.WRONG_OUTPUT: Fault.WRONG_OUTPUT}


class HostProvider(Protocol):
    """Gives a running instance a reachable SSH endpoint (``sim/hosts.py`` runs a real asyncssh server)."""

    async def start_host(self, *, instance_id: int, machine: Machine,
                         authorized_keys: list[str]) -> tuple[str, int]: ...

    async def stop_host(self, *, instance_id: int) -> None: ...


class Market:
    """The marketplace behind the simulated API. Public methods are what the routes (and tests) call."""

    def __init__(self, world: World, *, clock: Clock, api_key: str, initial_credit_usd: float = 500.0,
                 host_provider: HostProvider | None = None, chaos: Chaos | None = None,
                 realism: Realism | None = None, first_instance_id: int = INSTANCE_ID_BASE + 1) -> None:
        self.clock = clock
        self.chaos = chaos or Chaos()
        self.realism = realism or Realism.vast()   # how hard this marketplace is (sim/realism.py)
        # With proxies, a seeded share of machines opened no ports: their instances are reached by proxy only.
        self.world = world = without_open_ports(world) if self.realism.ssh_proxy else world
        self.lifecycle_odds = LifecycleOdds()       # how often a rental's turns happen, when realism has them on
        self.host_provider = host_provider
        self.request_log = RequestLog()
        self.rate_limits = RateLimits(seed=world.seed)   # Vast.ai's per-endpoint intervals, when realism says so
        self.requests_in_flight = 0   # API requests being answered now (a slow reply holds one for a while)
        # Tests' hook: told (method, path) of each authorised API request as it arrives, before it is answered.
        self.on_request: Callable[[str, str], None] | None = None
        self.account = Account(credit_usd=initial_credit_usd)
        self._api_key = api_key
        self._by_offer = {m.offer_id: m for m in world.machines}
        self._offers = OfferBook(world.machines)
        self._by_machine = {m.machine_id: m for m in world.machines}
        self._rented_by_others = {m.machine_id for m in world.machines if m.rented}
        self._instances: dict[int, InstanceState] = {}
        self._destroyed: dict[int, InstanceState] = {}
        self._pulled: set[tuple[int, str]] = set()
        self._next_id = first_instance_id   # a later market (sim/redraw.py) goes on past an earlier one's ids
        self._refused: dict[int, int] = {}  # offer id -> creates scheduling refused on it (each ask draws afresh)
        self._results = LogResults()
        self._lock = asyncio.Lock()
        self._closed = False
        self._teardowns: set[asyncio.Task[None]] = set()   # hosts of destroyed instances being taken down
        self._struck: set[int] = set()                      # instances whose mid-run chaos fault happened

    def __repr__(self) -> str:
        return f"Market(seed={self.world.seed}, machines={len(self.world.machines)}, instances={len(self._instances)})"

    # --- read-only accessors -------------------------------------------------------------------------------
    def accepts_key(self, key: str) -> bool:
        return hmac.compare_digest(key.encode(), self._api_key.encode())

    def revoke_key(self, *, replacement: str) -> None:
        """The account's API key is revoked and ``replacement`` issued (the operator's doing; tests: a revoked key)."""
        self._api_key = replacement

    def truth_of(self, machine_id: int) -> MachineTruth:
        """Hidden truth of a machine, for the simulator's hosts and for tests judging decisions."""
        return self._by_machine[machine_id].truth

    def runtime_broken(self, machine_id: int) -> bool:
        """Whether every rental on this machine fails to start its container (turns.runtime_broken); tests and the
        decision benchmark's oracle, for which such a host is no choice at all."""
        return self.realism.lifecycle_turns and runtime_broken(seed=self.world.seed, machine_id=machine_id,
                                                               odds=self.lifecycle_odds)

    @property
    def next_instance_id(self) -> int:
        """The id the next rental gets."""
        return self._next_id

    def instance_ids(self) -> list[int]:
        return sorted(self._instances)

    def every_instance(self) -> list[InstanceState]:
        """Every instance ever created here, live or destroyed, by id; tests only."""
        return sorted([*self._instances.values(), *self._destroyed.values()], key=lambda st: st.id)

    def instance_state(self, instance_id: int) -> InstanceState | None:
        """The live (or destroyed) instance's private state; tests only."""
        return self._instances.get(instance_id) or self._destroyed.get(instance_id)

    def charges_of(self, instance_id: int) -> Charges:
        st = self.instance_state(instance_id)
        if st is None:
            raise KeyError(instance_id)
        return Charges(gpu_usd=st.gpu_charged_usd, storage_usd=st.storage_charged_usd,
                       bandwidth_usd=st.bandwidth_charged_usd, paid_usd=st.paid_usd)

    def is_rented(self, machine: Machine) -> bool:
        mid = machine.machine_id
        return mid in self._rented_by_others or any(st.machine.machine_id == mid for st in self._instances.values())

    def record(self, record: RequestRecord) -> None:
        self.request_log.append(record)

    # --- lifecycle -------------------------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Bring every instance up to the clock: transitions, billing, host starts and stops."""
        async with self._lock:
            await self._advance()

    async def _advance(self) -> None:
        now = self.clock.now()
        for st in list(self._instances.values()):
            advance(st, now, account=self.account, pulled=self._pulled)
            self._chaos_strikes(st, now)
        if self.account.credit_usd <= 0:
            for st in self._instances.values():
                if st.status in (InstanceStatus.RUNNING, InstanceStatus.LOADING, InstanceStatus.SCHEDULING):
                    halt(st, now, status=InstanceStatus.STOPPED, why="stopped: out of credit")
        await self._sync_hosts()

    def _chaos_strikes(self, st: InstanceState, now: float) -> None:
        """A mid-run chaos fault whose time has come: the host goes offline, the container exits, or SSH is cut."""
        drawn = self.chaos.instance_faults.get(st.id)
        if drawn is None or drawn.after_running_s is None or st.id in self._struck:
            return
        if st.status is not InstanceStatus.RUNNING or st.running_since is None:
            return
        if now < st.running_since + drawn.after_running_s:
            return
        self._struck.add(st.id)
        self.chaos.strike(st.id)
        if drawn.fault is InstanceFault.GOES_OFFLINE:
            halt(st, now, status=InstanceStatus.OFFLINE, why="host offline: the machine went down (chaos)")
        elif drawn.fault is InstanceFault.EXITS:
            halt(st, now, status=InstanceStatus.EXITED, why="container exited unexpectedly (chaos)")
        elif isinstance(self.host_provider, DropsConnections):
            self.host_provider.drop_connections(instance_id=st.id)

    async def _sync_hosts(self) -> None:
        for st in list(self._instances.values()):
            if st.status is InstanceStatus.RUNNING and st.host is None:
                await self._start_host(st)
            elif st.status is not InstanceStatus.RUNNING and st.host is not None:
                await self._stop_host(st)

    async def _start_host(self, st: InstanceState) -> None:
        if self.host_provider is None:
            st.host, st.port = PLACEHOLDER_HOST, 40_000 + st.id % 20_000
            return
        try:
            host, port = await self.host_provider.start_host(
                instance_id=st.id, machine=st.machine, authorized_keys=st.authorized_keys)
        except Exception as exc:  # the provider's failure is the container's failure, not the API's
            logger.exception("host for instance %s failed to start", st.id)
            halt(st, self.clock.now(), status=InstanceStatus.EXITED, why=f"container failed to start: {exc}")
            return
        st.host, st.port = host, int(port)
        if self.realism.ssh_proxy:
            self._route_ssh(st)

    def _route_ssh(self, st: InstanceState) -> None:
        """Vast's SSH paths: the row names the proxy; direct only for a direct runtype on a machine with open
        ports (docs/api-notes.md §3.12)."""
        st.direct_ssh = direct_allowed(runtype=st.request.runtype, machine=st.machine)
        if isinstance(self.host_provider, ProxiesSsh):
            st.proxy_host, st.proxy_port = self.host_provider.proxy_endpoint(instance_id=st.id) or (None, None)
            if not st.direct_ssh:
                self.host_provider.refuse_direct(instance_id=st.id)
        elif st.port is not None:   # no real hosts: a placeholder proxy address
            st.proxy_host, st.proxy_port = PLACEHOLDER_HOST, st.port + 1

    async def _stop_host(self, st: InstanceState) -> None:
        had_host, st.host, st.port = st.host is not None, None, None
        st.proxy_host = st.proxy_port = None
        if self.host_provider is None or not had_host:
            return
        try:
            await self.host_provider.stop_host(instance_id=st.id)
        except Exception:  # a host that will not stop must not block the API; it is logged
            logger.exception("host for instance %s failed to stop", st.id)

    async def run(self, *, poll_interval_s: float = POLL_INTERVAL_S) -> None:
        """Background poll until ``aclose``: wall-clock interval, market-clock state (works for any Clock)."""
        while not self._closed:
            await self.refresh()
            await asyncio.sleep(poll_interval_s)

    async def aclose(self) -> None:
        """Stop polling and stop every host (destroyed ones' teardowns finished first); instances stay as they are."""
        self._closed = True
        if self._teardowns:
            await asyncio.gather(*self._teardowns, return_exceptions=True)
        async with self._lock:
            for st in self._instances.values():
                if st.host is not None:
                    await self._stop_host(st)

    # --- offers ----------------------------------------------------------------------------------------------
    async def search(self, query: Mapping[str, Any]) -> list[dict[str, Any]]:
        async with self._lock:
            await self._advance()
            return self._offers.search(query, rented=self.rented_machine_ids(), now=self.clock.now())

    async def search_json(self, query: Mapping[str, Any]) -> str:
        """``search`` answered as the JSON text of ``{"offers": [...]}``, from rows serialised once."""
        async with self._lock:
            await self._advance()
            return self._offers.search_json(query, rented=self.rented_machine_ids(), now=self.clock.now())

    def rented_machine_ids(self) -> frozenset[int]:
        """Machines rented by anyone (by others from the start, or by one of the account's instances)."""
        return frozenset(self._rented_by_others).union(st.machine.machine_id for st in self._instances.values())

    async def create_instance(self, offer_id: int, request: CreateRequest) -> InstanceState:
        """Rent an offer; the offer stops being rentable until the instance is destroyed."""
        async with self._lock:
            await self._advance()
            st = self._create(offer_id, request)
            await self._sync_hosts()
            return st

    async def create_many(self, offer_ids: list[int], request: CreateRequest) -> tuple[list[int], list[str]]:
        """Bulk create: (new instance ids, messages of the offers that failed)."""
        created, failed = [], []
        async with self._lock:
            await self._advance()
            for offer_id in offer_ids:
                try:
                    created.append(self._create(offer_id, request).id)
                except MarketError as exc:
                    failed.append(exc.msg)
            await self._sync_hosts()
        return created, failed

    def _create(self, offer_id: int, request: CreateRequest) -> InstanceState:
        now = self.clock.now()
        machine = self._by_offer.get(offer_id)
        if machine is None:
            raise MarketError(404, "no_such_ask", f"Offer {offer_id} does not exist.")
        if self.is_rented(machine):
            raise MarketError(400, "no_such_ask", f"Offer {offer_id} is no longer available: it is already rented.")
        if self.chaos.offer_stolen():
            self._rented_by_others.add(machine.machine_id)
            raise MarketError(400, "no_such_ask", f"Offer {offer_id} is no longer available: it was just rented.")
        if self.account.credit_usd <= 0:
            raise MarketError(400, "insufficient_credit", "Your credit is exhausted; add credit to rent.")
        if request.disk_gb > machine.disk_space_gb:
            raise MarketError(400, "insufficient_disk",
                              f"Offer {offer_id} has {machine.disk_space_gb:.0f} GB of disk, {request.disk_gb:.0f} asked.")
        if request.price is not None and request.price < machine.min_bid:
            raise MarketError(400, "bid_too_low", f"Bid ${request.price:.4f}/hr is below the minimum "
                                                  f"${machine.min_bid:.4f}/hr of offer {offer_id}.")
        fate = draw_fate(seed=self.world.seed, instance_id=self._next_id, offer_id=offer_id,
                         machine_id=machine.machine_id,
                         odds=self.lifecycle_odds, lifecycle=self.realism.lifecycle_turns,
                         scheduling_failures=self.realism.cancel_unavail,
                         refused_before=self._refused.get(offer_id, 0))
        if fate.scheduling_fails:
            self._refused[offer_id] = self._refused.get(offer_id, 0) + 1
        if fate.scheduling_fails and request.cancel_unavail:
            raise MarketError(400, "scheduling_failed",
                              f"Offer {offer_id} could not be scheduled: {SCHEDULING_FAILURE} (cancel_unavail).")
        drawn = self.chaos.draw_instance_fault(self._next_id)
        if drawn is not None and drawn.fault in _TRUTH_FAULTS:
            truth = dataclasses.replace(machine.truth, fault=_TRUTH_FAULTS[drawn.fault], fault_after_s=None)
            machine = dataclasses.replace(machine, truth=truth)  # this rental only: the listing is unchanged
        st = InstanceState(
            id=self._next_id, machine=machine, request=request, api_key=secrets.token_hex(32), created_at=now,
            status=InstanceStatus.LOADING, intended="running", ready_at=None, last_billed_at=now,
            label=request.label, bid_price=request.price,
            authorized_keys=[key.public_key for key in self.account.ssh_keys.values()], fate=fate,
        )
        self._next_id += 1
        st.log(now, f"Instance {st.id} created on machine {machine.machine_id} from offer {offer_id}.")
        if fate.scheduling_fails:   # cancel_unavail false: the rental exists, stopped, and its disk bills
            halt(st, now, status=InstanceStatus.STOPPED, why=SCHEDULING_FAILURE + "; created stopped")
        elif fate.scheduling_s > 0:
            st.status, st.scheduled_at, st.status_msg = InstanceStatus.SCHEDULING, now + fate.scheduling_s, "Scheduling"
            st.log(now, "Scheduling: waiting for the machine's resources.")
        else:
            begin_loading(st, now, pull=True, pulled=self._pulled, account=self.account)
        self._instances[st.id] = st
        return st

    # --- instance operations ------------------------------------------------------------------------------------
    def _get(self, instance_id: int) -> InstanceState:
        st = self._instances.get(instance_id)
        if st is None:
            raise MarketError(404, "no_such_instance", f"Instance {instance_id} not found.")
        return st

    async def instance_rows(self) -> list[dict[str, Any]]:
        """Every live instance's API row, by id."""
        async with self._lock:
            await self._advance()
            now = self.clock.now()
            return [instance_row(self._instances[i], now=now, padded=self.realism.padded_strings) for i in sorted(self._instances)]

    async def list_instances(self, *, select_filters: Any, order_by: Any, limit: Any, after_token: str | None,
                             select_cols: Any) -> dict[str, Any]:
        """The v1 listing envelope (see ``sim/listing.py``)."""
        rows = await self.instance_rows()
        return list_instances(rows, select_filters=select_filters, order_by=order_by, limit=limit,
                              after_token=after_token, select_cols=select_cols)

    async def show_instance(self, instance_id: int) -> dict[str, Any] | None:
        async with self._lock:
            await self._advance()
            st = self._instances.get(instance_id)
            if st is None:
                return None
            st.shows += 1
            if st.shows == 1 and st.fate.null_first_show:   # the row is not readable yet right after the create
                return None
            return instance_row(st, now=self.clock.now(), padded=self.realism.padded_strings)

    async def destroy(self, instance_ids: list[int]) -> None:
        """Destroy instances (all or none: every id must exist); billing stops, the offers are rentable again."""
        async with self._lock:
            await self._advance()
            if self.realism.destroy_404_documented and any(i not in self._instances for i in instance_ids):
                raise MarketError(404, "not_found", "Instance not found")   # the documented body, no id in it
            states = [self._get(i) for i in instance_ids]
            for st in states:
                del self._instances[st.id]
                self._destroyed[st.id] = st
                st.log(self.clock.now(), "Instance destroyed.")
                # Billing ended above; the answer does not wait for the host to go down (Vast's doesn't either),
                # so the caller's clock at the answer is close to the moment billing stopped.
                task = asyncio.create_task(self._stop_host(st), name=f"sim-teardown-{st.id}")
                self._teardowns.add(task)
                task.add_done_callback(self._teardowns.discard)

    async def set_state(self, instance_ids: list[int], state: str) -> None:
        """Stop (``"stopped"``) or start (``"running"``) instances."""
        if state not in ("stopped", "running"):
            raise MarketError(400, "invalid_args", f"Unknown state '{state}': use 'running' or 'stopped'.")
        async with self._lock:
            await self._advance()
            now = self.clock.now()
            states = [self._get(i) for i in instance_ids]
            for st in states:
                if state == "stopped" and st.status is not InstanceStatus.STOPPED:
                    halt(st, now, status=InstanceStatus.STOPPED, why="stopped by the user")
                elif state == "running" and st.status in (InstanceStatus.STOPPED, InstanceStatus.EXITED):
                    if self.account.credit_usd <= 0:
                        raise MarketError(400, "insufficient_credit", "Your credit is exhausted; add credit first.")
                    begin_loading(st, now, pull=True, pulled=self._pulled, account=self.account)
                elif state == "running" and st.status is InstanceStatus.OFFLINE:
                    raise MarketError(400, "host_offline", f"Instance {st.id}'s host is offline.")
            await self._sync_hosts()

    async def set_label(self, instance_ids: list[int], label: str | None) -> None:
        async with self._lock:
            await self._advance()
            for st in [self._get(i) for i in instance_ids]:
                st.label = label

    async def reboot(self, instance_id: int, *, recycle: bool = False) -> None:
        """Restart the container (``recycle``: a fresh container from the image, pulled if not cached)."""
        async with self._lock:
            await self._advance()
            st = self._get(instance_id)
            if st.status in (InstanceStatus.STOPPED, InstanceStatus.OFFLINE):
                raise MarketError(400, "invalid_state", f"Instance {instance_id} is {st.status.value}; start it first.")
            begin_loading(st, self.clock.now(), pull=recycle, pulled=self._pulled, account=self.account)
            await self._sync_hosts()

    async def mark_offline(self, instance_id: int, *, reason: str = "host died") -> None:
        """Hook for hosts that die (``Fault.DIES_MID_RUN``): the instance goes ``offline`` and stops billing GPUs.

        Fits ``SshHostPool(on_host_died=market.mark_offline)``."""
        async with self._lock:
            await self._advance()
            st = self._instances.get(instance_id)
            if st is not None:
                halt(st, self.clock.now(), status=InstanceStatus.OFFLINE, why=f"host offline: {reason}")
                await self._sync_hosts()

    async def charge_traffic(self, instance_id: int, *, down_gb: float, up_gb: float) -> float:
        """Bill an instance's internet traffic (for hosts that move data); returns the list-price amount."""
        async with self._lock:
            await self._advance()
            return charge_bandwidth(self._get(instance_id), down_gb=down_gb, up_gb=up_gb, account=self.account)

    async def prepay(self, instance_id: int, amount_usd: float) -> tuple[float, float]:
        """Move credit into an instance's deposit: (months it covers, discount rate now applied)."""
        async with self._lock:
            await self._advance()
            st = self._get(instance_id)
            if amount_usd <= 0:
                raise MarketError(400, "invalid_args", "The amount must be positive.")
            if amount_usd > self.account.credit_usd:
                raise MarketError(400, "insufficient_credit",
                                  f"Insufficient credit: ${self.account.credit_usd:.2f} available.")
            self.account.credit_usd -= amount_usd
            st.deposit_usd += amount_usd
            timescale = amount_usd / (st.dph_total * HOURS_PER_MONTH)
            st.discount_rate = discount_for(st.deposit_usd / (st.dph_total * HOURS_PER_MONTH))
            return timescale, st.discount_rate

    async def deposit(self, instance_id: int) -> dict[str, Any]:
        async with self._lock:
            await self._advance()
            st = self._get(instance_id)
            return {"success": True, "instance_id": st.id, "refundable_deposit": round(st.deposit_usd, 6),
                    "discount_rate": st.discount_rate, "dph_total": round(st.dph_total, 6)}

    async def change_bid(self, instance_id: int, price: float | None) -> None:
        async with self._lock:
            await self._advance()
            st = self._get(instance_id)
            if st.bid_price is None:
                raise MarketError(400, "not_interruptible", f"Instance {instance_id} is on-demand, not a bid.")
            new_price = st.machine.min_bid if price is None else price
            if new_price < st.machine.min_bid:
                raise MarketError(400, "bid_too_low", f"Bid below the minimum ${st.machine.min_bid:.4f}/hr.")
            st.bid_price = new_price

    # --- logs -------------------------------------------------------------------------------------------------
    async def request_logs(self, instance_id: int, *, tail: int | None, grep: str | None, daemon: bool) -> str:
        """A result token whose text becomes available about a second later (market clock)."""
        async with self._lock:
            await self._advance()
            st = self._get(instance_id)
            if self.realism.container_logs:
                text = render_container_log(daemon_lines=st.daemon_lines, container_lines=st.container_lines,
                                            tail=tail, grep=grep, daemon=daemon)
            else:
                text = render_log(st.log_lines, tail=tail, grep=grep, daemon=daemon, instance_id=st.id)
            return self._results.put(text, now=self.clock.now())

    def put_result(self, text: str) -> str:
        return self._results.put(text, now=self.clock.now())

    def log_result(self, token: str) -> str | None:
        return self._results.get(token, now=self.clock.now())

    # --- account ----------------------------------------------------------------------------------------------
    async def user(self) -> dict[str, Any]:
        async with self._lock:
            await self._advance()
            return self.account.user_json()

    async def transfer_credit(self, *, recipient: str, amount_usd: float) -> str | None:
        async with self._lock:
            await self._advance()
            return self.account.transfer(recipient=recipient, amount_usd=amount_usd, at=self.clock.now())

    async def attach_key(self, instance_id: int, public_key: str) -> int:
        """Add a key to a live instance; a running host that can update its keys gets them at once."""
        async with self._lock:
            st = self._get(instance_id)
            key = validated_public_key(public_key)
            key_id = self.account.allocate_key_id()
            st.attached_keys[key_id] = key
            st.authorized_keys.append(key)
            self._push_keys(st)
            return key_id

    async def detach_key(self, instance_id: int, key_id: int) -> None:
        async with self._lock:
            st = self._get(instance_id)
            key = st.attached_keys.pop(key_id, None)
            if key is None:
                raise MarketError(404, "no_such_key", f"Key {key_id} is not attached to instance {instance_id}.")
            if key in st.authorized_keys:
                st.authorized_keys.remove(key)
            self._push_keys(st)

    def _push_keys(self, st: InstanceState) -> None:
        if st.host is not None and isinstance(self.host_provider, UpdatesKeys):
            self.host_provider.set_authorized_keys(instance_id=st.id, authorized_keys=list(st.authorized_keys))
