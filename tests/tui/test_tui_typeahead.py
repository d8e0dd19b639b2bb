"""Keys typed in one burst land where the operator meant them: a key that moves the focus (``:``, ``/``, a view key)
takes effect before the next key of the burst is routed, so ``:leaks⏎`` or ``/num_gpus=1`` typed fast (or pasted
into a terminal without bracketed paste) neither loses characters nor fires the old widget's bindings."""

from __future__ import annotations

from pathlib import Path

from snapshot_support import SIZE, capture_scene_async, scene_app
from textual import events
from textual.widgets import Input

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
        burst(app, [*chars(":leaks"), ("enter", "\r")])
        await pilot.pause()
        assert app.current_view == "leaks"
        assert not app.query_one("#command-bar", Input).has_class("-open")

        burst(app, [("1", "1"), *chars("/num_gpus>=2")])
        await pilot.pause()
        assert app.current_view == "offers"
        bar = app.query_one("#offers-filter", Input)
        assert bar.has_focus and bar.value == "num_gpus>=2", bar.value
        offers = app.query_one(OffersView)
        assert offers.marked == set(), "no key of the burst reached the table (space marks there)"

        burst(app, [("escape", None), ("space", " ")])
        await pilot.pause()
        assert offers.table.has_focus and len(offers.marked) == 1, "Escape leaves the bar; space then marks"
