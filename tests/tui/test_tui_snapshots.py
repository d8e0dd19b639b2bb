"""How the console looks: each view of part 1 and the Activity view at 80x24, 120x30, 160x48 and 200x60, the rent
and transfer dialogs at the same sizes, and both themes, on a fixed scene.

The scene comes from a seeded simulator read over real HTTP and frozen in time (``snapshot_support``), so a picture
changes only when the console's rendering does. Update the pictures after a deliberate change with
``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` and look at them before committing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from tests.tui.snapshot_support import SIZE, SIZE_IDS, SIZES, Scene, SceneApp, capture_scene, scene_app
from vastui.tui.dialogs.confirm import ConfirmDialog
from vastui.tui.views.activity import ActivityView
from vastui.tui.views.instances import InstancesView
from vastui.tui.views.leaks import LeaksView
from vastui.tui.views.offers import OffersView

pytestmark = pytest.mark.slow  # seconds of real processes or pictures: the full suite runs them


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    return capture_scene(tmp_path_factory.mktemp("scene"))


def test_the_scene_has_what_the_pictures_show(scene: Scene) -> None:
    state = scene.state
    assert state.offers is not None and len(state.offers.offers) > 20
    assert state.offers.knowledge and state.offers.bad_hosts
    assert state.instances is not None and len(state.instances.listing.instances) == 4
    assert state.leaks is not None and state.leak_count == 2 and state.unowned_count == 1
    assert state.user is not None and state.burn_usd_per_h


def shows_the_scene(app: SceneApp, view: str) -> bool:
    """Whether the view holds the scene: rows in its table, or (the account view has no table) the account's
    figures in place of its waiting line."""
    if view == "account":
        return str(app.query_one("#account-body", Static).content).startswith("account ")
    kinds: dict[str, type[OffersView | InstancesView | LeaksView | ActivityView]] = {
        "offers": OffersView, "instances": InstancesView, "leaks": LeaksView, "activity": ActivityView}
    return len(app.query_one(kinds[view]).table.keys_in_order) > 0


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("view", ["offers", "instances", "leaks", "account", "activity"])
def test_each_view_at_each_size(view: str, size: tuple[int, int], scene: Scene,
                                snap_compare: Callable[..., bool]) -> None:
    app = scene_app(scene, view=view)

    async def shown(pilot: Pilot[None]) -> None:
        await app.wait_shown(pilot)
        assert shows_the_scene(app, view)

    assert snap_compare(app, terminal_size=size, run_before=shown)


@pytest.mark.parametrize("view", ["offers", "instances"])
def test_the_light_theme(view: str, scene: Scene, snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = scene_app(scene, theme="light", view=view)
    assert snap_compare(app, terminal_size=SIZE, run_before=app.wait_shown)


async def _wait_for_dialog(app: SceneApp, pilot: Pilot[None]) -> None:
    for _ in range(100):
        if isinstance(app.screen, ConfirmDialog):
            break
        await pilot.pause(0.02)
    await pilot.pause()
    assert isinstance(app.screen, ConfirmDialog)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_the_rent_dialog_for_two_marked_offers(size: tuple[int, int], scene: Scene,
                                               snap_compare: Callable[..., bool]) -> None:
    app = scene_app(scene)

    async def mark_two_and_rent(pilot: Pilot[None]) -> None:
        await app.wait_shown(pilot)
        await pilot.press("space", "down", "space", "r")
        await _wait_for_dialog(app, pilot)
        assert len(app.query_one(OffersView).marked) == 2

    assert snap_compare(app, terminal_size=size, run_before=mark_two_and_rent)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_the_transfer_dialog(size: tuple[int, int], scene: Scene, snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = scene_app(scene, view="account")

    async def transfer(pilot: Pilot[None]) -> None:
        await app.wait_shown(pilot)
        await pilot.press("t", *"ops@example.com", "enter")
        await pilot.pause()
        await pilot.press(*"75", "enter")   # above the typed-amount threshold: the dialog asks for it typed
        await _wait_for_dialog(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=transfer)


def test_readonly_shows_no_mutating_keys(scene: Scene, snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = scene_app(scene, view="instances", readonly=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=app.wait_shown)


def test_help_lists_the_live_keys(scene: Scene, snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = scene_app(scene, view="instances")

    async def help_open(pilot: Pilot[None]) -> None:
        await app.wait_shown(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=help_open)
