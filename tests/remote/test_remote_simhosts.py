"""The real agent on simulated hosts, driven over SSH by the runner: what the records say matches the hidden truth.

Every assertion about speed, utilisation, data-wait and correctness is made from the records the runner streams;
the truth is only used to compute what those records should say.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import signal
import statistics
import time
from pathlib import Path

import asyncssh
import pytest

from tests.remote.remote_support import (
    ClientKey,
    gpu_samples_in_measure,
    make_machine,
    measured,
    put_bytes,
    workload,
)
from vastui.bench.manifest import MeasureRule, WarmupRule
from vastui.campaign.measure import BlockMeter
from vastui.errors import RemoteError
from vastui.remote.agent import _is_alive
from vastui.remote.protocol import AgentError, GpuSample, Phase, Progress, Record, Result
from vastui.remote.runner import AgentRun, SshRunner
from vastui.sim.hosts import SshHostPool
from vastui.sim.physics import HostSpec, Precision, Variant, expected_units_per_s, plan_step
from vastui.sim.simworkload import WARMUP_SLOWDOWN, predictions
from vastui.sim.truth import Fault

pytestmark = pytest.mark.slow  # seconds of real processes or pictures: the full suite runs them

INPUT = b"".join(json.dumps({"id": i, "seed": 1000 + i}).encode() + b"\n" for i in range(24))


async def _gone_within(*pids: int, seconds: float) -> bool:
    """Whether every pid has exited within ``seconds`` (a stop is asynchronous; a loaded machine is slow to reap)."""
    deadline = time.monotonic() + seconds
    while any(_is_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def _run(runner: SshRunner, host: str, port: int, argv: list[str], *, interval_s: float = 2.0) -> list[Record]:
    async with runner.connect(host, port, deadline_s=30) as conn, conn.run_agent(argv, interval_s=interval_s) as run:
        records = [record async for record in run]
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert isinstance(records[-1], Result) and run.result is records[-1]
    return records


def _throughput_from_steps(progress: list[Progress]) -> float:
    return sum(p.units for p in progress) / sum(sum(p.latency_ms) / 1000.0 for p in progress)


def _throughput_from_timestamps(progress: list[Progress]) -> float:
    return sum(p.units for p in progress[1:]) / (progress[-1].t - progress[0].t)


def _workload_start(records: list[Record]) -> float:
    """When the workload began (its first phase marker): faults count from here, on the simulator's clock."""
    return next(r.t for r in records if isinstance(r, Phase) and r.name != "ready")


def _data_wait_share(progress: list[Progress]) -> float:
    wait = sum(p.data_wait_s for p in progress)
    return wait / (wait + sum(p.compute_s for p in progress))


