"""Campaign-level tables: manifests by digest, campaigns and their phase history, offer snapshots, receipts."""

from __future__ import annotations

from collections.abc import Sequence

from vastui.errors import StoreError
from vastui.store.base import Row, StoreBase, Transaction, check_json
from vastui.store.records import (
    Campaign,
    CampaignOwner,
    CampaignPhaseChange,
    Manifest,
    OfferSnapshot,
    Receipt,
    writer_of,
)

_CAMPAIGN_COLUMNS = ("campaign_id, manifest_digest, created_at, phase, phase_at, budget_usd, deadline_at, finished_at, "
                     "operator, host, pid")


def _campaign(row: Row) -> Campaign:
    return Campaign(
        campaign_id=row["campaign_id"],
        manifest_digest=row["manifest_digest"],
        created_at=row["created_at"],
        phase=row["phase"],
        phase_at=row["phase_at"],
        budget_usd=row["budget_usd"],
        deadline_at=row["deadline_at"],
        finished_at=row["finished_at"],
        by=writer_of(row),
    )


def _receipt(row: Row) -> Receipt:
    return Receipt(
        receipt_id=row["id"],
        campaign_id=row["campaign_id"],
        created_at=row["created_at"],
        json_text=row["json_text"],
        markdown_text=row["markdown_text"],
    )


