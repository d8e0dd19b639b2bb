"""Telemetry writes: ``SqliteStore.add_measurements`` with a whole batch in one transaction, against plain
``sqlite3`` ``executemany`` of the same rows in one transaction.

What it measures: the time per stored row, and rows per second, for N GPU samples plus N/8 progress records (eight
GPUs reporting at 1 Hz, one progress line a second) written into a real SQLite file in WAL mode with
``synchronous=FULL``, through the store's public API (aiosqlite's thread, the dataclass-to-row conversion, the
transaction and its audit of errors).

Why this baseline: it is the floor. The standard library's ``sqlite3`` on the same file, same pragmas (WAL,
``synchronous=FULL``, foreign keys on), the same tables and the same rows, converted from the same dataclasses
inline, in one transaction with one ``executemany`` per table: nothing is left to remove but the store itself. A
ratio near 1 means the store costs nothing on top of SQLite; above 1 is its overhead.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
from pathlib import Path

from timing import compare_async, parse_options, rate_line, ratio_line

from vastui.store import GpuSample, ProgressRecord, SqliteStore

GPUS = 8
DIGEST = "sha256:bench-store"


def telemetry(run_id: int, *, seconds: int, start_at: float) -> tuple[list[GpuSample], list[ProgressRecord]]:
    """``seconds`` of telemetry from an eight-GPU host: one sample per GPU and one progress record per second."""
    samples = [
        GpuSample(run_id=run_id, at=start_at + t, gpu_index=g, util_pct=97.0, mem_used_mib=70_000.0,
                  mem_total_mib=81_559.0, power_w=650.0 + g, pcie_rx_kib_s=1200.0, pcie_tx_kib_s=300.0,
                  sm_clock_mhz=1980.0, mem_clock_mhz=2619.0, throttle_reasons=0)
        for t in range(seconds) for g in range(GPUS)
    ]
    progress = [
        ProgressRecord(run_id=run_id, at=start_at + t, units_done=512.0 * t, units_accepted=512.0 * t,
                       data_wait_s=0.01, compute_s=0.98, latencies_s=(0.012, 0.013, 0.011))
        for t in range(seconds)
    ]
    return samples, progress


async def open_run(store: SqliteStore) -> int:
    await store.save_manifest(digest=DIGEST, name="bench", toml_text="name = 'bench'\n", stored_at=0.0)
    await store.create_campaign(campaign_id="bench", manifest_digest=DIGEST, created_at=0.0, phase="measure")
    run = await store.start_run(campaign_id="bench", instance_id=None, machine_id=1, gpu_name="H100 SXM",
                                num_gpus=GPUS, workload_digest=DIGEST, variant_json="{}", started_at=0.0)
    return run.run_id


async def run(db_path: Path, *, seconds: int, repeats: int) -> None:
    async with await SqliteStore.open(db_path) as store:
        run_id = await open_run(store)
        samples, progress = telemetry(run_id, seconds=seconds, start_at=1.0)
        rows = len(samples) + len(progress)

        async def batched() -> None:
            await store.add_measurements(progress=progress, samples=samples)

        raw = sqlite3.connect(db_path, isolation_level=None)
        raw.execute("PRAGMA journal_mode = WAL")
        raw.execute("PRAGMA synchronous = FULL")
        raw.execute("PRAGMA foreign_keys = ON")

        async def plain_sqlite3() -> None:
            raw.execute("BEGIN")
            raw.executemany(
                "INSERT INTO progress (run_id, at, units_done, units_accepted, data_wait_s, compute_s, latencies_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(p.run_id, p.at, p.units_done, p.units_accepted, p.data_wait_s, p.compute_s,
                  json.dumps(list(p.latencies_s))) for p in progress])
            raw.executemany(
                "INSERT INTO gpu_samples (run_id, at, gpu_index, util_pct, mem_used_mib, mem_total_mib, power_w, "
                "pcie_rx_kib_s, pcie_tx_kib_s, sm_clock_mhz, mem_clock_mhz, throttle_reasons)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(s.run_id, s.at, s.gpu_index, s.util_pct, s.mem_used_mib, s.mem_total_mib, s.power_w,
                  s.pcie_rx_kib_s, s.pcie_tx_kib_s, s.sm_clock_mhz, s.mem_clock_mhz, s.throttle_reasons)
                 for s in samples])
            raw.execute("COMMIT")

        try:
            result = await compare_async(batched, plain_sqlite3, repeats=repeats, ours_ops=rows, baseline_ops=rows)
        finally:
            raw.close()
        stored = len(await store.gpu_samples(run_id=run_id)) + len(await store.progress(run_id=run_id))
        if stored != rows * 2 * (repeats + 1):
            raise SystemExit(f"expected {rows * 2 * (repeats + 1)} rows stored, found {stored}")
    print(f"# {len(samples)} GPU samples + {len(progress)} progress records per batch, median of {repeats}; "
          "baseline: plain sqlite3 executemany, one transaction, same file and pragmas")
    print(ratio_line("store.add_measurements per row vs plain sqlite3 executemany", result))
    print(rate_line("store.add_measurements rows/s vs plain sqlite3 executemany", result, unit="rows/s"))


def main() -> None:
    options = parse_options(__doc__)
    seconds, repeats = (2, 3) if options.quick else (60, 9)
    with tempfile.TemporaryDirectory(prefix="vastui-bench-store-") as folder:
        asyncio.run(run(Path(folder) / "bench.sqlite3", seconds=seconds, repeats=repeats))


if __name__ == "__main__":
    main()
