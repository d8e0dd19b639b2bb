"""Snapshot tests of the campaign control room at 80x24, 120x30, 160x48 and 200x60: Campaign with approvals pending,
GPUs with one input-bound GPU flagged, Benchmarks mid-race, and the Receipt of a finished campaign. Fixed theme, frozen clock, canned state
(``campaign_canned``), a marketplace that answers the same thing every time: the pictures never change."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import pytest
from textual.pilot import Pilot
from textual.widgets import Markdown

from tests.tui.campaign_canned import NOW, finished_pictures, racing_picture
from tests.tui.snapshot_support import show_state
from vastui.events import EventBus
from vastui.tui.app import VastuiApp
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.tui.state import ConsoleState
from vastui.vast.models import InstanceListing, Offer, User

pytestmark = pytest.mark.slow  # seconds of real processes or pictures: the full suite runs them

SIZES = ((80, 24), (120, 30), (160, 48), (200, 60))
SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]


class FrozenClock:
    def now(self) -> float:
        return NOW

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("a snapshot's clock never moves")


class CannedMarket:
    """Answers the console's three reads with the same values every time; anything else is a bug here."""

    async def search_offers_body(self, body: Mapping[str, object]) -> list[Offer]:
        return []

    async def list_instances(self) -> InstanceListing:
        return InstanceListing(instances=(), is_complete=True)

    async def get_user(self) -> User:
        return User(id=7, username="operator", email=None, fullname=None, credit=250.0, balance=0.0, can_pay=True,
                    has_billing=True)


def console(view: str) -> VastuiApp:
    services = ConsoleServices(market=CannedMarket(), clock=FrozenClock(), bus=EventBus())  # type: ignore[arg-type]
    return VastuiApp(services=services, settings=ConsoleSettings(live=False, theme="dark", initial_view=view))


def scene(make: Callable[[ConsoleState], ConsoleState]) -> Callable[[Pilot[None]], object]:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, VastuiApp)
        while app.state.user is None or app.state.instances is None or app.state.offers is None:
            await pilot.pause(0.02)   # every source answered once (then nothing moves: live=False)
        show_state(app, make(app.state))
        await pilot.pause()
        if app.current_view == "receipt":
            body = app.query_one("#receipt-markdown", Markdown)
            while len(body.children) < 5:   # the receipt's blocks are mounted (parsing runs in a thread)
                await pilot.pause(0.02)
        await pilot.pause()
    return run_before


def racing(state: ConsoleState) -> ConsoleState:
    return dataclasses.replace(state, campaign=racing_picture())


def racing_c2_not_destroyed(state: ConsoleState) -> ConsoleState:
    """The race before c2's destroy went out: its input-bound GPU is still live (and flagged)."""
    picture = racing_picture()
    snapshot = dataclasses.replace(picture.snapshot, instances=tuple(
        dataclasses.replace(i, destroy_sent_at=None) for i in picture.snapshot.instances))
    return dataclasses.replace(state, campaign=dataclasses.replace(picture, snapshot=snapshot))


def finished(state: ConsoleState) -> ConsoleState:
    picture, end, page = finished_pictures()
    return dataclasses.replace(state, campaign=picture, campaign_end=end, receipts=page)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("view", ["campaign", "gpus", "benchmarks"])
def test_mid_race(view: str, size: tuple[int, int], snap_compare: Callable[..., bool]) -> None:
    """Campaign with approvals pending, GPUs with the destroyed c2 greyed below the live ones, Benchmarks with an
    elimination."""
    assert snap_compare(console(view), terminal_size=size, run_before=scene(racing))


def test_gpus_with_one_input_bound_gpu_flagged(snap_compare: Callable[..., bool]) -> None:
    assert snap_compare(console("gpus"), terminal_size=(160, 48), run_before=scene(racing_c2_not_destroyed))


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_receipt_of_a_finished_campaign(size: tuple[int, int], snap_compare: Callable[..., bool]) -> None:
    assert snap_compare(console("receipt"), terminal_size=size, run_before=scene(finished))
