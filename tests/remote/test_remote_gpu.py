"""The agent's real NVML path (pynvml from nvidia-ml-py) on a machine with an NVIDIA GPU; skips without a driver.

Run on a GPU machine with:  .venv/bin/python -m pytest -q -s -m gpu tests/remote/test_remote_gpu.py
(-s prints the records, to quote them). The load comes from the CUDA driver API through ctypes (device memsets in
a loop), so no framework is needed: only the driver that NVML itself needs.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vastui.remote import agent
from vastui.remote.protocol import AgentError, GpuSample, Phase, Record, Result, parse_record

pytestmark = pytest.mark.gpu

CUDA_LOAD = textwrap.dedent("""
    import ctypes, sys, time
    cuda = ctypes.CDLL("libcuda.so.1")
    def check(status, what):
        if status != 0:
            sys.exit("%s failed with CUDA error %d" % (what, status))
    check(cuda.cuInit(0), "cuInit")
    device, context, buffer = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    check(cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device), "cuCtxCreate")
    size = 2 << 30
    check(cuda.cuMemAlloc_v2(ctypes.byref(buffer), ctypes.c_size_t(size)), "cuMemAlloc")
    print('VASTUI {"phase": "measure"}', flush=True)
    deadline, rounds = time.time() + float(sys.argv[1]), 0
    while time.time() < deadline:
        for value in range(16):
            check(cuda.cuMemsetD32_v2(buffer, ctypes.c_uint(value), ctypes.c_size_t(size // 4)), "cuMemsetD32")
        check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        rounds += 1
    print('VASTUI {"units": %d}' % rounds, flush=True)
""")


@pytest.fixture(scope="module")
def gpu_count() -> int:
    try:
        import pynvml  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
        pytest.skip(f"pynvml (nvidia-ml-py) is not installed: {exc}")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        pytest.skip(f"no NVIDIA driver here: {exc}")
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def _agent(tmp_path: Path, workload: list[str], *, interval_s: float) -> list[Record]:
    done = subprocess.run([sys.executable, str(Path(agent.__file__)), "--interval", str(interval_s), "--",
                           *workload], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    print("\n" + done.stdout)
    records = [parse_record(line) for line in done.stdout.splitlines()]
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert isinstance(records[-1], Result)
    return records


def _assert_plausible(sample: GpuSample) -> None:
    assert sample.name and sample.uuid and sample.uuid.startswith("GPU-")
    assert sample.util_pct is not None and 0.0 <= sample.util_pct <= 100.0
    assert sample.mem_total_mib is not None and sample.mem_total_mib > 1000
    assert sample.mem_used_mib is not None and 0.0 <= sample.mem_used_mib <= sample.mem_total_mib
    assert sample.power_w is None or 1.0 < sample.power_w < 1500.0
    assert sample.sm_clock_mhz is None or 0.0 < sample.sm_clock_mhz < 4000.0
    assert sample.temp_c is None or 5.0 < sample.temp_c < 110.0
    assert sample.pcie_rx_kib_s is None or sample.pcie_rx_kib_s >= 0.0


def test_every_gpu_is_sampled_with_plausible_values_when_idle(tmp_path: Path, gpu_count: int) -> None:
    records = _agent(tmp_path, [sys.executable, "-c", "import time; time.sleep(2)"], interval_s=0.5)
    ready = next(r for r in records if isinstance(r, Phase))
    assert ready.gpu_count == gpu_count and ready.driver_version
    assert not [r for r in records if isinstance(r, AgentError) and r.what in ("nvml_unavailable", "gpu_lost")]
    samples = [r for r in records if isinstance(r, GpuSample)]
    assert {s.index for s in samples} == set(range(gpu_count))
    assert all(sum(1 for s in samples if s.index == i) >= 3 for i in range(gpu_count))
    for sample in samples:
        _assert_plausible(sample)


def test_a_small_load_shows_up_in_utilisation_memory_and_power(tmp_path: Path, gpu_count: int) -> None:
    script = tmp_path / "cuda_load.py"
    script.write_text(CUDA_LOAD, encoding="utf-8")
    records = _agent(tmp_path, [sys.executable, str(script), "4"], interval_s=0.25)
    result = records[-1]
    assert isinstance(result, Result)
    assert result.exit_status == 0, result.stderr_tail
    measure = next(r.t for r in records if isinstance(r, Phase) and r.name == "measure")
    gpu0 = [r for r in records if isinstance(r, GpuSample) and r.index == 0]
    before = [s for s in gpu0 if s.t < measure]
    loaded = [s for s in gpu0 if measure + 0.5 < s.t < result.t - 0.3]
    assert before and len(loaded) >= 5
    for sample in gpu0:
        _assert_plausible(sample)
    assert max(s.util_pct or 0.0 for s in loaded) >= 50.0
    assert max(s.mem_used_mib or 0.0 for s in loaded) >= min(s.mem_used_mib or 0.0 for s in before) + 1800
    if all(s.power_w is not None for s in gpu0):
        assert max(s.power_w or 0.0 for s in loaded) > min(s.power_w or 0.0 for s in before)