async def test_a_compute_bound_host_reports_its_true_speed_busy_gpus_and_no_data_wait(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    machine = make_machine(num_gpus=2, noise_cv=0.03)
    host, port = await pool.start_host(instance_id=1, machine=machine, authorized_keys=[client_key.public])
    wall_started = time.monotonic()
    records = await _run(runner, host, port, workload("--steps", "120", "--batch", "32", "--loaders", "8"))
    wall_s = time.monotonic() - wall_started
    ready = records[0]
    assert isinstance(ready, Phase) and ready.name == "ready" and ready.gpu_count == 2
    assert ready.driver_version == machine.driver_version
    truth = expected_units_per_s(HostSpec.from_machine(machine), Variant(batch_size=32, loaders=8))
    progress = measured(records)
    tolerance = 4 * machine.truth.noise_cv + 0.01  # the run's noise factor is clipped at 4 CV
    assert _throughput_from_steps(progress) == pytest.approx(truth, rel=tolerance)
    assert _throughput_from_timestamps(progress) == pytest.approx(truth, rel=tolerance + 0.05)
    assert _data_wait_share(progress) < 0.01
    busy = gpu_samples_in_measure(records, index=0)
    idle = gpu_samples_in_measure(records, index=1)  # the workload uses one of the two GPUs
    assert len(busy) >= 5
    assert statistics.mean(s.util_pct or 0.0 for s in busy) > 90
    assert statistics.mean(s.util_pct or 0.0 for s in idle) < 5
    assert all((s.mem_used_mib or 0.0) > 4000 and (s.power_w or 0.0) > 300 for s in busy)
    assert all(not s.is_throttled for s in busy)
    result = records[-1]
    assert isinstance(result, Result) and result.exit_status == 0
    assert result.units_total == sum(p.units for p in records if isinstance(p, Progress)) == 120 * 32
    steps_s = sum(sum(p.latency_ms) for p in records if isinstance(p, Progress)) / 1000.0
    assert result.t - ready.t >= steps_s > 10 * wall_s  # timestamps run on the simulator's (50x) clock


async def test_a_data_bound_host_shows_low_utilisation_and_high_data_wait(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    machine = make_machine(data_units_per_s_per_loader=15.0, max_loaders=2)
    host, port = await pool.start_host(instance_id=2, machine=machine, authorized_keys=[client_key.public])
    records = await _run(runner, host, port, workload("--steps", "40", "--loaders", "8", "--warmup-steps", "5"))
    progress = measured(records)
    assert _data_wait_share(progress) > 0.5
    samples = gpu_samples_in_measure(records)
    assert len(samples) >= 5 and statistics.mean(s.util_pct or 0.0 for s in samples) < 50
    truth = expected_units_per_s(HostSpec.from_machine(machine), Variant(loaders=8))
    assert truth == pytest.approx(2 * 15.0)  # only 2 loaders are usable: the input path is the bottleneck
    assert _throughput_from_steps(progress) == pytest.approx(truth, rel=4 * machine.truth.noise_cv + 0.01)


async def test_a_wrong_output_host_gives_a_different_digest_for_the_same_input(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    digests = []
    for instance_id, fault in ((3, Fault.NONE), (4, Fault.WRONG_OUTPUT), (5, Fault.NONE)):
        host, port = await pool.start_host(instance_id=instance_id, machine=make_machine(fault=fault),
                                           authorized_keys=[client_key.public])
        async with runner.connect(host, port, deadline_s=30) as conn:
            await put_bytes(conn, INPUT, remote_path="inputs/canary.jsonl")
        records = await _run(runner, host, port, workload("--steps", "20", "--input", "inputs/canary.jsonl"))
        result = records[-1]
        assert isinstance(result, Result) and result.exit_status == 0
        digests.append(result.output_digest)
    assert digests[0] == digests[2] != digests[1]
    expected = hashlib.sha256("".join(predictions(INPUT, wrong=False)).encode()).hexdigest()
    assert digests[0] == f"sha256:{expected}"


async def test_killing_the_ssh_connection_mid_run_loses_no_records(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=6, machine=make_machine(), authorized_keys=[client_key.public])
    records: list[Record] = []
    drops = 0
    async with runner.connect(host, port, deadline_s=30) as conn, \
            conn.run_agent(workload("--steps", "80"), interval_s=1.0) as run:
        async for record in run:
            records.append(record)
            if isinstance(record, Progress) and drops < 2 and record.units_total in (320, 960):
                drops += pool.drop_connections(instance_id=6)
    assert drops >= 2 and run.reconnects >= 2
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    result = records[-1]
    assert isinstance(result, Result) and result.exit_status == 0 and result.units_total == 80 * 32
    on_host = (pool.root_dir(instance_id=6) / run.out_path).read_text().splitlines()
    assert len(on_host) == len(records)  # everything the agent wrote reached us, exactly once


async def test_leaving_a_run_early_stops_the_remote_agent_and_its_workload(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=7, machine=make_machine(), authorized_keys=[client_key.public])
    async with runner.connect(host, port, deadline_s=30) as conn, conn.run_agent(workload("--steps", "0")) as run:
        async for record in run:
            if isinstance(record, Progress):
                break
    root = pool.root_dir(instance_id=7)
    pids = json.loads((root / run.pid_path).read_text())
    assert await _gone_within(pids["agent"], pids["workload"], seconds=20.0)
    last = json.loads((root / run.out_path).read_text().splitlines()[-1])
    assert last["kind"] == "result" and last["signal"] == "SIGTERM"


async def test_a_host_that_dies_mid_run_goes_away_and_the_run_fails(
        pool: SshHostPool, client_key: ClientKey, tmp_path: Path) -> None:
    died: list[tuple[int, str]] = []

    async def on_died(instance_id: int, *, reason: str) -> None:
        died.append((instance_id, reason))

    pool.on_host_died = on_died
    runner = SshRunner(known_hosts=tmp_path / "kh", client_keys=[client_key.path],
                       use_agent=False, retry_interval_s=0.05, reconnect_deadline_s=1.0)
    machine = make_machine(fault=Fault.DIES_MID_RUN, fault_after_s=30.0)
    host, port = await pool.start_host(instance_id=8, machine=machine, authorized_keys=[client_key.public])
    records: list[Record] = []
    with pytest.raises(RemoteError):
        async with runner.connect(host, port, deadline_s=30) as conn, \
                conn.run_agent(workload("--steps", "400")) as run:
            async for record in run:
                records.append(record)
    assert died == [(8, "the machine went down mid-run")] and not pool.is_running(instance_id=8)
    assert not any(isinstance(r, Result) for r in records)
    progress = [r for r in records if isinstance(r, Progress)]
    assert progress and 20.0 < progress[-1].t - _workload_start(records) <= 30.0 + 2.0  # nothing after death
    assert run.result is None


async def test_a_throttling_host_slows_down_and_says_why(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    machine = make_machine(fault=Fault.THROTTLES, fault_after_s=30.0, noise_cv=0.01)
    host, port = await pool.start_host(instance_id=9, machine=machine, authorized_keys=[client_key.public])
    records = await _run(runner, host, port, workload("--steps", "200", "--warmup-steps", "0"))
    start = _workload_start(records)
    progress = [r for r in records if isinstance(r, Progress)]
    early = [p for p in progress if p.t - start < 25]
    late = [p for p in progress if p.t - start > 40]
    assert early and late
    assert _throughput_from_steps(late) == pytest.approx(0.6 * _throughput_from_steps(early), rel=0.06)
    samples = [r for r in records if isinstance(r, GpuSample) and r.index == 0]
    assert any(s.is_throttled and "hw_slowdown" in (s.throttle_reasons or ()) for s in samples if s.t - start > 40)
    assert not any(s.is_throttled for s in samples if s.t - start < 25)


@pytest.mark.parametrize(("compute_units_per_s", "cap_at_marker"), [(80.0, 2), (40.0, 1)])
async def test_a_warmup_the_cap_ends_early_is_priced_at_its_true_extra_time(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey, compute_units_per_s: float,
        cap_at_marker: int) -> None:
    """A big batch at ten steps a marker: the slow start fills the first marker, and the cap (the benchmark's fast
    warm-up rule) comes at the second, or already at the first on a slower GPU. What warm-up costs production is
    the slow start's extra time over its steps at the settled pace. Priced from the warm-up's markers alone it read
    0 s in both cases (the median of two markers is their mean; one marker is its own pace), and a claim's cost
    interval missed its truth on every such host; the run's blocks say the pace."""
    machine = make_machine(noise_cv=0.01, compute_units_per_s=compute_units_per_s)
    step = plan_step(HostSpec.from_machine(machine), Variant(batch_size=256, precision=Precision.FP32, loaders=8))
    warmup_steps = 10    # the simulated workload's default: its first step takes (1 + WARMUP_SLOWDOWN) x, decaying
    extra_s = step.compute_s * WARMUP_SLOWDOWN * sum(1.0 - i / warmup_steps for i in range(warmup_steps))
    rule = WarmupRule(min_s=10.0, min_steps=5, cv_max=0.05, window=5, cap_s=60.0)
    marker_ends_s = [warmup_steps * step.compute_s * (n + 1) + extra_s for n in range(3)]
    assert step.fits and step.data_s < step.compute_s    # compute-bound: every step is the GPU's
    assert [end_s >= rule.cap_s for end_s in marker_ends_s].index(True) + 1 == cap_at_marker
    host, port = await pool.start_host(instance_id=12, machine=machine, authorized_keys=[client_key.public])
    records = await _run(runner, host, port, workload("--steps", "40", "--batch", "256", "--precision", "fp32",
                                                      "--loaders", "8", "--report-every", "10"))
    meter = BlockMeter(warmup=rule, measure=MeasureRule(block_s=10.0, block_min_steps=3))
    for record in records:
        meter.add(record)
    assert meter.warmup is not None and meter.warmup.is_capped
    assert meter.warmup.steps == cap_at_marker * warmup_steps and len(meter.blocks) == 4 - cap_at_marker
    tolerance = 4 * machine.truth.noise_cv + 0.05   # the run's factor (clipped at 4 CV) scales every step alike
    assert meter.warmup_lost_s() == pytest.approx(extra_s, rel=tolerance), (meter.warmup, extra_s)


async def test_a_batch_too_big_for_vram_fails_like_cuda(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=10, machine=make_machine(), authorized_keys=[client_key.public])
    records = await _run(runner, host, port, workload("--batch", "512"))
    result = records[-1]
    assert isinstance(result, Result) and result.exit_status == 1
    assert "CUDA out of memory" in result.stderr_tail
    assert not any(isinstance(r, Progress) for r in records)
    assert not any(isinstance(r, AgentError) for r in records)


async def test_cancelling_a_run_stops_the_remote_agent(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=11, machine=make_machine(), authorized_keys=[client_key.public])
    progressed = asyncio.Event()
    runs: list[AgentRun] = []

    async def consume() -> None:
        async with runner.connect(host, port, deadline_s=30) as conn, conn.run_agent(workload("--steps", "0")) as run:
            runs.append(run)
            async for record in run:
                if isinstance(record, Progress):
                    progressed.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(progressed.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    root = pool.root_dir(instance_id=11)
    pids = json.loads((root / runs[0].pid_path).read_text())
    assert await _gone_within(pids["agent"], pids["workload"], seconds=20.0)
    assert json.loads((root / runs[0].out_path).read_text().splitlines()[-1])["signal"] == "SIGTERM"


async def test_a_held_host_uses_one_connection_for_every_channel_and_survives_a_drop(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=9, machine=make_machine(), authorized_keys=[client_key.public])
    async with runner.connect(host, port, deadline_s=30) as conn:
        await put_bytes(conn, INPUT, remote_path="inputs/canary.jsonl")
        for _ in range(2):   # two agent runs (each a connect of its own, shared) and a command
            records = await _run(runner, host, port, workload("--steps", "10", "--input", "inputs/canary.jsonl"))
            assert isinstance(records[-1], Result) and records[-1].exit_status == 0
        assert (await conn.run_command(["true"])).exit_status == 0
        assert runner.connections_opened == 1
        dropped = 0
        async with conn.run_agent(workload("--steps", "40")) as run:
            async for record in run:
                if isinstance(record, Progress) and dropped == 0:
                    dropped = pool.drop_connections(instance_id=9)
        assert dropped == 1 and run.reconnects == 1 and isinstance(run.result, Result)
        assert (await conn.run_command(["true"])).exit_status == 0
        assert runner.connections_opened == 2          # the drop's replacement is kept and reused
    assert not runner._held and conn.is_closed       # the block is over: its connection is closed


async def test_a_workload_starved_of_cpu_is_timed_by_its_work_not_by_when_its_markers_arrive(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    # On a scaled clock a busy console machine would stretch every stall (0.5 wall seconds are 25 simulated ones
    # here); the simulated GPU is not slowed by it, so neither is the measured throughput.
    machine = make_machine(noise_cv=0.02)
    host, port = await pool.start_host(instance_id=21, machine=machine, authorized_keys=[client_key.public])
    records: list[Record] = []
    paused = False
    async with runner.connect(host, port, deadline_s=30) as conn, \
            conn.run_agent(workload("--steps", "100", "--batch", "32"), interval_s=1.0) as run:
        async for record in run:
            records.append(record)
            if not paused and isinstance(record, Progress) and record.phase == "measure":
                pids = json.loads((pool.root_dir(instance_id=21) / run.pid_path).read_text())
                os.kill(pids["workload"], signal.SIGSTOP)
                await asyncio.sleep(0.5)  # the stall itself (the stimulus), not a wait for something
                os.kill(pids["workload"], signal.SIGCONT)
                paused = True
    assert paused
    truth = expected_units_per_s(HostSpec.from_machine(machine), Variant(batch_size=32))
    progress = measured(records)
    assert _throughput_from_timestamps(progress) == pytest.approx(truth, rel=4 * machine.truth.noise_cv + 0.05)
    # Every marker's interval is its own steps' time: the stall shows in none (it would be 25 s in one of them,
    # and the burst of markers behind it would have intervals near zero).
    gaps = [later.t - earlier.t - sum(later.latency_ms) / 1000.0 for earlier, later in itertools.pairwise(progress)]
    assert len(gaps) >= 5 and max(abs(gap) for gap in gaps) < 0.05


async def test_the_workloads_own_start_and_the_agents_work_before_it_are_no_part_of_its_init(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    # An interpreter start takes real time (0.05-0.5 s, more on a busy machine), and so does the agent's own work
    # before the launch: ×50 even milliseconds of either would read as "workload init" the simulated machine's
    # truth does not have (and the oracle's cost leaves out). ``ready`` comes at the launch, the work starts there.
    host, port = await pool.start_host(instance_id=22, machine=make_machine(), authorized_keys=[client_key.public])
    records = await _run(runner, host, port, workload("--steps", "5"))
    ready = next(r for r in records if isinstance(r, Phase))
    assert ready.name == "ready"
    assert _workload_start(records) - ready.t == pytest.approx(0.0, abs=1e-5)


@pytest.mark.parametrize("when", ["upload", "before", "after"])
async def test_a_connection_cut_while_the_agent_starts_is_reconnected_and_the_agent_started_once(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey, when: str) -> None:
    """Found by the chaos campaigns: an SSH cut at the agent's start failed the whole candidate. Cut during the
    upload or before the start command ran, they are done again; cut after it ran (no answer came), the agent is
    not started twice."""
    host, port = await pool.start_host(instance_id=11, machine=make_machine(), authorized_keys=[client_key.public])
    if when == "upload":
        pool.cut_next_sftp(instance_id=11)
    else:
        pool.cut_next_command(instance_id=11, when=when)
    records = await _run(runner, host, port, workload("--steps", "40"), interval_s=1.0)
    result = records[-1]
    assert isinstance(result, Result) and result.exit_status == 0 and result.units_total == 40 * 32
    runs = pool.root_dir(instance_id=11) / runner.remote_dir / "runs"
    on_host = [line for f in runs.glob("*/records.jsonl") for line in f.read_text().splitlines()]
    assert len(on_host) == len(records)  # one agent wrote them, and every one reached us exactly once


async def test_a_connection_cut_while_a_file_is_written_is_reconnected_and_the_file_written_whole(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=12, machine=make_machine(), authorized_keys=[client_key.public])
    async with runner.connect(host, port, deadline_s=30) as conn:
        pool.cut_next_sftp(instance_id=12)
        await put_bytes(conn, INPUT, remote_path="inputs/canary.jsonl")
    assert (pool.root_dir(instance_id=12) / "inputs" / "canary.jsonl").read_bytes() == INPUT


async def test_a_channel_the_client_closes_mid_output_leaves_the_connections_other_channels_alone(
        pool: SshHostPool, client_key: ClientKey) -> None:
    """A follower the client leaves while its command still writes must not take down the connection it shares
    with an agent's start (sshd stops that channel's output; the connection lives on)."""
    host, port = await pool.start_host(instance_id=12, machine=make_machine(), authorized_keys=[client_key.public])
    async with asyncssh.connect(host, port, username="root", client_keys=[str(client_key.path)], known_hosts=None,
                                agent_path=None) as conn:
        # It ignores the hang-up, so it writes on after the client left, as a command between two writes does.
        chatty = await conn.create_process("trap '' HUP; for i in $(seq 40); do echo tick; sleep 0.01; done")
        assert await chatty.stdout.readline() == "tick\n"
        chatty.close()
        await chatty.wait_closed()
        other = await conn.run("sleep 1; echo still here", check=False, timeout=30)   # spans the rest of its writes
        assert other.exit_status == 0 and isinstance(other.stdout, str) and other.stdout.strip() == "still here"
        assert (await conn.run("true", check=False, timeout=30)).exit_status == 0
