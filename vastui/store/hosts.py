"""Host knowledge and bad hosts.

Host knowledge is not a table of its own: it is every run, keyed by (machine_id, gpu_name, num_gpus, workload digest),
with the campaign that measured it. "Best" is a query over those runs, never a stored maximum, so the distribution
(and the host-to-host variance it shows) survives. Bad hosts are append-only entries with a reason, evidence and an
expiry; expired entries are still listed, flagged, never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from vastui.store.base import Row, StoreBase, check_json
from vastui.store.records import BadHost, HostKnowledge, Run, RunStatus
from vastui.store.runs import run_from_row

_HOST_KEY = "machine_id = ? AND gpu_name = ? AND num_gpus = ? AND workload_digest = ?"


def _bad_host(row: Row, now: float) -> BadHost:
    expires_at = row["expires_at"]
    return BadHost(
        entry_id=row["id"],
        machine_id=row["machine_id"],
        reason=row["reason"],
        evidence_json=row["evidence_json"],
        recorded_at=row["recorded_at"],
        expires_at=expires_at,
        campaign_id=row["campaign_id"],
        is_expired=expires_at is not None and expires_at <= now,
    )


def _knowledge(runs: Sequence[Run]) -> HostKnowledge:
    ok = [r for r in runs if r.status is RunStatus.OK and r.throughput_units_per_s is not None]
    best = max(ok, key=lambda r: (r.throughput_units_per_s or 0.0, -r.run_id), default=None)
    first = runs[0]
    return HostKnowledge(
        machine_id=first.machine_id,
        gpu_name=first.gpu_name,
        num_gpus=first.num_gpus,
        workload_digest=first.workload_digest,
        runs=tuple(runs),
        throughputs_units_per_s=tuple(r.throughput_units_per_s for r in ok if r.throughput_units_per_s is not None),
        campaign_ids=tuple(dict.fromkeys(r.campaign_id for r in runs)),
        best=best,
    )


class HostTables(StoreBase):
    """Host-knowledge queries over runs, and the bad-host list."""

    async def throughputs(self, *, machine_id: int, gpu_name: str, num_gpus: int,
                          workload_digest: str) -> list[float]:
        """The distribution: the throughput of every OK run on this host key, in the order measured."""
        rows = await self._read(
            f"read the throughputs of machine {machine_id}",
            f"SELECT throughput_units_per_s FROM runs WHERE {_HOST_KEY} AND status = ? "
            "AND throughput_units_per_s IS NOT NULL ORDER BY run_id",
            (machine_id, gpu_name, num_gpus, workload_digest, RunStatus.OK),
        )
        return [float(row[0]) for row in rows]

    async def host_knowledge(self, *, workload_digest: str,
                             machine_ids: Sequence[int] | None = None) -> list[HostKnowledge]:
        """What is known per host key for a workload (optionally only these machines), ordered by key."""
        sql = "SELECT * FROM runs WHERE workload_digest = ?"
        params: list[object] = [workload_digest]
        if machine_ids is not None:
            if not machine_ids:
                return []
            sql += f" AND machine_id IN ({', '.join('?' for _ in machine_ids)})"
            params.extend(machine_ids)
        rows = await self._read(f"read host knowledge for workload {workload_digest}",
                                sql + " ORDER BY machine_id, gpu_name, num_gpus, run_id", params)
        groups: dict[tuple[int, str, int], list[Run]] = {}
        for row in rows:
            run = run_from_row(row)
            groups.setdefault((run.machine_id, run.gpu_name, run.num_gpus), []).append(run)
        return [_knowledge(runs) for runs in groups.values()]

    async def record_bad_host(
        self,
        *,
        machine_id: int,
        reason: str,
        evidence_json: str,
        recorded_at: float,
        expires_at: float | None,
        campaign_id: str | None = None,
    ) -> BadHost:
        """Flag a host as bad with why and the evidence; ``expires_at=None`` flags it for good."""
        check_json(evidence_json, field=f"the evidence against machine {machine_id}")
        async with self._write(f"record machine {machine_id} as a bad host") as tx:
            entry_id = await tx.insert(
                "INSERT INTO bad_hosts (machine_id, reason, evidence_json, recorded_at, expires_at, campaign_id) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (machine_id, reason, evidence_json, recorded_at, expires_at, campaign_id),
            )
            row = await tx.fetchone("SELECT * FROM bad_hosts WHERE id = ?", (entry_id,))
        assert row is not None
        return _bad_host(row, recorded_at)

    async def bad_hosts(self, *, now: float, machine_id: int | None = None) -> list[BadHost]:
        """Every bad-host entry (of one machine, or all), expired ones included and flagged, oldest first."""
        where, params = ("WHERE machine_id = ?", (machine_id,)) if machine_id is not None else ("", ())
        rows = await self._read("list bad hosts", f"SELECT * FROM bad_hosts {where} ORDER BY id", params)
        return [_bad_host(row, now) for row in rows]

    async def active_bad_hosts(self, *, now: float) -> list[BadHost]:
        """Bad-host entries still in force at ``now``, oldest first."""
        rows = await self._read(
            "list active bad hosts",
            "SELECT * FROM bad_hosts WHERE expires_at IS NULL OR expires_at > ? ORDER BY id",
            (now,),
        )
        return [_bad_host(row, now) for row in rows]
