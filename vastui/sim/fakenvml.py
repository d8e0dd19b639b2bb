"""Simulated NVML for simulated hosts: the pynvml functions the agent calls, answered from the host's files.

The agent imports this module instead of ``pynvml`` when ``VASTUI_NVML_MODULE=vastui.sim.fakenvml`` (the host
pool sets it). Device count, names and VRAM come from the machine file (``VASTUI_SIM_MACHINE``); what each GPU
is doing comes from the state file the simulated workload rewrites (``VASTUI_SIM_NVML_STATE``), idle when nobody
runs. Values use pynvml's units: bytes, milliwatts, KB/s, MHz. Like the C library, it keeps one session between
``nvmlInit`` and ``nvmlShutdown``; calls outside one raise ``NVMLError(NVML_ERROR_UNINITIALIZED)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from vastui.sim import hostenv
from vastui.sim.physics import GpuState, HostSpec, idle_state

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_GPU_IS_LOST = 15
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
MIB = 1024 * 1024


class NVMLError(Exception):
    """pynvml's error: ``value`` is the NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass(frozen=True, slots=True)
class Utilization:
    gpu: int
    memory: int


@dataclass(frozen=True, slots=True)
class Memory:
    total: int
    used: int
    free: int


@dataclass(frozen=True, slots=True)
class Handle:
    index: int


class _Session:
    def __init__(self, spec: HostSpec, state_path: str | None) -> None:
        self.spec = spec
        self.state_path = state_path

    def state(self, handle: object) -> GpuState:
        if not isinstance(handle, Handle) or not 0 <= handle.index < self.spec.num_gpus:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        states = hostenv.read_gpu_states(self.state_path) if self.state_path else None
        if states is None or handle.index >= len(states):
            return idle_state(self.spec)
        return states[handle.index]


_session: _Session | None = None


def _current() -> _Session:
    if _session is None:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    return _session


def nvmlInit() -> None:
    global _session
    try:
        spec = hostenv.read_spec(os.environ)
    except (KeyError, OSError, ValueError) as exc:
        raise NVMLError(NVML_ERROR_UNINITIALIZED) from exc
    _session = _Session(spec, os.environ.get(hostenv.ENV_NVML_STATE))


def nvmlShutdown() -> None:
    global _session
    _current()
    _session = None


def nvmlSystemGetDriverVersion() -> str:
    return _current().spec.driver_version


def nvmlDeviceGetCount() -> int:
    return _current().spec.num_gpus


def nvmlDeviceGetHandleByIndex(index: int) -> Handle:
    if not 0 <= index < _current().spec.num_gpus:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return Handle(index)


def nvmlDeviceGetName(handle: Handle) -> str:
    session = _current()
    session.state(handle)
    return f"NVIDIA GeForce {session.spec.gpu_name}" if session.spec.gpu_name.startswith("RTX ") \
        else f"NVIDIA {session.spec.gpu_name}"


def nvmlDeviceGetUUID(handle: Handle) -> str:
    session = _current()
    session.state(handle)
    machine = session.spec.truth.machine_id
    return f"GPU-{machine:08x}-{handle.index:04x}-5349-4d55-4c41544544"


def nvmlDeviceGetUtilizationRates(handle: Handle) -> Utilization:
    state = _current().state(handle)
    return Utilization(gpu=round(state.util_pct), memory=round(state.mem_util_pct))


def nvmlDeviceGetMemoryInfo(handle: Handle) -> Memory:
    state = _current().state(handle)
    total, used = int(state.mem_total_mib * MIB), int(state.mem_used_mib * MIB)
    return Memory(total=total, used=used, free=total - used)


def nvmlDeviceGetPowerUsage(handle: Handle) -> int:
    return int(_current().state(handle).power_w * 1000)


def nvmlDeviceGetPcieThroughput(handle: Handle, counter: int) -> int:
    state = _current().state(handle)
    return int(state.pcie_rx_kib_s if counter == NVML_PCIE_UTIL_RX_BYTES else state.pcie_tx_kib_s)


def nvmlDeviceGetClockInfo(handle: Handle, clock_type: int) -> int:
    return int(_current().state(handle).sm_clock_mhz)


def nvmlDeviceGetTemperature(handle: Handle, sensor: int) -> int:
    return int(_current().state(handle).temp_c)


def nvmlDeviceGetCurrentClocksEventReasons(handle: Handle) -> int:
    return _current().state(handle).throttle_mask


nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons
