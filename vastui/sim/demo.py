"""The demo: a whole campaign on the embedded simulated marketplace, over real HTTP and real SSH on loopback.

The simulator runs in this process on a scaled clock (an hour of billing per simulated minute by default); the
console side is built exactly as against Vast.ai — ``HttpVastClient`` over a socket, ``SshRunner``, ``SqliteStore``
— and approvals come from the demo's own printed plan, as ``--approve-plan`` would give them.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from vastui.approval import Action, Approval, ApprovalRequest, Approver, AuditKind, AuditRecord
from vastui.bench.manifest import Manifest, load_manifest
from vastui.bench.receipt import Receipt
from vastui.campaign.broker import DEFAULT_EXPIRY_S
from vastui.campaign.engine import CampaignOutcome
from vastui.campaign.handle import CampaignHandle, start_campaign
from vastui.campaign.plan import Plan, render_plan
from vastui.campaign.session import CampaignServices, new_campaign_id, plan_campaign
from vastui.clock import Clock, ScaledClock
from vastui.config import Redactor, Secret, without_password
from vastui.events import Event, EventBus
from vastui.remote.runner import SshRunner
from vastui.sim.chaos import Chaos
from vastui.sim.factory import DEMO_API_KEY, build_market_with_hosts
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.sim.redraw import LaterMarket
from vastui.sim.server import SimServer
from vastui.store import Store, open_store
from vastui.vast.client import HttpVastClient, ssh_key_target

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
DEMO_MANIFEST = EXAMPLES_DIR / "resnet.toml"
DEFAULT_TIME_SCALE = 120.0


@dataclass(frozen=True, slots=True)
class DemoResult:
    plan: Plan
    receipt: Receipt
    outcome: CampaignOutcome
    instances_left: int
    db: Path | str            # the store: a SQLite file, or a PostgreSQL URL (``db_url``)

    @property
    def db_path(self) -> Path:
        return _sqlite_file(self.db)

    @property
    def db_shown(self) -> str:
        return str(self.db) if isinstance(self.db, Path) else without_password(self.db)


def _sqlite_file(db: Path | str) -> Path:
    """The demo's SQLite file; a demo on a team's PostgreSQL store has none (ValueError)."""
    if not isinstance(db, Path):
        raise ValueError("this demo's store is a PostgreSQL database, not a SQLite file")
    return db


def operator_key(directory: Path) -> Path:
    """An ed25519 key for the demo operator (the real console uses ~/.ssh/id_ed25519 or the agent)."""
    path = directory / "demo_id_ed25519"
    if not path.exists():
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(str(path))
        key.write_public_key(str(path) + ".pub")
    return path


@contextlib.asynccontextmanager
async def demo_world(*, seed: int, time_scale: float, work_dir: Path, chaos: Chaos | None = None,
                     api_key: str = DEMO_API_KEY, realism: Realism | None = None,
                     prepare: Callable[[Market], Awaitable[None]] | None = None, later: LaterMarket | None = None,
                     ) -> AsyncIterator[tuple[SimServer, ScaledClock]]:
    """The market served on loopback; ``prepare`` sees it before it serves (tests: an account's other instances).
    With ``later``, the market is that re-drawn world, opening at its time (sim/redraw.py)."""
    clock = ScaledClock(scale=time_scale, origin=later.clock_origin if later is not None else None)
    if later is None:
        market, pool = build_market_with_hosts(seed, clock=clock, hosts_dir=work_dir / "hosts", chaos=chaos,
                                               api_key=api_key, realism=realism)
    else:
        market, pool = build_market_with_hosts(seed, clock=clock, hosts_dir=work_dir / "hosts", chaos=chaos,
                                               api_key=api_key, realism=realism, world=later.world,
                                               first_instance_id=later.first_instance_id)
    try:
        if prepare is not None:
            await prepare(market)
        async with SimServer(market) as server:
            yield server, clock
    finally:
        await market.aclose()
        await pool.close()


@dataclass(slots=True)
class DemoSession:
    """The embedded market with the demo campaign planned and not started: ``start`` it (approved up front, or
    waiting for a view's approvals). ``market`` is the simulator itself (hidden truth, billing, request log) — for
    tests and the console's demo; the campaign sees only the HTTP API and the SSH hosts."""

    services: CampaignServices
    manifest: Manifest
    plan: Plan
    market: Market
    client: HttpVastClient
    db: Path | str            # the store: a SQLite file, or a PostgreSQL URL (``db_url``)
    store: Store              # the campaign's store, as the console reads it too

    @property
    def db_path(self) -> Path:
        return _sqlite_file(self.db)

    @property
    def plan_text(self) -> str:
        return render_plan(self.plan)

    def start(self, *, plan_approved: bool = False, expiry_s: float = DEFAULT_EXPIRY_S,
              operator: Approver | None = None, wall: Clock | None = None) -> CampaignHandle:
        """Start the campaign. Without ``plan_approved`` every rent waits for ``handle.broker`` to be answered
        (``approve``, ``refuse``, ``approve_plan``) or the ``operator``, for ``expiry_s`` seconds of wall time
        (``wall``; the simulator's scaled clock does not shorten it)."""
        return start_campaign(self.services, manifest=self.manifest, plan=self.plan, plan_approved=plan_approved,
                              plan_approved_by="demo plan approval", operator=operator, expiry_s=expiry_s,
                              wall=wall)

    async def instances_left(self) -> int:
        """How many instances the marketplace lists (the demo must end with zero)."""
        return len((await self.client.list_instances()).instances)


@contextlib.asynccontextmanager
async def open_demo(*, seed: int, time_scale: float = DEFAULT_TIME_SCALE, data_dir: Path | None = None,
                    manifest_path: Path = DEMO_MANIFEST, chaos: Chaos | None = None,
                    api_key: str = DEMO_API_KEY, realism: Realism | None = None,
                    prepare: Callable[[Market], Awaitable[None]] | None = None, later: LaterMarket | None = None,
                    db_path: Path | None = None, db_url: str | None = None,
                    operator: str = "demo") -> AsyncIterator[DemoSession]:
    """Serve a seeded simulated market, connect the real client, SSH runner and store to it, plan the demo
    campaign; close everything on exit (a started campaign should be awaited or aborted before that).
    ``api_key`` is the key the market accepts and the client sends (tests use a recognisable fake one);
    ``realism`` how hard the market is (``sim/realism.py``); ``prepare`` sees the market before anything else.
    A repeat campaign passes ``later`` (the same market re-drawn later, ``sim/redraw.py``) and the earlier
    campaign's ``db_path``, so it plans with what the earlier one measured. ``db_url``: the campaign's store on a
    PostgreSQL server instead (a team's shared store), its audit journal in ``data_dir``."""
    manifest = load_manifest(manifest_path)
    with tempfile.TemporaryDirectory(prefix="vastui-demo-") as tmp:
        work = Path(tmp)
        # One store per demo run: each demo is a fresh simulated world whose instance ids start over.
        db_path = db_path or (data_dir or work) / "demo" / f"demo-seed{seed}-{int(time.time())}.sqlite3"
        async with demo_world(seed=seed, time_scale=time_scale, work_dir=work, chaos=chaos, api_key=api_key,
                              realism=realism, prepare=prepare, later=later) as (server, clock):
            key_path = operator_key(work)
            secret = Secret(api_key)
            store = await open_store(db_url or db_path, data_dir=data_dir or work, operator=operator)
            store.register_secret(secret)
            try:
                async with HttpVastClient(base_url=server.url, api_key=secret, clock=clock, audit=store) as client:
                    await _register_key(client, key_path, clock, store)
                    runner = SshRunner(known_hosts=work / "known_hosts", client_keys=[key_path], use_agent=False,
                                       clock=clock, retry_interval_s=5.0, reconnect_deadline_s=120.0)
                    services = CampaignServices(market=client, executor=runner, store=store, clock=clock,
                                                bus=EventBus(), redact=Redactor([secret]), poll_s=10.0,
                                                teardown_poll_s=5.0)
                    plan = await plan_campaign(services, manifest=manifest, campaign_id=new_campaign_id())
                    yield DemoSession(services, manifest, plan, server.market, client, db_url or db_path, store)
            finally:
                await store.close()


async def run_demo(*, seed: int, time_scale: float = DEFAULT_TIME_SCALE, data_dir: Path | None = None,
                   manifest_path: Path = DEMO_MANIFEST, on_plan: Callable[[str], None] = lambda _t: None,
                   on_event: Callable[[Event], None] = lambda _e: None,
                   on_market: Callable[[Market], Awaitable[None]] | None = None,
                   chaos: Chaos | None = None,
                   on_start: Callable[[CampaignHandle], None] = lambda _h: None,
                   realism: Realism | None = None) -> DemoResult:
    """Run the demo campaign headless, its printed plan approved as a whole. ``on_event`` sees every event in
    order; ``on_market`` sees the simulated market (hidden truth, billing, request log) after the campaign and
    before the world is closed — the tests judge the campaign with it; ``on_start`` gets the campaign's handle as
    soon as it starts."""
    async with open_demo(seed=seed, time_scale=time_scale, data_dir=data_dir, manifest_path=manifest_path,
                         chaos=chaos, realism=realism) as demo:
        on_plan(demo.plan_text)
        stop = demo.services.bus.listen(on_event)
        try:
            handle = demo.start(plan_approved=True)
            on_start(handle)
            result = await handle.result(abort_if_cancelled="the demo was interrupted")
        finally:
            stop()
        left = await demo.instances_left()
        if on_market is not None:
            await on_market(demo.market)
        return DemoResult(demo.plan, result.receipt, result.outcome, left, demo.db)


async def _register_key(client: HttpVastClient, key_path: Path, clock: ScaledClock, audit: Store) -> None:
    public = (key_path.with_name(key_path.name + ".pub")).read_text(encoding="utf-8").strip()
    request = ApprovalRequest(action=Action.CREATE_SSH_KEY, target=ssh_key_target(public),
                              summary="register the demo operator's SSH public key")
    approval = Approval(request, granted_by="demo", granted_at=clock.now())
    await audit.record_audit(AuditRecord(at=clock.now(), kind=AuditKind.APPROVAL, action=request.action,
                                         target=request.target, approval_id=approval.approval_id,
                                         granted_by=approval.granted_by, outcome=request.summary))
    await client.create_ssh_key(public, approval=approval)
