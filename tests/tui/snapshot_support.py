"""A fixed scene for the console's snapshot tests: a seeded simulator, read over real HTTP, frozen in time.

``capture_scene`` builds a seeded simulated marketplace on a clock that only moves when told, rents a few instances
the way different owners would (a running campaign's, a finished campaign's, one nobody owns, one stopped),
measures one workload on one host and marks another host bad in a real SQLite store, then reads everything back
through the real client over the ASGI transport — offers, instances, account, leak report — into one
``ConsoleState``. The console in a snapshot is given that state (``show_state``) and a market that never
answers, so nothing can change between two runs of the same test: the pictures depend on the seed alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from textual.pilot import Pilot

from vastui.approval import Action, Approval, ApprovalRequest, AuditKind, AuditRecord, instance_target, offer_target
from vastui.campaign.watch import find_leaks
from vastui.config import Secret
from vastui.events import EventBus
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.instance import CreateRequest
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.store import RunStatus, SqliteStore
from vastui.tui.app import VastuiApp
from vastui.tui.health import Source, SourceHealth
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.tui.state import ActivityPage, ConsoleState, InstancePage, OfferPage
from vastui.tui.widgets.statusbar import StatusBar
from vastui.vast.client import HttpVastClient
from vastui.vast.query import build_search_body

# A unit test of this part's mechanics: the kind simulator, asked for by name (every realism rule off;
# the rules themselves are tested in tests/vast/ and end to end by the demo, chaos and rate-limit campaigns).
KIND = Realism.kind()


KEY = "snapshot-sim-key-24680"
START = 1_796_000_000.0            # a fixed moment: ages and deadlines are the same in every run
SEED = 11
DIGEST = "sha256:" + "5" * 64
SIZE = (160, 48)
SIZES = ((80, 24), (120, 30), (160, 48), (200, 60))      # the size classes every view is pictured at
SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]


class FrozenClock:
    """Time that moves only when ``advance`` is called; sleeping on it waits for real (nothing in a scene does)."""

    def __init__(self, start: float = START) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class SilentMarket:
    """A marketplace that never answers: the scene's state is all the console will ever have."""

    def __getattr__(self, name: str) -> Any:
        async def never(*args: object, **kwargs: object) -> object:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")
        return never


@dataclass(frozen=True)
class Scene:
    state: ConsoleState
    now: float
    leaked_id: int
    stopped_id: int


def _grant(action: Action, target: str) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="snapshot scene"), granted_by="test",
                    granted_at=START)


async def _rent(market: Market, label: str, *, skip: int = 0) -> tuple[int, int]:
    free = [m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10]
    machine = sorted(free, key=lambda m: m.offer_id)[skip]
    body = {"image": "pytorch/pytorch", "disk": 10, "label": label, "runtype": "ssh"}
    state = await market.create_instance(machine.offer_id, CreateRequest.from_body(body))
    return state.id, machine.offer_id


async def _own(store: SqliteStore, market: Market, campaign_id: str, *, finished: bool, deadline_at: float) -> int:
    await store.create_campaign(campaign_id=campaign_id, manifest_digest=DIGEST, created_at=START, phase="measuring",
                                deadline_at=deadline_at)
    label = f"vastui-{campaign_id}-c0-1"
    instance_id, offer_id = await _rent(market, label)
    intent = await store.record_intent(campaign_id=campaign_id, offer_id=offer_id, label=label, at=START,
                                       deadline_at=deadline_at)
    await store.bind_intent(intent_id=intent.intent_id, instance_id=instance_id, at=START)
    if finished:
        await store.finish_campaign(campaign_id=campaign_id, phase="finished", at=START)
    return instance_id


async def _knowledge(store: SqliteStore, offers: list[Any]) -> None:
    """Three measured runs on the first offer's host; the second offer's host marked bad."""
    first, second = offers[0], offers[1]
    await store.create_campaign(campaign_id="cwarm", manifest_digest=DIGEST, created_at=START - 9000, phase="done")
    for throughput in (100.0, 120.0, 110.0):
        run = await store.start_run(campaign_id="cwarm", instance_id=None, machine_id=first.machine_id,
                                    gpu_name=first.gpu_name, num_gpus=first.num_gpus, workload_digest=DIGEST,
                                    variant_json="{}", started_at=START - 7300)
        await store.finish_run(run_id=run.run_id, status=RunStatus.OK, at=START - 7200,
                               throughput_units_per_s=throughput)
    await store.record_bad_host(machine_id=second.machine_id, reason="wrong output digest", evidence_json="{}",
                                recorded_at=START - 3600, expires_at=START + 6 * 86400)


