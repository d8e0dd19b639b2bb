"""Keys typed in one burst land where the operator meant them: a key that moves the focus (``:``, ``/``, a view key)
takes effect before the next key of the burst is routed, so ``:leaks⏎`` or ``/num_gpus=1`` typed fast (or pasted
into a terminal without bracketed paste) neither loses characters nor fires the old widget's bindings."""

from __future__ import annotations

from pathlib import Path

from textual import events
from textual.widgets import Input

from tests.tui.console_support import wait_for
from tests.tui.snapshot_support import SIZE, capture_scene_async, scene_app
from vastui.tui.views.offers import OffersView


def burst(app: object, keys: list[tuple[str, str | None]]) -> None:
    """Post every key at once, as a terminal delivers a fast burst: nothing runs between them."""
    for key, character in keys:
        app.post_message(events.Key(key, character))  # type: ignore[attr-defined]


def chars(text: str) -> list[tuple[str, str | None]]:
    names = {":": "colon", "/": "slash", "=": "equals_sign", " ": "space", ">": "greater_than_sign"}
    return [(names.get(c, c), c) for c in text]


async def test_a_burst_of_keys_switches_views_and_fills_the_filter(tmp_path: Path) -> None:
    scene = await capture_scene_async(tmp_path)
    app = scene_app(scene)
    async with app.run_test(size=SIZE) as pilot:
        await app.wait_shown(pilot)
        command_bar = app.query_one("#command-bar", Input)
        burst(app, [*chars(":leaks"), ("enter", "\r")])
        await wait_for(pilot, lambda: app.current_view == "leaks", what="the leaks view", deadline_s=10)
        await wait_for(pilot, lambda: not command_bar.has_class("-open"), what="the command bar to close")

        burst(app, [("1", "1"), *chars("/num_gpus>=2")])
        bar = app.query_one("#offers-filter", Input)
        await wait_for(pilot, lambda: len(bar.value) >= len("num_gpus>=2"), what="the typed filter", deadline_s=10)
        assert app.current_view == "offers"
        assert bar.has_focus and bar.value == "num_gpus>=2", bar.value
        offers = app.query_one(OffersView)
        assert offers.marked == set(), "no key of the burst reached the table (space marks there)"

        burst(app, [("escape", None), ("space", " ")])
        await wait_for(pilot, lambda: offers.table.has_focus and (bool(offers.marked) or bar.value != "num_gpus>=2"),
                       what="Escape and space handled", deadline_s=10)
        assert len(offers.marked) == 1 and bar.value == "num_gpus>=2", "Escape leaves the bar; space then marks"
