"""The GPU-host agent in-process with a fake NVML, and as a real process: records, markers, digest, resume."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.fakes import FakeNvml
from vastui.remote import agent
from vastui.remote.protocol import AgentError, GpuSample, Phase, Progress, Record, Result, parse_record

AGENT = Path(agent.__file__)


def _gpu(util: float = 50.0) -> dict[str, float]:
    return {"util": util, "mem_util": 30.0, "mem_used_mib": 1000.0, "mem_total_mib": 24576.0, "power_w": 200.5,
            "pcie_rx": 5000.0, "pcie_tx": 100.0, "sm_clock": 2520.0, "temp": 60.0, "throttle": 0x20 | 0x1}


def _workload(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "workload.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    return [sys.executable, str(script)]


def _run(argv: list[str], nvml: object | None = None) -> list[Record]:
    out = io.StringIO()
    assert agent.main(argv, stream=out, nvml=nvml, handle_signals=False) == 0
    return [parse_record(line) for line in out.getvalue().splitlines()]


def _assert_protocol(records: list[Record]) -> None:
    seqs = [r.seq for r in records]
    assert seqs == list(range(1, len(records) + 1))
    assert isinstance(records[-1], Result)
    assert sum(isinstance(r, Result) for r in records) == 1


def test_markers_become_progress_and_phase_and_other_lines_the_digest(tmp_path: Path) -> None:
    argv = _workload(tmp_path, """
        import sys
        print('VASTUI {"phase": "warmup"}')
        print("prediction 1")
        print('VASTUI {"units": 32, "data_wait_s": 0.5, "compute_s": 1.5, "latency_ms": [10, 12.5]}')
        print('VASTUI {"phase": "measure", "detail": "steady"}')
        print('VASTUI {"units": 64, "accepted": 60, "compute_s": 2}')
        print("prediction 2")
        sys.stderr.write("a warning\\n")
    """)
    records = _run(["--no-nvml", "--", *argv])
    _assert_protocol(records)
    progress = [r for r in records if isinstance(r, Progress)]
    assert [(p.units, p.accepted, p.units_total, p.accepted_total, p.phase) for p in progress] == [
        (32, 32, 32, 32, "warmup"), (64, 60, 96, 92, "measure")]
    assert progress[0].latency_ms == (10.0, 12.5) and progress[0].data_wait_s == 0.5
    phases = [r for r in records if isinstance(r, Phase)]
    assert [p.name for p in phases] == ["ready", "warmup", "measure"]
    assert phases[2].detail == "steady"
    result = records[-1]
    assert isinstance(result, Result)
    expected = hashlib.sha256(b"prediction 1\nprediction 2\n").hexdigest()
    assert result.output_digest == f"sha256:{expected}" and result.output_bytes == 26
    assert result.exit_status == 0 and result.units_total == 96 and result.accepted_total == 92
    assert result.stderr_tail == "a warning\n"


def test_an_output_end_marker_gives_the_output_so_far_its_own_digest_and_the_rest_is_digested_afresh(
        tmp_path: Path) -> None:
    argv = _workload(tmp_path, """
        print('VASTUI {"units": 4}')
        print("prediction 1")
        print("prediction 2")
        print('VASTUI {"output": "end"}')
        print('VASTUI {"units": 4}')
        print("late line")
    """)
    records = _run(["--no-nvml", "--", *argv])
    _assert_protocol(records)
    marks = [r for r in records if isinstance(r, Phase) and r.is_output_end]
    assert len(marks) == 1
    assert marks[0].output_digest == "sha256:" + hashlib.sha256(b"prediction 1\nprediction 2\n").hexdigest()
    assert marks[0].output_bytes == 26
    # the mark sits between the two progress records, in the order the workload wrote them
    kinds = [type(r).__name__ for r in records if isinstance(r, Progress) or r in marks]
    assert kinds == ["Progress", "Phase", "Progress"]
    result = records[-1]
    assert isinstance(result, Result)
    assert result.output_digest == "sha256:" + hashlib.sha256(b"late line\n").hexdigest()
    assert result.output_bytes == len(b"late line\n")


@pytest.mark.parametrize("line", [
    "VASTUI {not json", "VASTUI [1, 2]", 'VASTUI {"units": -1}', 'VASTUI {"units": 3, "accepted": 4}',
    'VASTUI {"units": 1.5}', 'VASTUI {"units": 2, "compute_s": "x"}', 'VASTUI {"units": 2, "latency_ms": [NaN]}',
    'VASTUI {"phase": 7}', "VASTUI \xff\xfe", 'VASTUI {"output": "done"}',
])
def test_a_bad_marker_is_an_error_record_and_the_run_goes_on(tmp_path: Path, line: str) -> None:
    argv = _workload(tmp_path, f"""
        import sys
        sys.stdout.buffer.write({line.encode("latin-1")!r} + b"\\n")
        print('VASTUI {{"units": 8}}')
    """)
    records = _run(["--no-nvml", "--", *argv])
    _assert_protocol(records)
    errors = [r for r in records if isinstance(r, AgentError) and r.what == "bad_marker"]
    assert len(errors) == 1
    assert [r.units for r in records if isinstance(r, Progress)] == [8]
    result = records[-1]
    assert isinstance(result, Result) and result.output_bytes == 0  # a marker attempt is never output


def test_every_gpu_is_sampled_and_a_lost_gpu_is_reported_once_while_others_go_on(tmp_path: Path) -> None:
    nvml = FakeNvml([_gpu(10.0), _gpu(90.0)])
    nvml.lose(1, after_reads=2)
    out_file = tmp_path / "records.jsonl"
    # The workload ends only once the out file shows GPU 0 still sampled after GPU 1 was lost.
    argv = _workload(tmp_path, f"""
        import json, time
        deadline = time.time() + 20
        while time.time() < deadline:
            lines = [json.loads(l) for l in open({str(out_file)!r}) if l.strip()]
            lost = [r["seq"] for r in lines if r["kind"] == "error" and r["what"] == "gpu_lost"]
            if lost and sum(1 for r in lines if r["kind"] == "gpu" and r["index"] == 0 and r["seq"] > lost[0]) >= 2:
                break
            time.sleep(0.01)
        print('VASTUI {{"units": 1}}')
    """)
    records = _run(["--interval", "0.02", "--out", str(out_file), "--", *argv], nvml=nvml)
    _assert_protocol(records)
    lost = [r for r in records if isinstance(r, AgentError) and r.what == "gpu_lost"]
    assert len(lost) == 1 and lost[0].gpu == 1
    samples = [r for r in records if isinstance(r, GpuSample)]
    assert {s.index for s in samples if s.seq < lost[0].seq} == {0, 1}
    assert {s.index for s in samples if s.seq > lost[0].seq} == {0}
    assert sum(1 for s in samples if s.index == 0 and s.seq > lost[0].seq) >= 2
    first = samples[0]
    assert first.name == "NVIDIA GeForce RTX 4090" and first.util_pct == 10.0 and first.power_w == 200.5
    assert first.mem_used_mib == pytest.approx(1000.0) and first.mem_total_mib == pytest.approx(24576.0)
    assert first.pcie_rx_kib_s == 5000.0 and first.sm_clock_mhz == 2520.0
    assert first.throttle_reasons == ("gpu_idle", "sw_thermal")
    ready = next(r for r in records if isinstance(r, Phase))
    assert ready.name == "ready" and ready.gpu_count == 2 and ready.driver_version == "550.54.14"
    ticks: dict[float, list[int]] = {}
    for s in samples:
        ticks.setdefault(s.t, []).append(s.index)
    assert any(indexes == [0, 1] for indexes in ticks.values())  # one timestamp per tick, all GPUs read in it
    assert nvml.shutdown
    on_disk = [parse_record(line) for line in out_file.read_text().splitlines()]
    assert on_disk == records


def test_an_unsupported_metric_is_none_with_one_notice(tmp_path: Path) -> None:
    nvml = FakeNvml([_gpu()], unsupported=("power_w",))
    records = _run(["--interval", "0.01", "--", *_workload(tmp_path, "import time; time.sleep(0.1)")],
                   nvml=nvml)
    _assert_protocol(records)
    samples = [r for r in records if isinstance(r, GpuSample)]
    assert len(samples) >= 2 and all(s.power_w is None and s.util_pct == 50.0 for s in samples)
    notices = [r for r in records if isinstance(r, AgentError) and r.what == "metric_unavailable"]
    assert len(notices) == 1 and "power_w" in notices[0].message and notices[0].gpu == 0


@pytest.mark.parametrize("nvml", [FakeNvml([_gpu()], fail_init=True), None])
def test_without_nvml_the_agent_says_so_once_and_carries_on(tmp_path: Path, nvml: FakeNvml | None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(agent.ENV_NVML_MODULE, "vastui_no_such_nvml_module")
    argv = ["--interval", "0.01", "--", *_workload(tmp_path, 'print(\'VASTUI {"units": 4}\')')]
    records = _run(argv, nvml=nvml)
    _assert_protocol(records)
    notices = [r for r in records if isinstance(r, AgentError)]
    assert [n.what for n in notices] == ["nvml_unavailable"]
    assert not any(isinstance(r, GpuSample) for r in records)
    assert [r.units for r in records if isinstance(r, Progress)] == [4]


def test_a_workload_that_cannot_start_still_ends_in_a_result(tmp_path: Path) -> None:
    records = _run(["--no-nvml", "--", str(tmp_path / "no-such-program")])
    _assert_protocol(records)
    assert any(isinstance(r, AgentError) and r.what == "workload_start_failed" for r in records)
    result = records[-1]
    assert isinstance(result, Result) and result.exit_status == 127


def test_the_output_file_is_digested_when_named(tmp_path: Path) -> None:
    target = tmp_path / "predictions.bin"
    argv = _workload(tmp_path, f"open({str(target)!r}, 'wb').write(b'abc'); print('ignored')")
    records = _run(["--no-nvml", "--output-file", str(target), "--", *argv])
    result = records[-1]
    assert isinstance(result, Result)
    assert result.output_digest == "sha256:" + hashlib.sha256(b"abc").hexdigest() and result.output_bytes == 3
    records = _run(["--no-nvml", "--output-file", str(tmp_path / "missing"), "--", *argv])
    assert any(isinstance(r, AgentError) and r.what == "output_file_missing" for r in records)
    assert isinstance(records[-1], Result) and records[-1].output_digest is None


def test_timestamps_follow_a_scaled_clock(tmp_path: Path) -> None:
    anchor = time.time()
    argv = ["--no-nvml", "--time-scale", "100", "--time-origin", "5000", "--time-anchor", repr(anchor), "--",
            *_workload(tmp_path, "import time; time.sleep(0.2)")]
    records = _run(argv)
    wall = time.time() - anchor
    first, last = records[0], records[-1]
    assert 5000 <= first.t <= 5000 + 100 * wall
    assert isinstance(last, Result)
    assert last.elapsed_s >= 100 * 0.2 * 0.9  # 0.2 wall seconds are 20 clock seconds


def test_a_marker_is_stamped_with_the_workloads_own_time_kept_between_its_launch_and_now(tmp_path: Path) -> None:
    launch_file = tmp_path / "launched"
    argv = ["env", f"LAUNCH_FILE={launch_file}", *_workload(tmp_path, """
        import os, time
        launched = float(os.environ["VASTUI_LAUNCH_T"])
        open(os.environ["LAUNCH_FILE"], "w").write(repr(launched))
        time.sleep(0.3)
        print('VASTUI {"phase": "warmup", "t": 0}', flush=True)              # before the launch: the launch
        print('VASTUI {"units": 1, "t": %.6f}' % (launched + 0.05), flush=True)  # in the past: taken as is
        print('VASTUI {"units": 2, "t": 1e12}', flush=True)                 # the future: now
        print('VASTUI {"units": 3, "t": %.6f}' % launched, flush=True)        # before the last one: the last one
        print('VASTUI {"units": 4, "t": "soon"}', flush=True)               # not a time: a bad marker
        print('VASTUI {"units": 5}', flush=True)                            # no time: when the agent read it
    """)]
    before = time.time()
    records = _run(["--no-nvml", "--", *argv])
    after = time.time()
    _assert_protocol(records)
    ready = next(r for r in records if isinstance(r, Phase) and r.name == "ready")
    warmup = next(r for r in records if isinstance(r, Phase) and r.name == "warmup")
    progress = {r.units: r for r in records if isinstance(r, Progress)}
    assert sorted(progress) == [1, 2, 3, 5]
    launched = float(launch_file.read_text())   # the workload's launch as the agent told it
    # ``ready`` comes once the workload is launched, and is the floor: the marker's 0 is stamped at it, not at its
    # read time (nothing the agent did before the launch reads as the workload's start-up)
    assert launched <= ready.t == warmup.t <= before + 0.25
    assert progress[1].t == pytest.approx(launched + 0.05, abs=1e-5)  # 0.25 s before the agent read it
    assert launched + 0.3 <= progress[2].t <= after
    assert progress[3].t == progress[2].t
    assert launched + 0.3 <= progress[5].t <= after
    assert [r.what for r in records if isinstance(r, AgentError) and r.what != "nvml_unavailable"] == ["bad_marker"]


def test_a_workload_that_leaves_a_child_holding_its_output_still_ends_in_a_result(tmp_path: Path) -> None:
    argv = ["sh", "-c", "echo ok; exec 2>&-; sleep 30 & echo $! > %s; exit 0" % (tmp_path / "child.pid")]
    try:
        records = _run(["--no-nvml", "--", *argv])
    finally:
        child = (tmp_path / "child.pid").read_text().strip()
        os.kill(int(child), 9)
    _assert_protocol(records)
    result = records[-1]
    assert isinstance(result, Result) and result.exit_status == 0
    assert result.output_digest == "sha256:" + hashlib.sha256(b"ok\n").hexdigest()
    assert [r.what for r in records if isinstance(r, AgentError) and r.what != "nvml_unavailable"] == [
        "workload_left_children"]


def test_follow_resumes_from_a_seq_and_stops_at_the_result(tmp_path: Path) -> None:
    out_file = tmp_path / "records.jsonl"
    _run(["--no-nvml", "--out", str(out_file), "--", *_workload(tmp_path, 'print(\'VASTUI {"units": 1}\')')])
    total = len(out_file.read_text().splitlines())
    out = io.StringIO()
    assert agent.follow(str(out_file), 3, None, out) == 0
    assert [parse_record(line).seq for line in out.getvalue().splitlines()] == list(range(3, total + 1))


def test_follow_gives_up_when_the_agent_is_gone_without_a_result(tmp_path: Path) -> None:
    out_file, pid_file = tmp_path / "records.jsonl", tmp_path / "agent.pid"
    out_file.write_text('{"kind":"phase","seq":1,"t":1.0,"name":"ready"}\n{"kind":"gpu","seq":2,"t":1.5,"ind')
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid_file.write_text(json.dumps({"agent": int(dead.stdout), "workload": None}))
    out = io.StringIO()
    assert agent.follow(str(out_file), 1, str(pid_file), out, poll_s=0.01) == agent.EXIT_AGENT_GONE
    assert out.getvalue().splitlines() == ['{"kind":"phase","seq":1,"t":1.0,"name":"ready"}']  # no partial line


def test_the_follower_starts_without_loading_threads_processes_or_digests(tmp_path: Path) -> None:
    """Every run starts the agent twice before its workload (the detaching start and the follower): neither may pay
    for modules only the run itself needs. Checked by what the follower's interpreter has loaded, never by time."""
    out_file = tmp_path / "records.jsonl"
    _run(["--no-nvml", "--out", str(out_file), "--", *_workload(tmp_path, 'print(\'VASTUI {"units": 1}\')')])
    probe = ("import io, json, runpy, sys\n"
             f"sys.argv = ['agent.py', '--follow', {str(out_file)!r}]\n"
             "sys.stdout = io.StringIO()\n"
             "try:\n"
             f"    runpy.run_path({str(AGENT)!r}, run_name='__main__')\n"
             "except SystemExit as exc:\n"
             "    code = exc.code\n"
             "lines = sys.stdout.getvalue().splitlines()\n"
             "sys.stdout = sys.__stdout__\n"
             "print(json.dumps({'code': code, 'records': len(lines), 'modules': sorted(sys.modules)}))\n")
    done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True,
                          timeout=120)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0 and report["records"] == len(out_file.read_text().splitlines())
    assert not [name for name in ("subprocess", "threading", "hashlib") if name in report["modules"]]