async def _audit(store: SqliteStore, *, rented: int, stopped: int) -> None:
    """What the Activity view shows: a rent approved and sent, one refused, one expired, a stop sent and done."""
    records = [
        AuditRecord(at=START + 5, kind=AuditKind.APPROVAL, action=Action.CREATE_INSTANCE, target=offer_target(rented),
                    approval_id="ap-1", granted_by="console dialog", outcome="rent offer: 1x RTX 4090 at $0.404/h"),
        AuditRecord(at=START + 6, kind=AuditKind.SENDING, action=Action.CREATE_INSTANCE, target=offer_target(rented),
                    approval_id="ap-1", granted_by="console dialog", outcome="create_instance sending"),
        AuditRecord(at=START + 8, kind=AuditKind.CALL, action=Action.CREATE_INSTANCE, target=offer_target(rented),
                    approval_id="ap-1", granted_by="console dialog", outcome="ok: instance created"),
        AuditRecord(at=START + 60, kind=AuditKind.DECLINED, action=Action.CREATE_INSTANCE,
                    target=offer_target(rented + 1), approval_id=None, granted_by=None,
                    outcome="rent for candidate c3 — refused: by the operator",
                    campaign_id="crun"),
        AuditRecord(at=START + 1200, kind=AuditKind.DECLINED, action=Action.CREATE_INSTANCE,
                    target=offer_target(rented + 2), approval_id=None, granted_by=None,
                    outcome="rent for candidate r1 — expired: no answer in 15m "
                    "(counts as refused)", campaign_id="crun"),
        AuditRecord(at=START + 1810, kind=AuditKind.APPROVAL, action=Action.STOP_INSTANCE,
                    target=instance_target(stopped), approval_id="ap-2", granted_by="test",
                    outcome="stop the gone campaign's instance"),
        AuditRecord(at=START + 1811, kind=AuditKind.CALL, action=Action.STOP_INSTANCE, target=instance_target(stopped),
                    approval_id="ap-2", granted_by="test", outcome="ok"),
    ]
    for record in records:
        await store.record_audit(record)


async def capture_scene_async(tmp_path: Path) -> Scene:
    """The scene, from inside a running event loop."""
    clock = FrozenClock()
    market = build_market(SEED, clock=clock, api_key=KEY, n_machines=120, initial_credit_usd=750.0,
                          realism=KIND)
    store = await SqliteStore.open(tmp_path / "scene.sqlite3")
    client = HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                            transport=httpx.ASGITransport(app=create_app(market)))
    try:
        store.act_as("ana", host="ws-3")   # a fixed writer: the pictures never show this machine's name
        await store.save_manifest(digest=DIGEST, name="resnet", toml_text="[workload]\n", stored_at=START)
        await _own(store, market, "crun", finished=False, deadline_at=START + 3 * 3600)
        await _own(store, market, "cdone", finished=True, deadline_at=START + 3600)
        unowned, _ = await _rent(market, "my-notebook")
        stopped, _ = await _rent(market, "vastui-gone-c2-7")
        clock.advance(1800)                       # every instance has loaded by now
        await market.refresh()
        await client.stop_instance(stopped, approval=_grant(Action.STOP_INSTANCE, instance_target(stopped)))
        clock.advance(600)
        await market.refresh()
        offers = await client.search_offers_body(build_search_body("", order="score-", limit=60))
        await _knowledge(store, offers)
        await _audit(store, rented=offers[0].id, stopped=stopped)
        activity = ActivityPage(records=tuple(await store.latest_audit_records(limit=100)), at=clock.now())
        now = clock.now()
        knowledge = {(k.machine_id, k.gpu_name, k.num_gpus): k for k in await store.host_knowledge(
            workload_digest=DIGEST, machine_ids=sorted({o.machine_id for o in offers}))}
        bad = {b.machine_id: b for b in await store.active_bad_hosts(now=now)}
        listing = await client.list_instances()
        intents = {o.intent.instance_id: o.intent for o in await store.owned_instances()
                   if o.intent.instance_id is not None}
        user = await client.get_user()
        leaks = await find_leaks(market=client, store=store, clock=clock)
        health = {s: SourceHealth(source=s, stale_after_s=120.0).ok(now - 4.0) for s in Source}
        state = ConsoleState(offers=OfferPage(offers=tuple(offers), knowledge=knowledge, bad_hosts=bad, at=now),
                             instances=InstancePage(listing=listing, intents=intents, at=now), user=user,
                             leaks=leaks, health=health, activity=activity)
        leaked = next(lk.instance_id for lk in leaks.leaked)
        del unowned
        return Scene(state=state, now=now, leaked_id=leaked, stopped_id=stopped)
    finally:
        await client.aclose()
        await store.close()
        await market.aclose()


def capture_scene(tmp_path: Path) -> Scene:
    """The scene, read from a fresh seeded simulator (runs its own event loop: call it from a plain test)."""
    return asyncio.run(capture_scene_async(tmp_path))


def show_state(app: VastuiApp, state: ConsoleState) -> None:
    """Show ``state`` as if the console's sources had delivered it (canned data for a picture)."""
    app.state = state
    app.render_current()


class SceneApp(VastuiApp):
    """The console, shown ``scene`` as soon as it mounts (its own sources never answer)."""

    def __init__(self, scene: Scene, *, services: ConsoleServices, settings: ConsoleSettings) -> None:
        super().__init__(services=services, settings=settings)
        self.scene = scene

    def on_mount(self) -> None:  # Textual calls VastuiApp.on_mount too (handlers run along the whole MRO)
        self.call_after_refresh(show_state, self, replace(self.scene.state))

    async def wait_shown(self, pilot: Pilot[None]) -> None:
        """Until the current view has drawn the scene (a picture of an empty console would prove nothing)."""
        for _ in range(200):
            if self.state.offers is not None and "credit $" in self.query_one(StatusBar).plain_text:
                break
            await pilot.pause(0.02)
        else:
            raise AssertionError("the scene was never shown")
        await pilot.pause()


def scene_app(scene: Scene, *, theme: str = "dark", view: str = "offers", readonly: bool = False) -> SceneApp:
    """A console that shows ``scene`` and nothing else, on a frozen clock."""
    settings = ConsoleSettings(theme=theme, initial_view=view, live=False, readonly=readonly)
    services = ConsoleServices(market=SilentMarket(), clock=FrozenClock(scene.now), bus=EventBus())
    return SceneApp(scene, services=services, settings=settings)
