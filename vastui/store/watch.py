"""The leak watch's tables: ``watch_rounds`` (append-only: what each round saw) and ``watch_alerts`` (each alert
and its delivery). ``raise_alert`` checks the quiet period and writes in one transaction, so two watches on one
team store raise one alert for one condition; ``claim_alert`` lets only one of them deliver it at a time."""

from __future__ import annotations

from vastui.store.base import Row, StoreBase
from vastui.store.records import WatchAlert, WatchRound, writer_of

_ALERT_COLUMNS = ("id, alert_key, kind, instance_id, text, raised_at, delivered_at, attempts, last_error, "
                  "operator, host, pid")


def _alert(row: Row) -> WatchAlert:
    return WatchAlert(row_id=row["id"], alert_key=row["alert_key"], kind=row["kind"], instance_id=row["instance_id"],
                      text=row["text"], raised_at=row["raised_at"], delivered_at=row["delivered_at"],
                      attempts=row["attempts"], last_error=row["last_error"], by=writer_of(row))


def _round(row: Row) -> WatchRound:
    return WatchRound(row_id=row["id"], checked_at=row["checked_at"], verdict=row["verdict"],
                      listed_count=row["listed_count"], leaked_count=row["leaked_count"],
                      unowned_count=row["unowned_count"], burn_usd_per_h=row["burn_usd_per_h"],
                      credit_usd=row["credit_usd"], error=row["error"], by=writer_of(row))


class WatchTables(StoreBase):
    """The ``watch_rounds`` and ``watch_alerts`` tables."""

    async def record_watch_round(self, *, checked_at: float, verdict: str, listed_count: int, leaked_count: int,
                                 unowned_count: int, burn_usd_per_h: float | None, credit_usd: float | None,
                                 error: str | None) -> WatchRound:
        async with self._write("record a watch round") as tx:
            row_id = await tx.insert(
                "INSERT INTO watch_rounds (checked_at, verdict, listed_count, leaked_count, unowned_count, "
                "burn_usd_per_h, credit_usd, error, operator, host, pid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (checked_at, verdict, listed_count, leaked_count, unowned_count, burn_usd_per_h, credit_usd,
                 error, *self._writer_params()))
            row = await tx.fetchone("SELECT * FROM watch_rounds WHERE id = ?", (row_id,))
        assert row is not None
        return _round(row)

    async def watch_rounds(self, *, limit: int = 100) -> list[WatchRound]:
        """The latest ``limit`` rounds, oldest first."""
        rows = await self._read("read the watch rounds",
                                "SELECT * FROM watch_rounds ORDER BY id DESC LIMIT ?", (limit,))
        return [_round(row) for row in reversed(rows)]

    async def raise_alert(self, *, alert_key: str, kind: str, text: str, instance_id: int | None, at: float,
                          quiet_s: float) -> WatchAlert | None:
        """Keep a new alert for ``alert_key`` unless one was raised less than ``quiet_s`` before ``at`` (then None:
        the condition has already been told)."""
        async with self._write(f"raise the watch alert {alert_key}") as tx:
            recent = await tx.fetchone(
                "SELECT id FROM watch_alerts WHERE alert_key = ? AND raised_at > ? ORDER BY id DESC LIMIT 1",
                (alert_key, at - quiet_s))
            if recent is not None:
                return None
            row_id = await tx.insert(
                "INSERT INTO watch_alerts (alert_key, kind, instance_id, text, raised_at, operator, host, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (alert_key, kind, instance_id, text, at, *self._writer_params()))
            row = await tx.fetchone(f"SELECT {_ALERT_COLUMNS} FROM watch_alerts WHERE id = ?", (row_id,))
        assert row is not None
        return _alert(row)

    async def undelivered_alerts(self) -> list[WatchAlert]:
        """Alerts no webhook has taken yet, oldest first."""
        rows = await self._read("read the undelivered watch alerts",
                                f"SELECT {_ALERT_COLUMNS} FROM watch_alerts WHERE delivered_at IS NULL ORDER BY id")
        return [_alert(row) for row in rows]

    async def claim_alert(self, row_id: int, *, at: float, until: float) -> bool:
        """Take the delivery of an undelivered alert until ``until`` (False: delivered, or another watch holds it)."""
        async with self._write(f"claim watch alert {row_id}") as tx:
            cursor = await tx.execute(
                "UPDATE watch_alerts SET claimed_until = ?, attempts = attempts + 1 WHERE id = ? "
                "AND delivered_at IS NULL AND (claimed_until IS NULL OR claimed_until <= ?)", (until, row_id, at))
            return cursor.rowcount == 1

    async def settle_alert(self, row_id: int, *, delivered_at: float | None, error: str | None = None) -> None:
        """The delivery's outcome: delivered at ``delivered_at``, or (None) failed with ``error``, to try again."""
        async with self._write(f"settle watch alert {row_id}") as tx:
            await tx.execute(
                "UPDATE watch_alerts SET delivered_at = ?, claimed_until = NULL, last_error = ? WHERE id = ?",
                (delivered_at, error, row_id))

    async def watch_alerts(self, *, limit: int = 100) -> list[WatchAlert]:
        """The latest ``limit`` alerts, oldest first."""
        rows = await self._read("read the watch alerts",
                                f"SELECT {_ALERT_COLUMNS} FROM watch_alerts ORDER BY id DESC LIMIT ?", (limit,))
        return [_alert(row) for row in reversed(rows)]
