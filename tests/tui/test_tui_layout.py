"""The console fits its terminal and follows the operator's habits: columns that widen for a value that grew and
drop by priority when narrow, j/k/g/G, dialogs whose buttons always show, ``:`` completion, the sort on the header,
a help screen that starts with the view's own keys, a palette with actions, and filters and sorts remembered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Button, Input

from tests.tui.console_support import cells_of, shown_columns, wait_for
from tests.tui.snapshot_support import Scene, SceneApp, capture_scene
from vastui.events import EventBus
from vastui.tui.dialogs.confirm import ConfirmDialog
from vastui.tui.dialogs.help import HelpScreen
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.tui.views.offers import OffersView
from vastui.tui.widgets.keyed_table import ASCENDING, DESCENDING, SQUEEZE_USEFUL, Forms, KeyedTable
from vastui.tui.widgets.throughput_axis import time_axis
from vastui.vast.query import build_search_body

COLUMNS = (("id", "id"), ("mem", "mem MiB"), ("note", "note"), ("extra", "extra"))


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield KeyedTable(columns=COLUMNS, drop_order=("extra", "note"), id="t")


def cells(i: int, mem: str = "-") -> tuple[str, ...]:
    return (str(i), mem, "n" * 30, "x" * 30)


async def test_a_value_that_grows_widens_its_column_and_is_never_cut() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync({"1": cells(1)}, ["1"])
        await pilot.pause()
        table.sync({"1": cells(1, "12,740 / 16,384")}, ["1"])
        await pilot.pause()
        mem = next(c for c in table.columns.values() if c.key.value == "mem")
        assert mem.get_render_width(table) >= len("12,740 / 16,384") + 2


async def test_columns_drop_in_their_order_when_narrow_and_come_back_when_wide() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync({str(i): cells(i, "18,000 / 24,564") for i in range(5)}, [str(i) for i in range(5)])
        await pilot.pause()
        assert shown_columns(table) == ("id", "mem", "note", "extra")
        await pilot.resize_terminal(70, 20)
        await wait_for(pilot, lambda: shown_columns(table) == ("id", "mem", "note"), what="extra dropped first")
        await pilot.resize_terminal(40, 20)
        await wait_for(pilot, lambda: shown_columns(table) == ("id", "mem"), what="note dropped next")
        assert table.get_row("3") == ["3", "18,000 / 24,564"]
        await pilot.resize_terminal(120, 20)
        await wait_for(pilot, lambda: len(shown_columns(table)) == 4, what="every column back")
        assert table.get_row("3")[3] == "x" * 30


async def test_j_k_g_and_capital_g_move_the_cursor() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync({str(i): cells(i) for i in range(10)}, [str(i) for i in range(10)])
        table.focus()
        await pilot.press("j", "j")
        assert table.cursor_key == "2"
        await pilot.press("k")
        assert table.cursor_key == "1"
        await pilot.press("G")
        assert table.cursor_key == "9"
        await pilot.press("g")
        assert table.cursor_key == "0"


def test_idle_gaps_are_cut_from_the_time_axis_and_labelled_in_real_minutes() -> None:
    measured = [1.0, 1.5, 2.0, 2.5, 17.5, 18.0, 18.5]   # a 15-minute wait for an approval in the middle
    axis = time_axis(measured)
    assert len(axis.cuts) == 1
    assert axis.x(17.5) - axis.x(2.5) == pytest.approx(0.5)   # the gap became one ordinary step
    assert axis.x(18.5) - axis.x(17.5) == pytest.approx(1.0)  # measured stretches keep their length
    positions, labels = axis.ticks()
    assert labels == ["1", "2.5", "17.5", "18.5"] and positions == sorted(positions)
    assert time_axis([1.0, 1.5, 2.0]).cuts == ()


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    return capture_scene(tmp_path_factory.mktemp("scene"))


def scene_console(scene: Scene, *, view: str = "offers", memory: Path | None = None,
                  readonly: bool = False) -> SceneApp:
    from tests.tui.snapshot_support import FrozenClock, SilentMarket

    settings = ConsoleSettings(theme="dark", initial_view=view, live=False, readonly=readonly,
                               view_memory_path=memory)
    services = ConsoleServices(market=SilentMarket(), clock=FrozenClock(scene.now), bus=EventBus())
    return SceneApp(scene, services=services, settings=settings)


@pytest.mark.parametrize("size", [(80, 24), (60, 16)])
async def test_the_rent_dialog_shows_its_buttons_on_a_small_terminal(scene: Scene, size: tuple[int, int]) -> None:
    app = scene_console(scene)
    async with app.run_test(size=size) as pilot:
        await app.wait_shown(pilot)
        await pilot.press("space", "down", "space", "r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the rent dialog")
        await pilot.pause()
        screen = app.screen.region
        for button_id in ("#cancel", "#confirm"):
            region = app.screen.query_one(button_id, Button).region
            assert region.height >= 3 and screen.contains_region(region), (button_id, region, screen)


async def test_colon_completes_a_view_name_with_tab(scene: Scene) -> None:
    app = scene_console(scene)
    async with app.run_test(size=(120, 30)) as pilot:
        await app.wait_shown(pilot)
        await pilot.press("colon", *"lea")
        bar = app.query_one("#command-bar", Input)
        await wait_for(pilot, lambda: bar._suggestion == "leaks", what="the completion of 'lea'")
        await pilot.press("tab")
        assert bar.value == "leaks" and bar.has_focus
        await pilot.press("enter")
        assert app.current_view == "leaks"
        await pilot.press("colon", *"acc", "enter")   # a prefix that names one view alone is enough
        assert app.current_view == "account"


async def test_help_starts_with_the_views_own_keys_and_explains_its_columns(scene: Scene) -> None:
    app = scene_console(scene, view="offers")
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_shown(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help screen")
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        headings = [s.heading for s in screen.sections]
        assert headings == ["Offers keys", "In every table", "Everywhere", "Columns"]
        assert "Rent marked" in dict(screen.sections[0].rows).values()
        assert "Cursor up" not in screen.text   # the table's twenty generic keys are one short section
        assert "measured $/1k" in dict(screen.sections[3].rows)


async def test_the_palette_offers_actions_and_hides_mutating_ones_when_read_only(scene: Scene) -> None:
    for readonly in (False, True):
        app = scene_console(scene, readonly=readonly)
        async with app.run_test(size=(120, 30)) as pilot:
            await app.wait_shown(pilot)
            titles = {c.title for c in app.get_system_commands(app.screen)}
            assert {"Refresh", "Open logs", "View: Activity"} <= titles
            mutating = {"Approve the selected request", "Rent marked offers", "Destroy marked instances"}
            assert (mutating & titles) == (set() if readonly else mutating)


async def test_the_palettes_rent_asks_for_confirmation(scene: Scene) -> None:
    app = scene_console(scene)
    async with app.run_test(size=(160, 48)) as pilot:
        await app.wait_shown(pilot)
        rent = next(c for c in app.get_system_commands(app.screen) if c.title == "Rent marked offers")
        rent.callback()
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the confirmation")


async def test_sort_shows_on_the_header_and_filter_and_sort_survive_a_restart(scene: Scene, tmp_path: Path) -> None:
    memory = tmp_path / "config" / "console-views.json"
    app = scene_console(scene, memory=memory)
    async with app.run_test(size=(160, 48)) as pilot:
        await app.wait_shown(pilot)
        await pilot.press("s", "s", "S")        # id, then GPU, then GPU reversed
        table = app.query_one(OffersView).table
        labels = [str(c.label) for c in table.columns.values()]
        assert f"GPU {DESCENDING}" in labels and not any(ASCENDING in label for label in labels)
        await pilot.press("slash", *"num_gpus>=2", "enter")
        await wait_for(pilot, lambda: app.query_one(OffersView).query_error is None and memory.exists(),
                       what="the filter applied and remembered")
    kept = json.loads(memory.read_text())
    assert kept == {"views": {"offers": {"filter": "num_gpus>=2", "sort": "gpu", "reverse": True}}}

    again = scene_console(scene, memory=memory)
    async with again.run_test(size=(160, 48)) as pilot:
        await again.wait_shown(pilot)
        view = again.query_one(OffersView)
        assert (view.sort_column, view.sort_reverse) == ("gpu", True)
        assert view.query_one("#offers-filter", Input).value == "num_gpus>=2"
        settings = again.settings
        assert again.offers_body == build_search_body("num_gpus>=2", order=settings.offers_order,
                                                      limit=settings.offers_limit)


class SqueezeApp(App[None]):
    def compose(self) -> ComposeResult:
        yield KeyedTable(columns=COLUMNS, drop_order=("extra",), squeeze="note", id="t")


async def test_the_squeeze_column_shortens_with_an_ellipsis_when_dropping_is_not_enough() -> None:
    app = SqueezeApp()
    async with app.run_test(size=(50, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync({"1": cells(1, "18,000 / 24,564")}, ["1"])
        await pilot.pause()
        assert shown_columns(table) == ("id", "mem", "note")
        note = str(table.get_row("1")[2])
        assert note.endswith("…") and len(note) < 30
        assert table.virtual_size.width <= table.size.width   # nothing runs off the right edge
        await pilot.resize_terminal(120, 20)
        await wait_for(pilot, lambda: len(shown_columns(table)) == 4, what="every column back")
        assert str(table.get_row("1")[2]) == "n" * 30


async def test_a_squeezed_verdict_shows_its_longest_form_that_fits_whole_never_cut_mid_word() -> None:
    app = SqueezeApp()
    verdict = Forms("LEAK: labelled by a campaign this store does not know", ("LEAK: unknown campaign", "LEAK"))
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync({"1": ("1", "18,000 / 24,564", verdict, "x" * 30)}, ["1"])
        await wait_for(pilot, lambda: shown_columns(table) == ("id", "mem", "note"), what="extra dropped")
        assert str(table.get_row("1")[2]) == "LEAK: unknown campaign"
        await pilot.resize_terminal(40, 20)
        await wait_for(pilot, lambda: str(table.get_row("1")[2]) != "LEAK: unknown campaign", what="squeezed more")
        assert str(table.get_row("1")[2]) == "LEAK"
        await pilot.resize_terminal(160, 20)
        await wait_for(pilot, lambda: len(shown_columns(table)) == 4, what="every column back")
        assert str(table.get_row("1")[2]) == str(verdict), "whole again where there is room"
        assert cells_of(table, "1") == ("1", "18,000 / 24,564", verdict.full, "x" * 30)


class WideSqueezeApp(App[None]):
    def compose(self) -> ComposeResult:
        yield KeyedTable(columns=COLUMNS, drop_order=("note", "extra"), squeeze="note", id="t")


async def test_on_a_wide_terminal_a_column_goes_before_the_free_text_is_cut() -> None:
    # 160 columns: the free text (140 cells) and the extra column (30) do not fit together; the extra column goes,
    # though it comes after the free text in the drop order and squeezing would leave far more than SQUEEZE_USEFUL
    app = WideSqueezeApp()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync({"1": ("1", "-", "n" * 140, "x" * 30)}, ["1"])
        await wait_for(pilot, lambda: "extra" not in shown_columns(table), what="the extra column dropped")
        assert shown_columns(table) == ("id", "mem", "note")
        assert str(table.get_row("1")[2]) == "n" * 140
        await pilot.resize_terminal(100, 20)      # narrow: the free text is squeezed first, as before
        await wait_for(pilot, lambda: "extra" in shown_columns(table), what="the extra column back")
        note = str(table.get_row("1")[2])
        assert note.endswith("…") and len(note) >= SQUEEZE_USEFUL
