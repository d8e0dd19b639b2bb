"""The agent's line protocol, typed: one frozen dataclass per record kind and a strict parser.

The agent (``agent.py``, documented there) writes one JSON object per line; ``parse_record`` turns a line into a
``GpuSample``, ``Progress``, ``Phase``, ``Result`` or ``AgentError`` and raises ``RemoteError`` saying what is wrong
and where for anything else. Timestamps ``t`` are the agent's clock (the simulator's clock on simulated hosts):
durations and throughput must be computed from them, never from the console's own clock.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vastui.errors import RemoteError

# The phase record the agent writes when the workload marks its output complete mid-run (``VASTUI {"output":
# "end"}``): the output lines before it, digested, stand for the output of a run that ended there.
OUTPUT_PHASE = "output"


class RecordKind(enum.StrEnum):
    GPU = "gpu"
    PROGRESS = "progress"
    PHASE = "phase"
    RESULT = "result"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One NVML reading of one GPU; a metric NVML could not read is None."""

    seq: int
    t: float
    index: int
    name: str | None
    uuid: str | None
    util_pct: float | None
    mem_util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    pcie_rx_kib_s: float | None
    pcie_tx_kib_s: float | None
    sm_clock_mhz: float | None
    temp_c: float | None
    throttle_reasons: tuple[str, ...] | None

    @property
    def is_throttled(self) -> bool:
        """True when NVML names a reason other than idle or application clocks."""
        benign = {"gpu_idle", "applications_clocks_setting"}
        return bool(self.throttle_reasons and set(self.throttle_reasons) - benign)


@dataclass(frozen=True, slots=True)
class Progress:
    """Work done since the previous progress record, with running totals and the phase it happened in."""

    seq: int
    t: float
    units: int
    accepted: int
    data_wait_s: float
    compute_s: float
    latency_ms: tuple[float, ...]
    units_total: int
    accepted_total: int
    phase: str | None


@dataclass(frozen=True, slots=True)
class Phase:
    """A phase began: ``ready`` (the agent runs; carries the environment) or one the workload named; or ``output``,
    the workload's output so far complete while it runs on (``OUTPUT_PHASE``: its digest and size, as a result
    gives them for a whole run)."""

    seq: int
    t: float
    name: str
    detail: str | None
    agent_version: str | None
    python: str | None
    gpu_count: int | None
    driver_version: str | None
    output_digest: str | None = None
    output_bytes: int | None = None

    @property
    def is_output_end(self) -> bool:
        """The workload said its output is complete (the canary folded into a measuring run checks it)."""
        return self.name == OUTPUT_PHASE and self.output_digest is not None


@dataclass(frozen=True, slots=True)
class Result:
    """The workload ended; always the last record of a run."""

    seq: int
    t: float
    exit_status: int | None
    signal: str | None
    output_digest: str | None
    output_bytes: int
    units_total: int
    accepted_total: int
    elapsed_s: float
    stderr_tail: str


@dataclass(frozen=True, slots=True)
class AgentError:
    """Something the agent noticed and carried on from (no NVML, a lost GPU, a bad workload line...)."""

    seq: int
    t: float
    what: str
    message: str
    gpu: int | None


Record = GpuSample | Progress | Phase | Result | AgentError


# Counts and sequence numbers go into SQLite (64-bit integers) and into float arithmetic (exact up to 2**53): a
# larger one, which only a broken or hostile host sends, is refused here rather than overflow later. The agent
# refuses such markers too (``agent.MAX_UNITS``, the same bound).
MAX_INTEGER = 2 ** 53


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Fields:
    """Typed access to one decoded record; every failure names the field."""

    def __init__(self, data: Mapping[str, Any], fail: Callable[[str], RemoteError]) -> None:
        self._data = data
        self._fail = fail

    def opt_integer(self, name: str) -> int | None:
        value = self._data.get(name)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._fail(f"field {name!r} must be an integer, got {_shown(value)}")
        if abs(value) > MAX_INTEGER:
            raise self._fail(f"field {name!r} is too large (over 2**53 in size)")
        return value

    def integer(self, name: str) -> int:
        value = self.opt_integer(name)
        if value is None:
            raise self._fail(f"field {name!r} is missing")
        return value

    def opt_number(self, name: str) -> float | None:
        value = self._data.get(name)
        if value is None:
            return None
        return self._number(name, value)

    def number(self, name: str) -> float:
        value = self.opt_number(name)
        if value is None:
            raise self._fail(f"field {name!r} is missing")
        return value

    def opt_text(self, name: str) -> str | None:
        value = self._data.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._fail(f"field {name!r} must be a string, got {_shown(value)}")
        return value

    def text(self, name: str) -> str:
        value = self.opt_text(name)
        if value is None:
            raise self._fail(f"field {name!r} is missing")
        return value

    def numbers(self, name: str) -> tuple[float, ...]:
        value = self._data.get(name, [])
        if not isinstance(value, list):
            raise self._fail(f"field {name!r} must be a list of numbers")
        return tuple(self._number(name, item) for item in value)

    def texts(self, name: str) -> tuple[str, ...] | None:
        value = self._data.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self._fail(f"field {name!r} must be a list of strings")
        return tuple(value)

    def _number(self, name: str, value: object) -> float:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
            raise self._fail(f"field {name!r} is too large (over 2**53 in size)")  # 10**400 has no float
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise self._fail(f"field {name!r} must be a finite number, got {_shown(value)}")
        return float(value)