def test_detach_then_stop_ends_the_workload_with_a_result(tmp_path: Path) -> None:
    out_file, pid_file = tmp_path / "run" / "records.jsonl", tmp_path / "run" / "agent.pid"
    argv = _workload(tmp_path, """
        import time
        print('VASTUI {"phase": "measure"}', flush=True)
        time.sleep(60)
    """)
    started = subprocess.run([sys.executable, str(AGENT), "--detach", "--no-nvml", "--out", str(out_file),
                              "--pid-file", str(pid_file), "--", *argv], capture_output=True, text=True, timeout=30)
    assert started.returncode == 0, started.stderr
    pid = json.loads(started.stdout)["pid"]
    deadline = time.monotonic() + 20
    while '"measure"' not in (out_file.read_text() if out_file.exists() else ""):
        assert time.monotonic() < deadline, "the detached agent never ran the workload"
        time.sleep(0.02)
    workload_pid = json.loads(pid_file.read_text())["workload"]
    stopped = subprocess.run([sys.executable, str(AGENT), "--stop", "--pid-file", str(pid_file)],
                             capture_output=True, text=True, timeout=30)
    assert stopped.returncode == 0 and json.loads(stopped.stdout) == {"stopped": pid, "killed": []}
    records = [parse_record(line) for line in out_file.read_text().splitlines()]
    _assert_protocol(records)
    result = records[-1]
    assert isinstance(result, Result) and result.signal == "SIGTERM" and result.exit_status is None
    assert not agent._is_alive(workload_pid)


