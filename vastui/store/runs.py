"""Runs, and the telemetry of each run: progress records and per-GPU samples, written in batches.

Telemetry arrives at about 1 Hz per GPU; one transaction per sample would mean one fsync per sample, so callers
buffer and hand over lists, and each list is one ``executemany`` in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from vastui.errors import StoreError
from vastui.store.base import Row, StoreBase, Transaction, check_json
from vastui.store.records import GpuSample, ProgressRecord, Run, RunStatus

_SAMPLE_COLUMNS = (
    "run_id", "at", "gpu_index", "util_pct", "mem_used_mib", "mem_total_mib", "power_w", "pcie_rx_kib_s",
    "pcie_tx_kib_s", "sm_clock_mhz", "mem_clock_mhz", "throttle_reasons",
)
_PROGRESS_COLUMNS = ("run_id", "at", "units_done", "units_accepted", "data_wait_s", "compute_s", "latencies_json")


def run_from_row(row: Row) -> Run:
    """Build a Run from a ``runs`` row."""
    return Run(
        run_id=row["run_id"],
        campaign_id=row["campaign_id"],
        instance_id=row["instance_id"],
        machine_id=row["machine_id"],
        gpu_name=row["gpu_name"],
        num_gpus=row["num_gpus"],
        workload_digest=row["workload_digest"],
        variant_json=row["variant_json"],
        started_at=row["started_at"],
        status=RunStatus(row["status"]),
        pull_s=row["pull_s"],
        ready_s=row["ready_s"],
        warmup_s=row["warmup_s"],
        throughput_units_per_s=row["throughput_units_per_s"],
        stats_json=row["stats_json"],
        finished_at=row["finished_at"],
        error=row["error"],
    )


def _insert_sql(table: str, columns: Sequence[str]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"


def _sample_row(s: GpuSample) -> tuple[object, ...]:
    return (s.run_id, s.at, s.gpu_index, s.util_pct, s.mem_used_mib, s.mem_total_mib, s.power_w, s.pcie_rx_kib_s,
            s.pcie_tx_kib_s, s.sm_clock_mhz, s.mem_clock_mhz, s.throttle_reasons)


def _progress_row(p: ProgressRecord) -> tuple[object, ...]:
    return (p.run_id, p.at, p.units_done, p.units_accepted, p.data_wait_s, p.compute_s,
            json.dumps([float(x) for x in p.latencies_s]))


class RunTables(StoreBase):
    """Runs, progress records and GPU samples."""

    async def start_run(
        self,
        *,
        campaign_id: str,
        instance_id: int | None,
        machine_id: int,
        gpu_name: str,
        num_gpus: int,
        workload_digest: str,
        variant_json: str,
        started_at: float,
    ) -> Run:
        """Open a RUNNING run of one workload variant (``variant_json``: the profile knobs) on one host."""
        check_json(variant_json, field="the run's variant")
        async with self._write(f"start a run on machine {machine_id}") as tx:
            run_id = await tx.insert(
                "INSERT INTO runs (campaign_id, instance_id, machine_id, gpu_name, num_gpus, workload_digest, "
                "variant_json, started_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (campaign_id, instance_id, machine_id, gpu_name, num_gpus, workload_digest, variant_json,
                 started_at, RunStatus.RUNNING),
                key="run_id",
            )
            return await self._run_in(tx, run_id)

    async def record_run_phases(self, *, run_id: int, pull_s: float | None = None, ready_s: float | None = None,
                                warmup_s: float | None = None) -> Run:
        """Set the startup split of a run as it becomes known; a None argument leaves that phase as it was."""
        async with self._write(f"record the phase timings of run {run_id}") as tx:
            cursor = await tx.execute(
                "UPDATE runs SET pull_s = COALESCE(?, pull_s), ready_s = COALESCE(?, ready_s), "
                "warmup_s = COALESCE(?, warmup_s) WHERE run_id = ?",
                (pull_s, ready_s, warmup_s, run_id),
            )
            if cursor.rowcount != 1:
                raise StoreError(f"could not record the phase timings of run {run_id}: no such run")
            return await self._run_in(tx, run_id)

    async def finish_run(
        self,
        *,
        run_id: int,
        status: RunStatus,
        at: float,
        throughput_units_per_s: float | None = None,
        stats_json: str | None = None,
        error: str | None = None,
    ) -> Run:
        """Close a RUNNING run with its outcome. A run is finished once; its record is never overwritten after."""
        if status is RunStatus.RUNNING:
            raise StoreError(f"could not finish run {run_id}: the final status cannot be {status}")
        if stats_json is not None:
            check_json(stats_json, field=f"the stats of run {run_id}")
        async with self._write(f"finish run {run_id}") as tx:
            cursor = await tx.execute(
                "UPDATE runs SET status = ?, finished_at = ?, throughput_units_per_s = ?, stats_json = ?, error = ? "
                "WHERE run_id = ? AND status = ?",
                (status, at, throughput_units_per_s, stats_json, error, run_id, RunStatus.RUNNING),
            )
            if cursor.rowcount != 1:
                row = await tx.fetchone("SELECT status FROM runs WHERE run_id = ?", (run_id,))
                why = "no such run" if row is None else f"it is already {row['status']}"
                raise StoreError(f"could not finish run {run_id}: {why}")
            return await self._run_in(tx, run_id)

    @staticmethod
    async def _run_in(tx: Transaction, run_id: int) -> Run:
        row = await tx.fetchone("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        assert row is not None
        return run_from_row(row)

    async def run(self, run_id: int) -> Run | None:
        """One run, or None."""
        row = await self._read_one(f"read run {run_id}", "SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return None if row is None else run_from_row(row)

    async def runs(self, *, campaign_id: str) -> list[Run]:
        """Every run of a campaign, in the order they started."""
        rows = await self._read(
            f"read the runs of campaign {campaign_id}",
            "SELECT * FROM runs WHERE campaign_id = ? ORDER BY run_id",
            (campaign_id,),
        )
        return [run_from_row(row) for row in rows]

    async def open_runs(self, *, campaign_id: str) -> list[Run]:
        """Runs of a campaign still RUNNING (after a crash: the ones resume must close or continue)."""
        return [run for run in await self.runs(campaign_id=campaign_id) if run.status is RunStatus.RUNNING]

    async def add_measurements(self, *, progress: Sequence[ProgressRecord] = (),
                               samples: Sequence[GpuSample] = ()) -> None:
        """Insert a batch of progress records and GPU samples together, in one transaction (all or none)."""
        if not progress and not samples:
            return
        async with self._write(f"add {len(progress)} progress records and {len(samples)} GPU samples") as tx:
            if progress:
                await tx.executemany(_insert_sql("progress", _PROGRESS_COLUMNS), [_progress_row(p) for p in progress])
            if samples:
                await tx.executemany(_insert_sql("gpu_samples", _SAMPLE_COLUMNS), [_sample_row(s) for s in samples])

    async def gpu_samples(self, *, run_id: int, gpu_index: int | None = None) -> list[GpuSample]:
        """The run's GPU samples (of one GPU, or all), in the order they were written."""
        where, params = ("run_id = ?", (run_id,)) if gpu_index is None else (
            "run_id = ? AND gpu_index = ?", (run_id, gpu_index))
        rows = await self._read(
            f"read the GPU samples of run {run_id}",
            f"SELECT {', '.join(_SAMPLE_COLUMNS)} FROM gpu_samples WHERE {where} ORDER BY id",
            params,
        )
        return [GpuSample(*row) for row in rows]

    async def progress(self, *, run_id: int) -> list[ProgressRecord]:
        """The run's progress records, in the order they were written."""
        rows = await self._read(
            f"read the progress of run {run_id}",
            f"SELECT {', '.join(_PROGRESS_COLUMNS)} FROM progress WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [
            ProgressRecord(
                run_id=row["run_id"], at=row["at"], units_done=row["units_done"],
                units_accepted=row["units_accepted"], data_wait_s=row["data_wait_s"], compute_s=row["compute_s"],
                latencies_s=tuple(json.loads(row["latencies_json"])),
            )
            for row in rows
        ]