class CampaignTables(StoreBase):
    """Manifests, campaigns, phase history, offer snapshots and receipts."""

    async def save_manifest(self, *, digest: str, name: str, toml_text: str, stored_at: float) -> Manifest:
        """Keep a manifest's text under its identity digest. Saving a digest again keeps the first text."""
        async with self._write(f"save manifest {digest}") as tx:
            await tx.execute(
                "INSERT INTO manifests (digest, name, toml_text, stored_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (digest) DO NOTHING",
                (digest, name, toml_text, stored_at),
            )
            row = await tx.fetchone("SELECT * FROM manifests WHERE digest = ?", (digest,))
        assert row is not None
        return Manifest(digest=row["digest"], name=row["name"], toml_text=row["toml_text"], stored_at=row["stored_at"])

    async def manifest(self, digest: str) -> Manifest | None:
        """The manifest stored under ``digest``, or None."""
        row = await self._read_one(f"read manifest {digest}", "SELECT * FROM manifests WHERE digest = ?", (digest,))
        if row is None:
            return None
        return Manifest(digest=row["digest"], name=row["name"], toml_text=row["toml_text"], stored_at=row["stored_at"])

    async def create_campaign(
        self,
        *,
        campaign_id: str,
        manifest_digest: str,
        created_at: float,
        phase: str,
        budget_usd: float | None = None,
        deadline_at: float | None = None,
    ) -> Campaign:
        """Create a campaign in its first phase. The manifest must have been saved first (foreign key)."""
        async with self._write(f"create campaign {campaign_id}") as tx:
            await tx.execute(
                f"INSERT INTO campaigns ({_CAMPAIGN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
                (campaign_id, manifest_digest, created_at, phase, created_at, budget_usd, deadline_at,
                 *self._writer_params()),
            )
            await tx.execute(
                "INSERT INTO campaign_phases (campaign_id, phase, at, note) VALUES (?, ?, ?, NULL)",
                (campaign_id, phase, created_at),
            )
            return await self._campaign_in(tx, campaign_id)

    async def set_campaign_phase(self, *, campaign_id: str, phase: str, at: float, note: str | None = None) -> Campaign:
        """Move an active campaign to ``phase`` and append it to the phase history."""
        return await self._change_phase(campaign_id=campaign_id, phase=phase, at=at, note=note, finish=False)

    async def finish_campaign(self, *, campaign_id: str, phase: str, at: float, note: str | None = None) -> Campaign:
        """Move a campaign to its final ``phase`` and mark it finished (no longer active) at ``at``."""
        return await self._change_phase(campaign_id=campaign_id, phase=phase, at=at, note=note, finish=True)

    async def _change_phase(self, *, campaign_id: str, phase: str, at: float, note: str | None,
                            finish: bool) -> Campaign:
        async with self._write(f"set campaign {campaign_id} to phase {phase}") as tx:
            cursor = await tx.execute(
                "UPDATE campaigns SET phase = ?, phase_at = ?, finished_at = CASE WHEN ? = 1 THEN ? END "
                "WHERE campaign_id = ? AND finished_at IS NULL",
                (phase, at, int(finish), at, campaign_id),
            )
            if cursor.rowcount != 1:
                exists = await tx.fetchone("SELECT finished_at FROM campaigns WHERE campaign_id = ?", (campaign_id,))
                why = "no such campaign" if exists is None else "the campaign is already finished"
                raise StoreError(f"could not set campaign {campaign_id} to phase {phase}: {why}")
            await tx.execute(
                "INSERT INTO campaign_phases (campaign_id, phase, at, note) VALUES (?, ?, ?, ?)",
                (campaign_id, phase, at, note),
            )
            return await self._campaign_in(tx, campaign_id)

    async def claim_campaign(self, owner: CampaignOwner) -> None:
        """Record ``owner`` as the process running the campaign (replacing a previous, gone owner's claim)."""
        async with self._write(f"claim campaign {owner.campaign_id}") as tx:
            await tx.execute(
                "INSERT INTO campaign_owners (campaign_id, host, pid, pid_started, claimed_at, operator) "
                "VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (campaign_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
                "pid_started = excluded.pid_started, claimed_at = excluded.claimed_at, operator = excluded.operator",
                (owner.campaign_id, owner.host, owner.pid, owner.pid_started, owner.claimed_at,
                 owner.operator if owner.operator is not None else self._writer.operator or None),
            )

    async def release_campaign(self, campaign_id: str, *, pid: int) -> None:
        """Drop the claim of process ``pid`` on the campaign (another process's claim stays)."""
        async with self._write(f"release campaign {campaign_id}") as tx:
            await tx.execute("DELETE FROM campaign_owners WHERE campaign_id = ? AND pid = ?", (campaign_id, pid))

    async def campaign_owners(self) -> dict[str, CampaignOwner]:
        """Every claimed campaign's owner, by campaign id."""
        rows = await self._read("list campaign owners", "SELECT * FROM campaign_owners")
        return {row["campaign_id"]: CampaignOwner(campaign_id=row["campaign_id"], host=row["host"], pid=row["pid"],
                                                  pid_started=row["pid_started"], claimed_at=row["claimed_at"],
                                                  operator=row["operator"])
                for row in rows}

    @staticmethod
    async def _campaign_in(tx: Transaction, campaign_id: str) -> Campaign:
        row = await tx.fetchone(f"SELECT {_CAMPAIGN_COLUMNS} FROM campaigns WHERE campaign_id = ?", (campaign_id,))
        assert row is not None
        return _campaign(row)

    async def campaign(self, campaign_id: str) -> Campaign | None:
        """The campaign, or None."""
        row = await self._read_one(
            f"read campaign {campaign_id}",
            f"SELECT {_CAMPAIGN_COLUMNS} FROM campaigns WHERE campaign_id = ?",
            (campaign_id,),
        )
        return None if row is None else _campaign(row)

    async def campaigns(self) -> list[Campaign]:
        """Every campaign, oldest first."""
        rows = await self._read(
            "list campaigns", f"SELECT {_CAMPAIGN_COLUMNS} FROM campaigns ORDER BY created_at, campaign_id"
        )
        return [_campaign(row) for row in rows]

    async def campaign_phases(self, campaign_id: str) -> list[CampaignPhaseChange]:
        """The campaign's phase history, in order."""
        rows = await self._read(
            f"read the phases of campaign {campaign_id}",
            "SELECT campaign_id, phase, at, note FROM campaign_phases WHERE campaign_id = ? ORDER BY id",
            (campaign_id,),
        )
        return [CampaignPhaseChange(row["campaign_id"], row["phase"], row["at"], row["note"]) for row in rows]

    async def save_offer_snapshots(self, snapshots: Sequence[OfferSnapshot]) -> None:
        """Keep offers as seen at search time, all in one transaction."""
        for snap in snapshots:
            check_json(snap.snapshot_json, field=f"the snapshot of offer {snap.offer_id}")
        async with self._write(f"save {len(snapshots)} offer snapshots") as tx:
            await tx.executemany(
                "INSERT INTO offer_snapshots (campaign_id, offer_id, machine_id, gpu_name, num_gpus, dph_usd, "
                "taken_at, snapshot_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(s.campaign_id, s.offer_id, s.machine_id, s.gpu_name, s.num_gpus, s.dph_usd, s.taken_at,
                  s.snapshot_json) for s in snapshots],
            )

    async def last_offer_snapshots(self, machine_ids: Sequence[int]) -> list[OfferSnapshot]:
        """Per machine of ``machine_ids``, the latest offer of it any campaign was planned on (by machine id): what
        the marketplace said of a host that is no longer listed (its dlperf, for the calibrated prior)."""
        if not machine_ids:
            return []
        rows = await self._read(
            f"read the last offer snapshots of {len(machine_ids)} machine(s)",
            "SELECT campaign_id, offer_id, machine_id, gpu_name, num_gpus, dph_usd, taken_at, snapshot_json "
            f"FROM offer_snapshots WHERE machine_id IN ({', '.join('?' for _ in machine_ids)}) ORDER BY machine_id, id",
            list(machine_ids),
        )
        latest = {row["machine_id"]: row for row in rows}    # the last row per machine wins
        return [OfferSnapshot(row["campaign_id"], row["offer_id"], row["machine_id"], row["gpu_name"], row["num_gpus"],
                              row["dph_usd"], row["taken_at"], row["snapshot_json"]) for row in latest.values()]

    async def save_receipt(self, *, campaign_id: str, created_at: float, json_text: str,
                           markdown_text: str) -> Receipt:
        """Keep a receipt (earlier receipts of the campaign are kept too)."""
        check_json(json_text, field=f"the receipt of campaign {campaign_id}")
        async with self._write(f"save the receipt of campaign {campaign_id}") as tx:
            receipt_id = await tx.insert(
                "INSERT INTO receipts (campaign_id, created_at, json_text, markdown_text) VALUES (?, ?, ?, ?)",
                (campaign_id, created_at, json_text, markdown_text),
            )
            row = await tx.fetchone("SELECT * FROM receipts WHERE id = ?", (receipt_id,))
        assert row is not None
        return _receipt(row)

    async def receipts(self, campaign_id: str) -> list[Receipt]:
        """Every receipt of the campaign, oldest first."""
        rows = await self._read(
            f"read the receipts of campaign {campaign_id}",
            "SELECT * FROM receipts WHERE campaign_id = ? ORDER BY id",
            (campaign_id,),
        )
        return [_receipt(row) for row in rows]

    async def latest_receipt(self, campaign_id: str) -> Receipt | None:
        """The campaign's most recent receipt, or None."""
        receipts = await self.receipts(campaign_id)
        return receipts[-1] if receipts else None
