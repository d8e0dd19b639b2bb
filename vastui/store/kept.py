"""Kept approval requests: a detached campaign's requests waiting for ``vastui campaign approve``/``refuse``.

The campaign's broker writes each request that needs a human here and polls for its answer; the command, another
process on the same file, answers it here. A request is answered only while it is pending and its wall-clock expiry
is ahead (the answer's own update checks both, so a late approval never lands); the broker writes the final state
(granted, refused, expired or cancelled) back when it settles the request. No secret is written: every text passes
the store's secret guard like any other write.
"""

from __future__ import annotations

from collections.abc import Sequence

from vastui.approval import RequestState
from vastui.store.base import Row, StoreBase
from vastui.store.records import KeptRequest, writer_of

_COLUMNS = ("campaign_id, request_id, action, target, summary, cost_cap_usd, gpu_name, num_gpus, dph_usd, deadline_at, "
            "asked_at, expires_at, state, answered_by, answered_at, reason, operator, host, pid")


def _kept(row: Row) -> KeptRequest:
    return KeptRequest(
        row_id=row["id"], campaign_id=row["campaign_id"], request_id=row["request_id"], action=row["action"],
        target=row["target"], summary=row["summary"], cost_cap_usd=row["cost_cap_usd"], gpu_name=row["gpu_name"],
        num_gpus=row["num_gpus"], dph_usd=row["dph_usd"], deadline_at=row["deadline_at"], asked_at=row["asked_at"],
        expires_at=row["expires_at"], state=RequestState(row["state"]), answered_by=row["answered_by"],
        answered_at=row["answered_at"], reason=row["reason"], by=writer_of(row))


class KeptRequestTables(StoreBase):
    """The ``kept_requests`` table."""

    async def keep_request(self, *, campaign_id: str, request_id: str, action: str, target: str, summary: str,
                           cost_cap_usd: float | None, gpu_name: str | None, num_gpus: int | None,
                           dph_usd: float | None, deadline_at: float | None, asked_at: float,
                           expires_at: float) -> KeptRequest:
        """Keep one pending request of ``campaign_id`` (which must be recorded). A pending row left under the same
        request id by an earlier process of the campaign is cancelled first: nobody can answer it any more."""
        async with self._write(f"keep approval request {request_id} of campaign {campaign_id}") as tx:
            await tx.execute(
                "UPDATE kept_requests SET state = 'cancelled', answered_by = 'campaign', answered_at = ?, "
                "reason = 'its campaign asked again from another process' "
                "WHERE campaign_id = ? AND request_id = ? AND state = 'pending'",
                (asked_at, campaign_id, request_id))
            row_id = await tx.insert(
                f"INSERT INTO kept_requests ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', "
                "NULL, NULL, NULL, ?, ?, ?)",
                (campaign_id, request_id, action, target, summary, cost_cap_usd, gpu_name, num_gpus, dph_usd,
                 deadline_at, asked_at, expires_at, *self._writer_params()))
            row = await tx.fetchone(f"SELECT id, {_COLUMNS} FROM kept_requests WHERE id = ?", (row_id,))
        assert row is not None
        return _kept(row)

    async def kept_requests(self, campaign_id: str, *,
                            state: RequestState | None = None) -> list[KeptRequest]:
        """The campaign's kept requests (only those in ``state`` if given), in the order they were kept."""
        where, params = ("AND state = ?", (campaign_id, str(state))) if state is not None else ("", (campaign_id,))
        rows = await self._read(f"read the kept requests of campaign {campaign_id}",
                                f"SELECT id, {_COLUMNS} FROM kept_requests WHERE campaign_id = ? {where} ORDER BY id",
                                params)
        return [_kept(row) for row in rows]

    async def answer_kept_requests(self, *, campaign_id: str, request_ids: Sequence[str], grant: bool,
                                   answered_by: str, at: float, reason: str | None = None) -> list[str]:
        """Grant (or refuse) the named pending requests, in one transaction; returns the ids answered. A request
        that is no longer pending, or whose expiry is not after ``at`` (epoch seconds), is left as it is."""
        state = RequestState.GRANTED if grant else RequestState.REFUSED
        answered: list[str] = []
        async with self._write(f"answer {len(request_ids)} kept request(s) of campaign {campaign_id}") as tx:
            for request_id in request_ids:
                cursor = await tx.execute(
                    "UPDATE kept_requests SET state = ?, answered_by = ?, answered_at = ?, reason = ? "
                    "WHERE campaign_id = ? AND request_id = ? AND state = 'pending' AND expires_at > ?",
                    (str(state), answered_by, at, reason, campaign_id, request_id, at))
                if cursor.rowcount == 1:
                    answered.append(request_id)
        return answered

    async def settle_kept_request(self, row_id: int, *, state: RequestState, answered_by: str, at: float,
                                  reason: str | None) -> None:
        """The broker's final word on a kept request: its state, unless the row already says so (a command's grant
        keeps who gave it and when)."""
        async with self._write(f"settle kept request {row_id}") as tx:
            await tx.execute(
                "UPDATE kept_requests SET state = ?, answered_by = ?, answered_at = ?, reason = ? "
                "WHERE id = ? AND state IS NOT ?",
                (str(state), answered_by, at, reason, row_id, str(state)))

    async def cancel_kept_requests(self, campaign_id: str, *, at: float, reason: str) -> int:
        """Mark the campaign's requests still pending as cancelled (nobody will ask for their answer any more)."""
        async with self._write(f"cancel the kept requests of campaign {campaign_id}") as tx:
            cursor = await tx.execute(
                "UPDATE kept_requests SET state = 'cancelled', answered_by = 'campaign', answered_at = ?, reason = ? "
                "WHERE campaign_id = ? AND state = 'pending'", (at, reason, campaign_id))
            return int(cursor.rowcount)
