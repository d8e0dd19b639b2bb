"""Runs, batched telemetry, host knowledge (every run kept, best is a query) and bad hosts."""

from __future__ import annotations

import json

import pytest

from tests.store.store_support import DIGEST, FOREIGN_KEY
from vastui.errors import StoreError
from vastui.store import GpuSample, ProgressRecord, Run, RunStatus, Store


async def _run(store: Store, *, campaign_id: str = "c1", machine_id: int = 7, gpu_name: str = "RTX 4090",
               num_gpus: int = 1, status: RunStatus = RunStatus.OK, throughput: float | None = 100.0,
               digest: str = DIGEST) -> Run:
    run = await store.start_run(campaign_id=campaign_id, instance_id=machine_id * 10, machine_id=machine_id,
                                gpu_name=gpu_name, num_gpus=num_gpus, workload_digest=digest,
                                variant_json='{"batch": 64}', started_at=10.0)
    return await store.finish_run(run_id=run.run_id, status=status, at=90.0, throughput_units_per_s=throughput,
                                  stats_json=json.dumps({"blocks": 5}))


async def test_run_round_trip_with_phases_and_outcome(campaign_store: Store) -> None:
    store = campaign_store
    run = await store.start_run(campaign_id="c1", instance_id=555, machine_id=7, gpu_name="RTX 4090", num_gpus=2,
                                workload_digest=DIGEST, variant_json='{"precision": "bf16"}', started_at=10.0)
    assert run.status is RunStatus.RUNNING and run.pull_s is None
    assert await store.open_runs(campaign_id="c1") == [run]
    await store.record_run_phases(run_id=run.run_id, pull_s=41.5)
    phased = await store.record_run_phases(run_id=run.run_id, ready_s=3.25, warmup_s=30.0)
    assert (phased.pull_s, phased.ready_s, phased.warmup_s) == (41.5, 3.25, 30.0)
    done = await store.finish_run(run_id=run.run_id, status=RunStatus.OK, at=95.0, throughput_units_per_s=812.5,
                                  stats_json='{"median": 812.5}')
    assert done == await store.run(run.run_id)
    assert (done.status, done.finished_at, done.throughput_units_per_s, done.stats_json, done.num_gpus,
            done.variant_json, done.instance_id) == (RunStatus.OK, 95.0, 812.5, '{"median": 812.5}', 2,
                                                     '{"precision": "bf16"}', 555)
    assert await store.open_runs(campaign_id="c1") == []
    assert await store.runs(campaign_id="c1") == [done]
    assert await store.run(999) is None


async def test_a_run_is_finished_once(campaign_store: Store) -> None:
    run = await _run(campaign_store)
    with pytest.raises(StoreError, match="already ok"):
        await campaign_store.finish_run(run_id=run.run_id, status=RunStatus.ERROR, at=99.0, error="late")
    with pytest.raises(StoreError, match="final status"):
        await campaign_store.finish_run(run_id=run.run_id, status=RunStatus.RUNNING, at=99.0)
    with pytest.raises(StoreError, match="no such run"):
        await campaign_store.record_run_phases(run_id=999, pull_s=1.0)
    assert (await campaign_store.run(run.run_id)) == run


async def test_telemetry_batches_round_trip(campaign_store: Store) -> None:
    run = await _run(campaign_store)
    samples = [
        GpuSample(run_id=run.run_id, at=20.0 + i, gpu_index=i % 2, util_pct=50.0 + i, mem_used_mib=1000.0 + i,
                  mem_total_mib=24564.0, power_w=300.0, pcie_rx_kib_s=1e5, pcie_tx_kib_s=2e4, sm_clock_mhz=2520.0,
                  mem_clock_mhz=10501.0, throttle_reasons=4 if i == 3 else 0)
        for i in range(200)
    ]
    samples.append(GpuSample(run_id=run.run_id, at=300.0, gpu_index=0))  # a sample with every metric missing
    progress = [ProgressRecord(run_id=run.run_id, at=20.0 + i, units_done=64.0 * i, units_accepted=64.0 * i,
                               data_wait_s=0.1 * i, compute_s=1.0, latencies_s=(0.01, 0.02 * i)) for i in range(50)]
    progress.append(ProgressRecord(run_id=run.run_id, at=99.0, units_done=1.0, units_accepted=0.0))
    await campaign_store.add_measurements(samples=samples)
    await campaign_store.add_measurements(progress=progress)
    await campaign_store.add_measurements()  # nothing to do, no error
    assert await campaign_store.gpu_samples(run_id=run.run_id) == samples
    assert await campaign_store.gpu_samples(run_id=run.run_id, gpu_index=1) == [s for s in samples if s.gpu_index]
    assert await campaign_store.progress(run_id=run.run_id) == progress


