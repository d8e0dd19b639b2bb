"""Fakes for the parts that cannot be real here. Every fake is named Fake*."""

from __future__ import annotations

import argparse
import asyncio
from types import SimpleNamespace

import httpx

from vastui.approval import AuditRecord


class FakeClock:
    """A clock that only moves when someone sleeps on it (or ``advance`` is called); records every sleep."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now += max(0.0, seconds)
        await asyncio.sleep(0)


class FakeWallClock:
    """The operator's clock, moved only by ``advance``; ``sleep`` really waits until it has been moved that far."""

    def __init__(self, start: float = 1_000.0) -> None:
        self._now = start
        self._moved = asyncio.Event()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._moved.set()
        self._moved = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        target = self._now + max(0.0, seconds)
        while self._now < target:
            await self._moved.wait()


class FakeVastApi:
    """A scripted stand-in for the live Vast.ai API (the one thing tests cannot reach): an ``httpx`` transport
    handler that answers from a queue of scripted responses (then ``default``) and records every request.

    Script entries are ``httpx.Response`` objects, or exceptions to raise (e.g. ``httpx.ConnectError``).
    """

    def __init__(self, default: httpx.Response | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.script: list[httpx.Response | Exception] = []
        self.default = default if default is not None else httpx.Response(200, json={"success": True})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        answer = self.script.pop(0) if self.script else self.default
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakeNvmlError(Exception):
    """pynvml's NVMLError shape: ``value`` is the NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    """A pynvml-shaped stand-in for NVML (the real one needs a GPU), handed to the agent as its module.

    Each GPU is a dict of metric values; ``lose(index, after_reads=n)`` makes that GPU fail every read after its
    n-th utilisation read (a device falling off the bus); ``unsupported`` names metrics that raise NOT_SUPPORTED.
    """

    NVMLError = FakeNvmlError
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    GPU_IS_LOST = 15
    NOT_SUPPORTED = 3

    def __init__(self, gpus: list[dict[str, float]], *, fail_init: bool = False,
                 unsupported: tuple[str, ...] = ()) -> None:
        self.gpus = gpus
        self.fail_init = fail_init
        self.unsupported = set(unsupported)
        self.reads = [0] * len(gpus)
        self._lost_after: dict[int, int] = {}
        self.initialised = False
        self.shutdown = False

    def lose(self, index: int, *, after_reads: int) -> None:
        self._lost_after[index] = after_reads

    def _gpu(self, handle: int, metric: str) -> float:
        if handle in self._lost_after and self.reads[handle] > self._lost_after[handle]:
            raise FakeNvmlError(self.GPU_IS_LOST)
        if metric in self.unsupported:
            raise FakeNvmlError(self.NOT_SUPPORTED)
        return self.gpus[handle].get(metric, 0.0)

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise FakeNvmlError(9)  # NVML_ERROR_DRIVER_NOT_LOADED
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"550.54.14"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        self._gpu(handle, "name")
        return b"NVIDIA GeForce RTX 4090"

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        self._gpu(handle, "uuid")
        return f"GPU-fake-{handle}"

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        self.reads[handle] += 1
        return SimpleNamespace(gpu=self._gpu(handle, "util"), memory=self._gpu(handle, "mem_util"))

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        used, total = self._gpu(handle, "mem_used_mib"), self._gpu(handle, "mem_total_mib")
        return SimpleNamespace(used=int(used * 2**20), total=int(total * 2**20), free=int((total - used) * 2**20))

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self._gpu(handle, "power_w") * 1000)

    def nvmlDeviceGetPcieThroughput(self, handle: int, counter: int) -> int:
        return int(self._gpu(handle, "pcie_rx" if counter == self.NVML_PCIE_UTIL_RX_BYTES else "pcie_tx"))

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        return int(self._gpu(handle, "sm_clock"))

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return int(self._gpu(handle, "temp"))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: int) -> int:
        return int(self._gpu(handle, "throttle"))


def subcommand(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    """The parser of a (nested) subcommand, to read its --help text: ``subcommand(p, "campaign", "run")``."""
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


class FakeAudit:
    """An audit sink that keeps its records in memory (the store is the real one)."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    async def record_audit(self, record: AuditRecord) -> None:
        self.records.append(record)