def _gpu(f: _Fields, seq: int, t: float) -> GpuSample:
    return GpuSample(
        seq=seq, t=t, index=f.integer("index"), name=f.opt_text("name"), uuid=f.opt_text("uuid"),
        util_pct=f.opt_number("util_pct"), mem_util_pct=f.opt_number("mem_util_pct"),
        mem_used_mib=f.opt_number("mem_used_mib"), mem_total_mib=f.opt_number("mem_total_mib"),
        power_w=f.opt_number("power_w"), pcie_rx_kib_s=f.opt_number("pcie_rx_kib_s"),
        pcie_tx_kib_s=f.opt_number("pcie_tx_kib_s"), sm_clock_mhz=f.opt_number("sm_clock_mhz"),
        temp_c=f.opt_number("temp_c"), throttle_reasons=f.texts("throttle_reasons"),
    )


def _progress(f: _Fields, seq: int, t: float) -> Progress:
    return Progress(
        seq=seq, t=t, units=f.integer("units"), accepted=f.integer("accepted"), data_wait_s=f.number("data_wait_s"),
        compute_s=f.number("compute_s"), latency_ms=f.numbers("latency_ms"), units_total=f.integer("units_total"),
        accepted_total=f.integer("accepted_total"), phase=f.opt_text("phase"),
    )


def _phase(f: _Fields, seq: int, t: float) -> Phase:
    return Phase(
        seq=seq, t=t, name=f.text("name"), detail=f.opt_text("detail"),
        agent_version=f.opt_text("agent_version"), python=f.opt_text("python"),
        gpu_count=f.opt_integer("gpu_count"), driver_version=f.opt_text("driver_version"),
        output_digest=f.opt_text("output_digest"), output_bytes=f.opt_integer("output_bytes"),
    )


def _result(f: _Fields, seq: int, t: float) -> Result:
    return Result(
        seq=seq, t=t, exit_status=f.opt_integer("exit_status"), signal=f.opt_text("signal"),
        output_digest=f.opt_text("output_digest"), output_bytes=f.integer("output_bytes"),
        units_total=f.integer("units_total"), accepted_total=f.integer("accepted_total"), elapsed_s=f.number("elapsed_s"),
        stderr_tail=f.opt_text("stderr_tail") or "",
    )


def _error(f: _Fields, seq: int, t: float) -> AgentError:
    return AgentError(seq=seq, t=t, what=f.text("what"), message=f.text("message"), gpu=f.opt_integer("gpu"))


_BUILDERS: dict[RecordKind, Callable[[_Fields, int, float], Record]] = {
    RecordKind.GPU: _gpu, RecordKind.PROGRESS: _progress, RecordKind.PHASE: _phase,
    RecordKind.RESULT: _result, RecordKind.ERROR: _error,
}


def parse_record(line: str, *, where: str = "agent") -> Record:
    """Parse one protocol line; ``where`` (e.g. ``host:port``) goes into the error message."""
    shown = line.strip()[:120]

    def fail(what: str) -> RemoteError:
        return RemoteError(f"{where}: bad agent record ({what}): {shown!r}", title="Bad agent output")

    try:
        data = json.loads(line)
    except ValueError as exc:
        raise fail(f"not JSON: {exc}") from exc
    except RecursionError as exc:
        raise fail("nested too deeply") from exc
    if not isinstance(data, dict):
        raise fail("not a JSON object")
    try:
        kind = RecordKind(str(data.get("kind")))
    except ValueError as exc:
        raise fail(f"unknown kind {_shown(data.get('kind'))}") from exc
    fields = _Fields(data, fail)
    seq = fields.integer("seq")
    if seq < 1:
        raise fail("seq must be positive")
    return _BUILDERS[kind](fields, seq, fields.number("t"))