async def test_a_batch_is_all_or_nothing(campaign_store: Store) -> None:
    run = await _run(campaign_store)
    progress = [ProgressRecord(run_id=run.run_id, at=1.0, units_done=1.0, units_accepted=1.0)]
    samples = [GpuSample(run_id=run.run_id, at=1.0, gpu_index=0), GpuSample(run_id=4242, at=1.0, gpu_index=0)]
    with pytest.raises(StoreError, match=FOREIGN_KEY):
        await campaign_store.add_measurements(progress=progress, samples=samples)
    assert await campaign_store.progress(run_id=run.run_id) == []
    assert await campaign_store.gpu_samples(run_id=run.run_id) == []


async def test_host_knowledge_keeps_every_run_and_the_best_of_each_host(campaign_store: Store) -> None:
    store = campaign_store
    first = await _run(store, campaign_id="c1", machine_id=7, throughput=100.0)
    better = await _run(store, campaign_id="c2", machine_id=7, throughput=130.0)  # another campaign, same host
    worse = await _run(store, campaign_id="c2", machine_id=7, throughput=90.0)  # must not overwrite the best
    failed = await _run(store, campaign_id="c2", machine_id=7, status=RunStatus.ERROR, throughput=999.0)
    other_host = await _run(store, machine_id=8, throughput=120.0)
    two_gpus = await _run(store, machine_id=8, num_gpus=2, throughput=210.0)
    other_gpu = await _run(store, machine_id=9, gpu_name="A100 SXM4", throughput=150.0)
    await _run(store, machine_id=7, throughput=5000.0, digest="sha256:another-workload")

    spread = await store.throughputs(machine_id=7, gpu_name="RTX 4090", num_gpus=1, workload_digest=DIGEST)
    assert spread == [100.0, 130.0, 90.0]

    knowledge = {(k.machine_id, k.gpu_name, k.num_gpus): k for k in await store.host_knowledge(workload_digest=DIGEST)}
    assert set(knowledge) == {(7, "RTX 4090", 1), (8, "RTX 4090", 1), (8, "RTX 4090", 2), (9, "A100 SXM4", 1)}
    known7 = knowledge[(7, "RTX 4090", 1)]
    assert (known7.n_runs, known7.n_ok, known7.best, known7.campaign_ids) == (4, 3, better, ("c1", "c2"))
    assert known7.runs == (first, better, worse, failed) and known7.throughputs_units_per_s == (100.0, 130.0, 90.0)
    assert {key: k.best for key, k in knowledge.items()} == {
        (7, "RTX 4090", 1): better, (8, "RTX 4090", 1): other_host, (8, "RTX 4090", 2): two_gpus,
        (9, "A100 SXM4", 1): other_gpu}
    only_8 = await store.host_knowledge(workload_digest=DIGEST, machine_ids=[8])
    assert {(k.machine_id, k.num_gpus) for k in only_8} == {(8, 1), (8, 2)}
    assert await store.host_knowledge(workload_digest=DIGEST, machine_ids=[]) == []


async def test_bad_hosts_expire_but_are_never_dropped(campaign_store: Store) -> None:
    store = campaign_store
    stuck = await store.record_bad_host(machine_id=7, reason="stuck in loading past the readiness deadline",
                                        evidence_json='{"deadline_s": 600, "status": "loading"}',
                                        recorded_at=1000.0, expires_at=2000.0, campaign_id="c1")
    wrong = await store.record_bad_host(machine_id=8, reason="wrong output digest", evidence_json='{"got": "ab"}',
                                        recorded_at=1100.0, expires_at=None)
    again = await store.record_bad_host(machine_id=7, reason="went offline", evidence_json="{}",
                                        recorded_at=1500.0, expires_at=5000.0)
    assert not stuck.is_expired and stuck.campaign_id == "c1" and wrong.expires_at is None
    assert [b.entry_id for b in await store.active_bad_hosts(now=1500.0)] == [
        stuck.entry_id, wrong.entry_id, again.entry_id]
    listed = await store.bad_hosts(now=3000.0)
    assert [(b.entry_id, b.is_expired) for b in listed] == [
        (stuck.entry_id, True), (wrong.entry_id, False), (again.entry_id, False)]
    assert listed[0].reason == stuck.reason and listed[0].evidence_json == stuck.evidence_json
    assert [b.entry_id for b in await store.active_bad_hosts(now=3000.0)] == [wrong.entry_id, again.entry_id]
    assert [b.entry_id for b in await store.bad_hosts(now=3000.0, machine_id=7)] == [stuck.entry_id, again.entry_id]
    assert [b.entry_id for b in await store.active_bad_hosts(now=9999.0)] == [wrong.entry_id]
    with pytest.raises(StoreError, match="machine 9"):
        await store.record_bad_host(machine_id=9, reason="x", evidence_json="nope", recorded_at=1.0, expires_at=None)
