"""A campaign-like writer for the kill -9 test: runs and sample batches in a loop, one stdout line per commit.

Usage: python store_writer.py DB_PATH CAMPAIGN_ID BATCH. Each line names the transaction that has just committed:
``run ID``, ``samples ID COUNT``, ``finished ID THROUGHPUT`` -- except ``begin ID``, written just *before* a batch of
BATCH samples, so the test can kill the writer while that batch's transaction is in flight. It never stops by
itself; the test kills it.
"""

from __future__ import annotations

import asyncio
import sys

from vastui.store import GpuSample, RunStatus, SqliteStore

DIGEST = "sha256:crash-workload"


async def main(path: str, campaign_id: str, batch: int) -> None:
    store = await SqliteStore.open(path)
    await store.save_manifest(digest=DIGEST, name="crash", toml_text="name = 'crash'\n", stored_at=0.0)
    await store.create_campaign(campaign_id=campaign_id, manifest_digest=DIGEST, created_at=0.0, phase="measure")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    step = 0
    while True:
        step += 1
        run = await store.start_run(campaign_id=campaign_id, instance_id=step, machine_id=7, gpu_name="RTX 4090",
                                    num_gpus=1, workload_digest=DIGEST, variant_json="{}", started_at=float(step))
        sys.stdout.write(f"run {run.run_id}\n")
        sys.stdout.flush()
        samples = [GpuSample(run_id=run.run_id, at=step + i / batch, gpu_index=i % 2, util_pct=float(i % 100))
                   for i in range(batch)]
        sys.stdout.write(f"begin {run.run_id}\n")
        sys.stdout.flush()
        await store.add_measurements(samples=samples)
        sys.stdout.write(f"samples {run.run_id} {batch}\n")
        sys.stdout.flush()
        throughput = 100.0 + (run.run_id * 37) % 101
        await store.finish_run(run_id=run.run_id, status=RunStatus.OK, at=step + 1.0,
                               throughput_units_per_s=throughput)
        sys.stdout.write(f"finished {run.run_id} {throughput}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