def test_a_run_started_twice_runs_one_agent(tmp_path: Path) -> None:
    """The runner starts a run again when the connection was cut during its start and no pid file is there yet;
    the second start must not run a second agent into the same records: it names the first one and leaves."""
    out_file, pid_file = tmp_path / "run" / "records.jsonl", tmp_path / "run" / "agent.pid"
    argv = _workload(tmp_path, """
        import time
        print('VASTUI {"phase": "measure"}', flush=True)
        time.sleep(60)
    """)
    start = [sys.executable, str(AGENT), "--detach", "--no-nvml", "--out", str(out_file), "--pid-file",
             str(pid_file), "--", *argv]
    first = subprocess.run(start, capture_output=True, text=True, timeout=30)
    second = subprocess.run(start, capture_output=True, text=True, timeout=30)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    pid = json.loads(first.stdout)["pid"]
    assert json.loads(second.stdout) == {"pid": pid, "already": True}
    deadline = time.monotonic() + 20
    while '"measure"' not in (out_file.read_text() if out_file.exists() else ""):
        assert time.monotonic() < deadline, "the detached agent never ran the workload"
        time.sleep(0.02)
    stopped = subprocess.run([sys.executable, str(AGENT), "--stop", "--pid-file", str(pid_file)],
                             capture_output=True, text=True, timeout=30)
    assert stopped.returncode == 0
    starts = [line for line in out_file.read_text().splitlines() if '"ready"' in line]
    assert len(starts) == 1, starts     # one agent wrote the records


