"""What one live refresh of the console's tables costs, against clearing and reloading them.

What it measures, in a headless Textual app at 160x50:
- **offers**: one refresh of the offers table at 1,000 / 5,000 / 10,000 offers, where 5 % of the offers changed
  their price, 1 % vanished and 1 % are new — rows formatted by the offers view (``OffersView._cells``), then
  ``KeyedTable.sync`` (keyed diff, changed cells updated in place inside one batch), then the repaint;
- **instances**: one refresh of a 500-instance table where every running instance's accrued cost moved (it does,
  every refresh) and 2 % changed status.

The baseline, in the same app and the same run, interleaved: the same rows into a plain ``DataTable`` by
``clear()`` + ``add_rows`` (what a table does when it reloads; it also loses the cursor and the scroll position).
The clock stops when Textual is idle again after the change, i.e. once the screen has been composited; the headless
driver writes nothing to a terminal, so the terminal's own drawing time is not in either figure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Sequence

from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import DataTable
from timing import Comparison, parse_options, ratio_line

from vastui.clock import WallClock
from vastui.sim.factory import build_market
from vastui.sim.offers import search_offers
from vastui.tui.views.instances import COLUMNS as INSTANCE_COLUMNS
from vastui.tui.views.offers import COLUMNS as OFFER_COLUMNS
from vastui.tui.views.offers import OffersView
from vastui.tui.widgets.keyed_table import Cell, KeyedTable
from vastui.vast.models import Offer

Rows = dict[str, tuple[Cell, ...]]


class TablesApp(App[None]):
    """One keyed table (ours) and one plain table (the baseline), shown one at a time."""

    def __init__(self, columns: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.columns = tuple(columns)

    def compose(self) -> ComposeResult:
        yield KeyedTable(columns=self.columns, id="ours")
        plain: DataTable[Cell] = DataTable(id="plain", cursor_type="row", zebra_stripes=True)
        yield plain

    def on_mount(self) -> None:
        plain = self.query_one("#plain", DataTable)
        for key, label in self.columns:
            plain.add_column(label, key=key)

    def show(self, which: str) -> None:
        for name in ("ours", "plain"):
            self.query_one(f"#{name}").display = name == which


def world_offers(count: int, *, seed: int = 3) -> list[Offer]:
    """``count`` offers shaped like the simulator's (its world's offers, repeated under new ids)."""
    clock = WallClock()
    market = build_market(seed, clock=clock, n_machines=360)
    rows = search_offers(((m, False) for m in market.world.machines), {"limit": 10_000}, now=clock.now())
    base = [Offer.from_api(row) for row in rows]
    return [dataclasses.replace(base[i % len(base)], id=30_000_000 + i) for i in range(count)]


def next_refresh(offers: list[Offer], rng: random.Random, *, next_id: int) -> list[Offer]:
    """5 % repriced, 1 % gone, 1 % new: one refresh of a live market."""
    kept = [o for o in offers if rng.random() >= 0.01]
    out = [dataclasses.replace(o, dph_total=round(o.dph_total * rng.uniform(0.9, 1.1), 4))
           if rng.random() < 0.05 else o for o in kept]
    out += [dataclasses.replace(offers[rng.randrange(len(offers))], id=next_id + i)
            for i in range(max(1, len(offers) // 100))]
    return out


def offer_rows(view: OffersView, offers: list[Offer]) -> tuple[Rows, list[str]]:
    return {str(o.id): view._cells(o) for o in offers}, [str(o.id) for o in offers]


def instance_rows(count: int, rng: random.Random, tick: int) -> tuple[Rows, list[str]]:
    """A 500-instance account: accrued cost grows on every refresh, a few change status."""
    rows: Rows = {}
    for i in range(count):
        status = "running" if (i + tick * (rng.random() < 0.02)) % 7 else "stopped"
        rows[str(40_000_000 + i)] = ("", str(40_000_000 + i), f"vastui-c{i % 9}-c{i % 8}-{i}", f"c{i % 9}",
                                     f"op{i % 3}@ws-{i % 3}", f"{1 + i % 8}x RTX 4090", status, f"{tick}m", f"${0.3 + i % 50 / 100:.3f}",
                                     f"${(tick + 1) * (0.3 + i % 50 / 100) / 60:.4f}", "-", "in 2h", "ok")
    return rows, list(rows)


async def compare_refreshes(app: TablesApp, pilot: Pilot[None], count: int,
                            build: Callable[[int], tuple[Rows, list[str]]]) -> Comparison:
    """Median time of applying states ``1..count-1`` (diff into ours; clear + add_rows into the plain table).

    ``build(i)`` gives state ``i``; it runs inside the timed part of both sides (both must format their rows).
    State 0 only fills the empty tables and is not timed as a refresh.
    """
    ours_table = app.query_one("#ours", KeyedTable)
    plain = app.query_one("#plain", DataTable)
    mine: list[float] = []
    theirs: list[float] = []
    loop = asyncio.get_running_loop()
    for index in range(count):
        app.show("ours")
        await pilot.pause()
        start = loop.time()
        rows, order = build(index)
        ours_table.sync(rows, order)
        await pilot.pause()
        mine.append(loop.time() - start)

        app.show("plain")
        await pilot.pause()
        start = loop.time()
        rows, order = build(index)
        plain.clear()
        plain.add_rows([rows[key] for key in order])
        await pilot.pause()
        theirs.append(loop.time() - start)
    return Comparison(_median(mine[1:]), _median(theirs[1:]))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


async def bench_offers(size: int, refreshes: int) -> Comparison:
    rng = random.Random(size)
    offers = world_offers(size)
    view = OffersView()
    snapshots = [offers]
    for tick in range(refreshes):
        snapshots.append(next_refresh(snapshots[-1], rng, next_id=40_000_000 + tick * size))
    app = TablesApp(OFFER_COLUMNS)
    async with app.run_test(size=(160, 50)) as pilot:
        return await compare_refreshes(app, pilot, len(snapshots), lambda i: offer_rows(view, snapshots[i]))


async def bench_instances(count: int, refreshes: int) -> Comparison:
    rng = random.Random(count)
    states = [instance_rows(count, rng, tick) for tick in range(refreshes + 1)]
    app = TablesApp(INSTANCE_COLUMNS)
    async with app.run_test(size=(160, 50)) as pilot:
        return await compare_refreshes(app, pilot, len(states), lambda i: states[i])


def main() -> None:
    options = parse_options(__doc__)
    sizes, refreshes, instances = ((300,), 3, 100) if options.quick else ((1000, 5000, 10_000), 7, 500)
    print(f"# one refresh = format rows + update the table + composite the screen, median of {refreshes}; "
          "baseline: the same rows by DataTable.clear() + add_rows in the same app, interleaved")
    for size in sizes:
        result = asyncio.run(bench_offers(size, refreshes))
        print(ratio_line(f"console.offers refresh at {size:,} offers, keyed diff vs clear-and-reload", result))
    result = asyncio.run(bench_instances(instances, refreshes))
    print(ratio_line(f"console.instances refresh at {instances} instances, keyed diff vs clear-and-reload", result))


if __name__ == "__main__":
    main()
