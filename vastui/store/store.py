"""``Store``: every table vastui keeps, over whichever backend holds them (``SqliteStore``, ``PostgresStore``).

The tables speak one SQL (SQLite's, with ``?`` placeholders); a backend runs it, translating where its dialect
differs. Code outside the store names ``Store`` and opens one with ``open_store`` (a path or a URL).
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from vastui.store.audit import AuditTables
from vastui.store.campaigns import CampaignTables
from vastui.store.hosts import HostTables
from vastui.store.instances import InstanceTables
from vastui.store.kept import KeptRequestTables
from vastui.store.runs import RunTables
from vastui.store.screenings import ScreeningTables
from vastui.store.watch import WatchTables


class Store(CampaignTables, InstanceTables, RunTables, HostTables, AuditTables, KeptRequestTables, ScreeningTables,
            WatchTables):
    """Everything vastui keeps: campaigns, intents and instances, runs and telemetry, host knowledge, bad hosts,
    the audit log and receipts, a detached campaign's kept approval requests, the knobs' screenings, and
    what the leak watch saw and told."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