def test_the_agent_is_python_3_8_source_with_only_the_standard_library() -> None:
    source = AGENT.read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module is not None
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported
    for node in ast.walk(tree):  # 3.9+ APIs and syntax newer than 3.8 stay out
        if isinstance(node, ast.Attribute):
            assert node.attr not in {"removeprefix", "removesuffix", "is_relative_to", "bit_count"}, node.attr
        assert type(node).__name__ not in {"Match", "TryStar"}


def _python38() -> str | None:
    candidates = [Path.home() / ".pyenv" / "versions", Path("/usr/bin")]
    for base in candidates:
        for found in sorted(base.glob("3.8*/bin/python3.8")) + sorted(base.glob("python3.8")):
            return str(found)
    return None


PYTHON38 = _python38()
FAKE_NVML_SOURCE = '''
class NVMLError(Exception):
    def __init__(self, value):
        Exception.__init__(self, "NVML error %d" % value)
        self.value = value
class _R:
    def __init__(self, **kw):
        self.__dict__.update(kw)
NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES, NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = 0, 1, 1, 0
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "550.54.14"
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return "Fake GPU"
def nvmlDeviceGetUUID(h): return "GPU-0"
def nvmlDeviceGetUtilizationRates(h): return _R(gpu=42, memory=7)
def nvmlDeviceGetMemoryInfo(h): return _R(used=2**30, total=2**34, free=2**34 - 2**30)
def nvmlDeviceGetPowerUsage(h): return 123000
def nvmlDeviceGetPcieThroughput(h, c): return 10
def nvmlDeviceGetClockInfo(h, c): return 1500
def nvmlDeviceGetTemperature(h, s): return 50
def nvmlDeviceGetCurrentClocksThrottleReasons(h): raise NVMLError(3)
'''


@pytest.mark.skipif(PYTHON38 is None, reason="no python3.8 interpreter on this machine (the AST check still runs)")
def test_the_agent_runs_under_a_real_python_3_8(tmp_path: Path) -> None:
    assert PYTHON38 is not None
    (tmp_path / "fake_nvml38.py").write_text(FAKE_NVML_SOURCE, encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path), "VASTUI_NVML_MODULE": "fake_nvml38"}
    workload = [PYTHON38, "-c", "import time; print('VASTUI {\"units\": 5}'); print('out'); time.sleep(0.1)"]
    done = subprocess.run([PYTHON38, str(AGENT), "--interval", "0.02", "--", *workload], capture_output=True,
                          text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records = [parse_record(line) for line in done.stdout.splitlines()]
    _assert_protocol(records)
    ready = records[0] if isinstance(records[0], Phase) else records[1]
    assert isinstance(ready, Phase) and ready.python is not None and ready.python.startswith("3.8.")
    samples = [r for r in records if isinstance(r, GpuSample)]
    assert samples and samples[0].util_pct == 42.0 and samples[0].throttle_reasons is None
    assert [r.units for r in records if isinstance(r, Progress)] == [5]
    result = records[-1]
    assert isinstance(result, Result) and result.output_digest == "sha256:" + hashlib.sha256(b"out\n").hexdigest()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are told apart through /proc")
def test_a_zombie_counts_as_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 20
    while agent._is_alive(child.pid):  # exited but not reaped: a zombie, as under a PID 1 that never reaps
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    assert child.poll() == 0  # it was still ours to reap: it was a zombie, not gone
    assert agent._is_alive(os.getpid())


class _WallClock:
    """A settable stand-in for ``time.time`` as the agent module sees it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_scaled_clock_counts_the_agents_own_start_at_wall_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    # The exec request came at wall 1000.0 (simulated 5000.0, x300); the agent's interpreter took 0.4 wall seconds
    # to start: 120 simulated seconds that a simulated machine would not spend. Counted at scale 1 it is 0.4 s,
    # and from there the clock runs at its scale again.
    wall = _WallClock(1000.4)
    monkeypatch.setattr("vastui.remote.agent.time.time", wall)
    clock = agent.AgentClock(300.0, 5000.0, 1000.0)
    assert clock.now() == pytest.approx(5120.0)
    clock.count_start_at_scale_one()
    assert clock.now() == pytest.approx(5000.4)
    wall.now += 1.0
    assert clock.now() == pytest.approx(5300.4)
    real = agent.AgentClock(1.0, 5000.0, 1000.0)          # a real host: nothing to discount
    real.count_start_at_scale_one()
    assert real.now() == pytest.approx(5001.4)
