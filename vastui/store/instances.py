"""Instance ownership: create intents, lifecycle transitions, and the evidence that an instance is gone.

Teardown is pass/fail (docs/method.md): an intent is written *before* every create call, so a crash between the call
and its answer still leaves a record of what this campaign may own. An intent is released only when listings rule it
out (nothing was created) or when its instance is proven gone by two complete listings that missed it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from vastui.errors import StoreError
from vastui.store.base import Row, StoreBase, Transaction
from vastui.store.records import (
    DestroyEvidence,
    InstanceState,
    InstanceTransition,
    Intent,
    IntentStatus,
    OwnedInstance,
    writer_of,
)

MIN_MISSED_LISTINGS = 2  # one listing can miss a live instance (a page lost, a race); two successive cannot


def _intent(row: Row) -> Intent:
    return Intent(
        intent_id=row["intent_id"],
        campaign_id=row["campaign_id"],
        offer_id=row["offer_id"],
        label=row["label"],
        created_at=row["created_at"],
        status=IntentStatus(row["status"]),
        machine_id=row["machine_id"],
        dph_usd=row["dph_usd"],
        deadline_at=row["deadline_at"],
        instance_id=row["instance_id"],
        bound_at=row["bound_at"],
        error=row["error"],
        resolved_at=row["resolved_at"],
        by=writer_of(row),
    )


_LATEST_STATE = (
    "(SELECT {col} FROM instance_transitions t WHERE t.instance_id = i.instance_id ORDER BY t.id DESC LIMIT 1)"
)


class InstanceTables(StoreBase):
    """Intents, instance transitions and destroy evidence."""

    async def record_intent(
        self,
        *,
        campaign_id: str,
        offer_id: int,
        label: str,
        at: float,
        machine_id: int | None = None,
        dph_usd: float | None = None,
        deadline_at: float | None = None,
    ) -> Intent:
        """Write a PENDING intent. Call this (and let it commit) *before* the create call."""
        async with self._write(f"record the intent to rent offer {offer_id}") as tx:
            intent_id = await tx.insert(
                "INSERT INTO intents (campaign_id, offer_id, label, created_at, status, machine_id, dph_usd, "
                "deadline_at, operator, host, pid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (campaign_id, offer_id, label, at, IntentStatus.PENDING, machine_id, dph_usd, deadline_at,
                 *self._writer_params()),
                key="intent_id",
            )
            return await self._intent_in(tx, intent_id)

    async def bind_intent(self, *, intent_id: int, instance_id: int, at: float) -> Intent:
        """Bind a PENDING or FAILED intent to the instance the create call (or a listing, by label) revealed."""
        async with self._write(f"bind intent {intent_id} to instance {instance_id}") as tx:
            await self._move(tx, intent_id, "bound to an instance", (IntentStatus.PENDING, IntentStatus.FAILED),
                             "status = ?, instance_id = ?, bound_at = ?", (IntentStatus.BOUND, instance_id, at))
            return await self._intent_in(tx, intent_id)

    async def fail_intent(self, *, intent_id: int, error: str, at: float) -> Intent:
        """The create call raised: the instance is *possibly created* and stays owned until ruled out."""
        async with self._write(f"mark intent {intent_id} failed") as tx:
            await self._move(tx, intent_id, "marked failed", (IntentStatus.PENDING,),
                             "status = ?, error = ?, resolved_at = ?", (IntentStatus.FAILED, error, at))
            return await self._intent_in(tx, intent_id)

    async def rule_out_intent(self, *, intent_id: int, at: float, reason: str) -> Intent:
        """Complete listings show no instance for a PENDING or FAILED intent: nothing was created."""
        async with self._write(f"rule out intent {intent_id}") as tx:
            row = await tx.fetchone("SELECT error FROM intents WHERE intent_id = ?", (intent_id,))
            error = reason if row is None or row["error"] is None else f"{row['error']}; {reason}"
            await self._move(tx, intent_id, "ruled out", (IntentStatus.PENDING, IntentStatus.FAILED),
                             "status = ?, error = ?, resolved_at = ?", (IntentStatus.RULED_OUT, error, at))
            return await self._intent_in(tx, intent_id)

    @staticmethod
    async def _move(tx: Transaction, intent_id: int, verb: str, allowed: Sequence[IntentStatus], assignments: str,
                    values: tuple[object, ...]) -> None:
        marks = ", ".join("?" for _ in allowed)
        cursor = await tx.execute(
            f"UPDATE intents SET {assignments} WHERE intent_id = ? AND status IN ({marks})",
            (*values, intent_id, *allowed),
        )
        if cursor.rowcount != 1:
            row = await tx.fetchone("SELECT status FROM intents WHERE intent_id = ?", (intent_id,))
            why = "no such intent" if row is None else f"it is {row['status']}"
            raise StoreError(f"intent {intent_id} cannot be {verb}: {why}")

    @staticmethod
    async def _intent_in(tx: Transaction, intent_id: int) -> Intent:
        row = await tx.fetchone("SELECT * FROM intents WHERE intent_id = ?", (intent_id,))
        assert row is not None
        return _intent(row)

    async def intents(self, *, campaign_id: str) -> list[Intent]:
        """Every intent of the campaign, in the order they were written."""
        rows = await self._read(
            f"read the intents of campaign {campaign_id}",
            "SELECT * FROM intents WHERE campaign_id = ? ORDER BY intent_id",
            (campaign_id,),
        )
        return [_intent(row) for row in rows]

    async def intent_for_instance(self, instance_id: int) -> Intent | None:
        """The intent bound to ``instance_id`` (which campaign created it), or None for a stranger."""
        row = await self._read_one(
            f"find the intent of instance {instance_id}", "SELECT * FROM intents WHERE instance_id = ?", (instance_id,)
        )
        return None if row is None else _intent(row)

    async def record_transition(self, *, instance_id: int, state: InstanceState | str, at: float,
                                detail: str | None = None) -> None:
        """Append one lifecycle transition (``InstanceState`` or the provider's own status string)."""
        async with self._write(f"record instance {instance_id} as {state}") as tx:
            await tx.execute(
                "INSERT INTO instance_transitions (instance_id, state, at, detail) VALUES (?, ?, ?, ?)",
                (instance_id, str(state), at, detail),
            )

    async def transitions(self, instance_id: int) -> list[InstanceTransition]:
        """The instance's lifecycle, in the order it was recorded."""
        rows = await self._read(
            f"read the transitions of instance {instance_id}",
            "SELECT instance_id, state, at, detail FROM instance_transitions WHERE instance_id = ? ORDER BY id",
            (instance_id,),
        )
        return [InstanceTransition(row["instance_id"], row["state"], row["at"], row["detail"]) for row in rows]

    async def record_gone(self, *, instance_id: int, missed_listing_at: Sequence[float], at: float) -> DestroyEvidence:
        """Record that an instance is gone: the times of (at least two) successive complete listings that missed it.

        Appends a GONE transition in the same transaction; the instance no longer counts as owned.
        """
        if len(missed_listing_at) < MIN_MISSED_LISTINGS:
            raise StoreError(
                f"could not record instance {instance_id} as gone: absence needs {MIN_MISSED_LISTINGS} complete "
                f"listings that missed it, got {len(missed_listing_at)}"
            )
        times = json.dumps([float(t) for t in missed_listing_at])
        async with self._write(f"record instance {instance_id} as gone") as tx:
            await tx.execute(
                "INSERT INTO destroy_evidence (instance_id, missed_listing_at_json, confirmed_at) VALUES (?, ?, ?)",
                (instance_id, times, at),
            )
            await tx.execute(
                "INSERT INTO instance_transitions (instance_id, state, at, detail) VALUES (?, ?, ?, ?)",
                (instance_id, InstanceState.GONE, at, f"missed by {len(missed_listing_at)} complete listings"),
            )
            owner = await tx.fetchone("SELECT campaign_id FROM intents WHERE instance_id = ?", (instance_id,))
        return DestroyEvidence(instance_id, None if owner is None else owner["campaign_id"],
                               tuple(float(t) for t in missed_listing_at), float(at))

    async def destroy_evidence(self, *, campaign_id: str | None = None) -> list[DestroyEvidence]:
        """Evidence of every instance proven gone (of one campaign, or all), in the order it was recorded."""
        where, params = ("WHERE i.campaign_id = ?", (campaign_id,)) if campaign_id is not None else ("", ())
        rows = await self._read(
            "read destroy evidence",
            "SELECT d.instance_id, i.campaign_id, d.missed_listing_at_json, d.confirmed_at FROM destroy_evidence d "
            f"LEFT JOIN intents i ON i.instance_id = d.instance_id {where} ORDER BY d.confirmed_at, d.instance_id",
            params,
        )
        return [
            DestroyEvidence(row["instance_id"], row["campaign_id"],
                            tuple(float(t) for t in json.loads(row["missed_listing_at_json"])), row["confirmed_at"])
            for row in rows
        ]

    async def owned_instances(self, *, campaign_id: str | None = None) -> list[OwnedInstance]:
        """Intents that may still own a billing instance: not ruled out and not proven gone.

        PENDING and FAILED intents are included (their instance id is unknown: find them by label). For resume and
        leak detection; ``campaign_id=None`` covers every campaign.
        """
        where = "WHERE i.status != ? AND d.instance_id IS NULL"
        params: tuple[object, ...] = (IntentStatus.RULED_OUT,)
        if campaign_id is not None:
            where += " AND i.campaign_id = ?"
            params += (campaign_id,)
        rows = await self._read(
            "list the instances campaigns may own",
            f"SELECT i.*, {_LATEST_STATE.format(col='state')} AS last_state, "
            f"{_LATEST_STATE.format(col='at')} AS last_state_at "
            f"FROM intents i LEFT JOIN destroy_evidence d ON d.instance_id = i.instance_id {where} "
            "ORDER BY i.intent_id",
            params,
        )
        return [OwnedInstance(_intent(row), row["last_state"], row["last_state_at"]) for row in rows]
