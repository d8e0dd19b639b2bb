"""The Activity view: the audit log from a real SQLite store, newest first, refusals and expiries told apart, and a
record written while the console runs shown after the next refresh."""

from __future__ import annotations

from pathlib import Path

from tests.tui.console_support import cells_of, wait_for
from tests.tui.snapshot_support import START, FrozenClock, SilentMarket
from vastui.approval import Action, AuditKind, AuditRecord, instance_target, offer_target
from vastui.events import EventBus
from vastui.store import SqliteStore
from vastui.tui.app import VastuiApp
from vastui.tui.services import ConsoleServices, ConsoleSettings
from vastui.tui.views.activity import ActivityView


def record(at: float, kind: AuditKind, target: str, outcome: str,
           action: Action = Action.CREATE_INSTANCE) -> AuditRecord:
    return AuditRecord(at=at, kind=kind, action=action, target=target, approval_id=None, granted_by=None,
                       outcome=outcome, campaign_id="c1")


async def test_activity_lists_the_audit_log_newest_first(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "store.sqlite3")
    try:
        await store.record_audit(record(START, AuditKind.APPROVAL, offer_target(1), "rent offer 1"))
        await store.record_audit(record(START + 10, AuditKind.DECLINED, offer_target(2),
                                        "rent — refused: by the operator"))
        await store.record_audit(record(START + 20, AuditKind.DECLINED, offer_target(3),
                                        "rent — expired (counts as refused)"))
        services = ConsoleServices(market=SilentMarket(), clock=FrozenClock(START + 60), bus=EventBus(),
                            store=store, audit=store)
        app = VastuiApp(services=services, settings=ConsoleSettings(live=False, initial_view="activity"))
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.press("9")
            table = app.query_one(ActivityView).table
            await wait_for(pilot, lambda: len(table.keys_in_order) == 3, what="three records shown")
            shown = [cells_of(table, k) for k in table.keys_in_order]
            assert [str(c[2]) for c in shown if c] == ["expired", "refused", "approved"]

            await store.record_audit(record(START + 30, AuditKind.CALL, instance_target(7), "ok",
                                            action=Action.DESTROY_INSTANCE))
            app.action_refresh()
            await wait_for(pilot, lambda: len(table.keys_in_order) == 4, what="the new record after a refresh")
            newest = cells_of(table, table.keys_in_order[0])
            assert newest is not None and newest[4] == instance_target(7) and str(newest[2]) == "done"
    finally:
        await store.close()
