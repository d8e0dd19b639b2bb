"""The view registry: each view's name (for ``:name``), its key, its title and how to build it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vastui.errors import ConfigError
from vastui.tui.views.base import ConsoleView


@dataclass(frozen=True, slots=True)
class ViewSpec:
    name: str                              # typed after ':' (lower case, no spaces)
    key: str                               # the key that switches to it (e.g. "1")
    title: str
    factory: Callable[[], ConsoleView]


def check_registry(views: Sequence[ViewSpec]) -> tuple[ViewSpec, ...]:
    """The views, refusing duplicate names or keys (a second view on a key would silently shadow the first)."""
    names = [v.name for v in views]
    keys = [v.key for v in views]
    for label, values in (("name", names), ("key", keys)):
        dup = {x for x in values if values.count(x) > 1}
        if dup:
            raise ConfigError(f"two views share the {label} {sorted(dup)[0]!r}", title="View registry")
    if not views:
        raise ConfigError("the console needs at least one view", title="View registry")
    return tuple(views)


def default_views() -> tuple[ViewSpec, ...]:
    """The built-in views, in key order. Add a view here (one module per view in ``vastui/tui/views/``)."""
    from vastui.tui.views.account import AccountView
    from vastui.tui.views.activity import ActivityView
    from vastui.tui.views.benchmarks import BenchmarksView
    from vastui.tui.views.campaign import CampaignView
    from vastui.tui.views.gpus import GpusView
    from vastui.tui.views.instances import InstancesView
    from vastui.tui.views.leaks import LeaksView
    from vastui.tui.views.offers import OffersView
    from vastui.tui.views.receipt import ReceiptView

    return (
        ViewSpec("offers", "1", "Offers", OffersView),
        ViewSpec("instances", "2", "Instances", InstancesView),
        ViewSpec("leaks", "3", "Leaks", LeaksView),
        ViewSpec("account", "4", "Account", AccountView),
        ViewSpec("campaign", "5", "Campaign", CampaignView),
        ViewSpec("gpus", "6", "GPUs", GpusView),
        ViewSpec("benchmarks", "7", "Benchmarks", BenchmarksView),
        ViewSpec("receipt", "8", "Receipt", ReceiptView),
        ViewSpec("activity", "9", "Activity", ActivityView),
    )
