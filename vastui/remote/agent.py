"""vastui agent: runs a workload on a GPU host, samples NVML, and writes the line protocol.

This file is uploaded to the rented host and run with the image's ``python3``. It must run on Python 3.8+ with
the standard library only; ``pynvml`` (nvidia-ml-py) is used when it can be imported. Four modes::

    python3 agent.py [options] -- CMD ARG...             run CMD, write records to stdout (and --out)
    python3 agent.py --detach --out FILE [...] -- CMD    the same, in the background; prints {"pid": N}
    python3 agent.py --follow FILE [--from-seq N]        print FILE's records from seq N on, until the result
    python3 agent.py --stop --pid-file FILE              stop a detached agent (SIGTERM, then SIGKILL)

Workload markers (the language-neutral way a workload reports progress): a stdout line that starts with
``VASTUI `` followed by one JSON object::

    VASTUI {"units": 32, "accepted": 32, "data_wait_s": 0.4, "compute_s": 1.1, "latency_ms": [34.1, 35.0]}
    VASTUI {"phase": "warmup"}

``units``/``accepted`` are counts done since the previous marker (``accepted`` defaults to ``units``; at most
2**53, running totals too: a larger count is a ``bad_marker`` error and the marker is dropped),
``data_wait_s``/``compute_s`` the seconds spent waiting for input and computing since then (default 0),
``latency_ms`` one latency per workload step since the previous marker (optional; the console counts steps by
it, a marker without it as one step). ``phase`` names a phase (``warmup``, ``measure``, ...); both kinds
of key may share one marker. ``{"output": "end"}`` says the output written so far is complete while the workload
runs on (a workload told ``VASTUI_CANARY_STEPS`` writes its output after those steps, then this marker): the agent
writes an ``output`` phase record with that output's ``output_digest`` and ``output_bytes`` and digests what
follows afresh. ``t`` (optional) is the workload's own clock reading, in epoch seconds, when the
marker's work ended: the record is stamped with it instead of the moment the agent read the line, so a workload
whose stdout is buffered, or that is briefly starved of CPU, is still timed by when its work happened. It is
clamped between the previous workload record's time and the agent's now, so it can neither run backwards nor
claim the future. The agent exports ``VASTUI_LAUNCH_T`` (its clock when it started the workload) to the workload. Every other stdout line is the workload's output: its bytes go into the output
digest (sha256), unless ``--output-file PATH`` names a file the workload writes, whose bytes are digested instead.

Records (one JSON object per line; every record has ``kind``, ``seq`` (1, 2, 3, ... with no gaps) and ``t``,
the agent's clock in epoch seconds):

- ``gpu``: ``index, name, uuid, util_pct, mem_util_pct, mem_used_mib, mem_total_mib, power_w, pcie_rx_kib_s,
  pcie_tx_kib_s, sm_clock_mhz, temp_c, throttle_reasons`` (list of names); a metric that cannot be read is null.
- ``progress``: ``units, accepted, data_wait_s, compute_s, latency_ms, units_total, accepted_total, phase``.
- ``phase``: ``name`` (``ready`` from the agent itself once the workload is launched, before any of the
  workload's records; then the workload's), ``detail``, and on ``ready``
  ``agent_version, python, gpu_count, driver_version``; on ``output`` ``output_digest, output_bytes``.
- ``result`` (last record): ``exit_status`` (null when killed by a signal), ``signal``, ``output_digest``
  (``sha256:<hex>``), ``output_bytes``, ``units_total``, ``accepted_total``, ``elapsed_s``, ``stderr_tail``.
- ``error``: ``what`` (``nvml_unavailable``, ``metric_unavailable``, ``gpu_lost``, ``bad_marker``,
  ``workload_start_failed``, ``output_file_missing``, ``workload_left_children``), ``message``, ``gpu`` (index or
  null).

Clock: ``--time-scale S --time-origin T0 [--time-anchor W0]`` (or ``VASTUI_TIME_SCALE`` / ``VASTUI_TIME_ORIGIN``
/ ``VASTUI_TIME_ANCHOR``) make ``t = T0 + (wall - W0) * S``, so a simulator's scaled clock is followed;
``--interval`` is in that clock's seconds, never shorter than ``VASTUI_MIN_SAMPLE_WALL_S`` of wall time when
set. ``--nvml-module`` / ``VASTUI_NVML_MODULE`` names a pynvml-compatible
module to use instead of ``pynvml`` (the simulator's hosts point it at their simulated NVML).

Why one file past the usual size: it is uploaded and run alone on the host, so it cannot import anything but the
standard library (and pynvml); the runner keeps it whole and versions it by its sha256.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

# Every run starts this file twice before its workload (the detaching start and the follower), and neither needs
# threads, processes or digests: those modules are imported where the run itself needs them (about 15-20 ms of
# interpreter start-up saved per start, which a simulated host's clock would magnify into seconds).
if TYPE_CHECKING:
    import subprocess
    import threading

AGENT_VERSION = "1"
MARKER = b"VASTUI "
OUTPUT_PHASE = "output"        # the phase record of a workload's ``{"output": "end"}`` marker (protocol.OUTPUT_PHASE)
ENV_TIME_SCALE = "VASTUI_TIME_SCALE"
ENV_TIME_ORIGIN = "VASTUI_TIME_ORIGIN"
ENV_TIME_ANCHOR = "VASTUI_TIME_ANCHOR"
ENV_LAUNCH_T = "VASTUI_LAUNCH_T"   # exported to the workload: the agent's clock when it started it
ENV_NVML_MODULE = "VASTUI_NVML_MODULE"
# A wall-clock floor on the GPU sample interval: on a simulator's clock running S times faster, "every clock
# second" would be S samples per wall second, each a record the console must carry and store.
ENV_MIN_SAMPLE_WALL_S = "VASTUI_MIN_SAMPLE_WALL_S"
FOLLOW_POLL_S = 0.02           # wall seconds between looks at the records file (a record is at most this late)
EXIT_AGENT_GONE = 3            # --follow: the agent died without writing a result
NVML_ERROR_GPU_IS_LOST = 15
MAX_LATENCIES = 1000           # per progress record; keeps a record a bounded line
# A count (per marker and running total) above 2**53 is no real workload: past it a float loses units and past
# 2**63 SQLite cannot store it at all, so such a marker is refused here rather than crash the console later.
MAX_UNITS = 2 ** 53
STDERR_TAIL_BYTES = 2000
LEFTOVER_GRACE_S = 0.5         # wall seconds to drain a workload's output after it exits (EOF: no wait)
THROTTLE_BITS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
    (0x10, "sync_boost"), (0x20, "sw_thermal"), (0x40, "hw_thermal"), (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)


class AgentClock:
    """Epoch seconds, optionally on a scaled clock anchored at (wall ``anchor``, clock ``origin``)."""

    def __init__(self, scale: float | None = None, origin: float | None = None,
                 anchor: float | None = None) -> None:
        self.scale = scale if scale and scale > 0 else 1.0
        self.anchor = time.time() if anchor is None else anchor
        self.origin = self.anchor if origin is None else origin

    def now(self) -> float:
        return self.origin + (time.time() - self.anchor) * self.scale

    def wall_seconds(self, seconds: float) -> float:
        return max(0.0, seconds) / self.scale

    def count_start_at_scale_one(self) -> None:
        """On a scaled clock (a simulated host), count the wall time since the anchor (the exec request) at scale 1:
        starting an interpreter takes real time that the scale would magnify (0.1 s is 30 s at x300), which the
        simulated machine's truth has no cost for. From now on the clock runs at its scale, this much behind the
        anchor's timeline; the workload is handed the same clock. A no-op at scale 1 (a real host)."""
        if self.scale == 1.0:
            return
        wall = max(0.0, time.time() - self.anchor)
        self.origin -= wall * (self.scale - 1.0)


class DeviceLost(Exception):
    """One GPU stopped answering NVML."""


class PynvmlSource:
    """The NVML reads the sampler needs, over any pynvml-compatible module (batched per GPU per tick)."""

    def __init__(self, module: object) -> None:
        self._nv: Any = module
        self._error: Any = getattr(module, "NVMLError", Exception)
        self._handles: list[object] = []

    def open(self) -> int:
        self._nv.nvmlInit()
        count = int(self._nv.nvmlDeviceGetCount())
        self._handles = [self._nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        return count

    def driver_version(self) -> str | None:
        try:
            return _text(self._nv.nvmlSystemGetDriverVersion())
        except self._error:
            return None

    def read(self, index: int) -> tuple[dict[str, object], list[str]]:
        """All metrics of GPU ``index``; unreadable optional metrics are None and listed. Raises DeviceLost."""
        nv, handle = self._nv, self._handles[index]
        try:
            util = nv.nvmlDeviceGetUtilizationRates(handle)
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
        except self._error as exc:
            raise DeviceLost(str(exc)) from exc
        values: dict[str, object] = {
            "util_pct": float(util.gpu), "mem_util_pct": float(util.memory),
            "mem_used_mib": mem.used / 1048576.0, "mem_total_mib": mem.total / 1048576.0,
        }
        failed: list[str] = []
        reads = (
            ("name", lambda: _text(nv.nvmlDeviceGetName(handle))),
            ("uuid", lambda: _text(nv.nvmlDeviceGetUUID(handle))),
            ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(handle) / 1000.0),
            ("pcie_rx_kib_s", lambda: float(nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_RX_BYTES))),
            ("pcie_tx_kib_s", lambda: float(nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_TX_BYTES))),
            ("sm_clock_mhz", lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))),
            ("temp_c", lambda: float(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))),
            ("throttle_reasons", lambda: _throttle_names(self._throttle_mask(handle))),
        )
        for name, read in reads:
            try:
                values[name] = read()
            except self._error as exc:
                if getattr(exc, "value", None) == NVML_ERROR_GPU_IS_LOST:
                    raise DeviceLost(str(exc)) from exc
                values[name] = None
                failed.append(name)
        return values, failed

    def _throttle_mask(self, handle: object) -> int:
        read = getattr(self._nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if read is None:
            read = self._nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(read(handle))

    def close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except self._error:
            pass


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS if mask & bit]


class Emitter:
    """Numbers records and writes each as one line to stdout and to the resumable out file."""

    def __init__(self, clock: AgentClock, stream: Any, out_path: str | None) -> None:
        import threading

        self._clock = clock
        self._stream = stream
        self._lock = threading.Lock()
        self._seq = 0
        self._out: Any = None
        if out_path:
            parent = os.path.dirname(out_path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            self._out = open(out_path, "a", encoding="utf-8")

    def emit(self, kind: str, fields: dict[str, object], t: float | None = None) -> None:
        with self._lock:
            self._seq += 1
            record = {"kind": kind, "seq": self._seq, "t": round(self._clock.now() if t is None else t, 6)}
            record.update(fields)
            line = json.dumps(record, separators=(",", ":")) + "\n"
            if self._out is not None:
                self._out.write(line)
                self._out.flush()
            try:
                self._stream.write(line)
                self._stream.flush()
            except (OSError, ValueError):
                pass  # nobody reads stdout (detached, or the SSH channel went away): the out file has it

    def error(self, what: str, message: str, gpu: int | None = None) -> None:
        self.emit("error", {"what": what, "message": message, "gpu": gpu})

    def close(self) -> None:
        if self._out is not None:
            self._out.close()


class Sampler:
    """Samples every GPU each ``interval_s`` (agent clock) in a thread; a lost GPU is reported once and dropped."""

    def __init__(self, source: Any, emitter: Emitter, clock: AgentClock, interval_s: float) -> None:
        self._source = source
        self._emitter = emitter
        self._clock = clock
        import threading

        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.live: list[int] = []
        self._warned: set[tuple[int, str]] = set()
        self._broken = False

    def start(self, count: int) -> None:
        import threading

        self.live = list(range(count))
        self._thread = threading.Thread(target=self._loop, name="vastui-nvml", daemon=True)
        self._thread.start()

    def tick(self) -> None:
        """Read every live GPU, then emit their records with the tick's one timestamp."""
        t = self._clock.now()
        readings = []
        for index in list(self.live):
            try:
                readings.append((index, self._source.read(index)))
            except DeviceLost as exc:
                self.live.remove(index)
                self._emitter.error("gpu_lost", "GPU %d stopped answering NVML: %s" % (index, exc), gpu=index)
        for index, (values, failed) in readings:
            for name in failed:
                if (index, name) not in self._warned:
                    self._warned.add((index, name))
                    self._emitter.error("metric_unavailable", "NVML cannot read %s on GPU %d" % (name, index),
                                        gpu=index)
            fields: dict[str, object] = {"index": index}
            fields.update(values)
            self._emitter.emit("gpu", fields, t=t)

    def safe_tick(self) -> bool:
        """``tick``, but a broken NVML binding ends sampling (one error record) instead of the run."""
        if self._broken:
            return False
        try:
            self.tick()
        except Exception as exc:
            self._broken = True
            self._emitter.error("nvml_unavailable", "GPU sampling stopped: %r" % (exc,))
        return not self._broken

    def _loop(self) -> None:
        floor = _env_float(ENV_MIN_SAMPLE_WALL_S) or 0.0
        while not self._stop.is_set() and self.safe_tick():
            self._stop.wait(max(floor, self._clock.wall_seconds(self._interval_s)))

    def stop(self) -> None:
        """Stop the thread, then take one last sample so the end of the run is on record."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.safe_tick()


class MarkerReader:
    """Turns workload stdout into progress/phase records and an output digest; bad markers become errors."""

    def __init__(self, emitter: Emitter, clock: AgentClock | None = None) -> None:
        self._emitter = emitter
        self._clock = clock
        self._last_t: float | None = None
        self.launched_t: float | None = None   # no marker may be stamped before the workload started
        import hashlib

        self._closed = False
        self.digest = hashlib.sha256()
        self.output_bytes = 0
        self.units_total = 0
        self.accepted_total = 0
        self.phase: str | None = None

    def close(self) -> None:
        """Ignore whatever arrives from now on (the result is being written)."""
        self._closed = True

    def feed(self, line: bytes) -> None:
        if self._closed:
            return
        if not line.startswith(MARKER):
            self.digest.update(line)
            self.output_bytes += len(line)
            return
        try:
            marker = json.loads(line[len(MARKER):].decode("utf-8"))
            if not isinstance(marker, dict):
                raise ValueError("a marker must be a JSON object")
            phase = marker.get("phase")
            progress = _progress_fields(marker) if "units" in marker else None
            if phase is not None and not isinstance(phase, str):
                raise ValueError("phase must be a string")
            detail = marker.get("detail")
            if detail is not None and not isinstance(detail, str):
                raise ValueError("detail must be a string")  # the console reads a phase's detail as text
            output = marker.get("output")
            if output is not None and output != "end":
                raise ValueError('output must be "end"')
            t = self._stamp(marker.get("t"))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
            shown = line[:200].decode("utf-8", "replace").rstrip("\n")
            self._emitter.error("bad_marker", "bad workload marker (%s): %s" % (why, shown))
            return
        if phase is not None:
            self.phase = phase
            self._emitter.emit("phase", {"name": phase, "detail": detail}, t=t)
        if output is not None:
            self.end_output(t)
        if progress is not None and self.units_total + progress["units"] > MAX_UNITS:
            self._emitter.error("bad_marker", "bad workload marker (the running total would be too large: over "
                                "2**53 units); the marker is dropped")
            return
        if progress is not None:
            self.units_total += progress["units"]
            self.accepted_total += progress["accepted"]
            progress.update(units_total=self.units_total, accepted_total=self.accepted_total, phase=self.phase)
            self._emitter.emit("progress", progress, t=t)

    def end_output(self, t: float | None) -> None:
        """The workload's output so far is complete: write its digest and size as an ``output`` phase record, and
        digest what follows afresh (the result's digest covers the output after this mark)."""
        import hashlib

        self._emitter.emit("phase", {"name": OUTPUT_PHASE, "detail": None,
                                     "output_digest": "sha256:" + self.digest.hexdigest(),
                                     "output_bytes": self.output_bytes}, t=t)
        self.digest = hashlib.sha256()
        self.output_bytes = 0

    def _stamp(self, claimed: object) -> float | None:
        """The time to stamp a marker's records with: the workload's own ``t``, clamped to [previous, now]."""
        if self._clock is None:
            return None
        now = self._clock.now()
        if claimed is None:
            t = now
        elif not _is_number(claimed):
            raise ValueError("t must be a number (epoch seconds)")
        else:
            t = min(float(claimed), now)  # type: ignore[arg-type]
        floor = self._last_t if self._last_t is not None else self.launched_t
        if floor is not None:
            t = max(t, floor)
        self._last_t = t
        return t


def _progress_fields(marker: dict[str, Any]) -> dict[str, Any]:
    units = marker["units"]
    accepted = marker.get("accepted", units)
    for name, value in (("units", units), ("accepted", accepted)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError("%s must be a non-negative integer" % name)
        if value > MAX_UNITS:
            raise ValueError("%s is too large (over 2**53)" % name)
    if accepted > units:
        raise ValueError("accepted exceeds units")
    seconds = {}
    for name in ("data_wait_s", "compute_s"):
        value = marker.get(name, 0.0)
        if not _is_number(value) or value < 0:
            raise ValueError("%s must be a non-negative number" % name)
        seconds[name] = float(value)
    latencies = marker.get("latency_ms", [])
    if not isinstance(latencies, list) or not all(_is_number(v) for v in latencies):
        raise ValueError("latency_ms must be a list of numbers")
    return {"units": units, "accepted": accepted, "data_wait_s": seconds["data_wait_s"],
            "compute_s": seconds["compute_s"], "latency_ms": [float(v) for v in latencies[:MAX_LATENCIES]]}


def _is_number(value: object) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= MAX_UNITS  # 10**400 has no float (math.isfinite would raise OverflowError)
    return math.isfinite(value)


class Agent:
    """One run: start the workload, read its markers, sample NVML, write the result."""

    def __init__(self, argv: list[str], emitter: Emitter, clock: AgentClock, source: Any,
                 interval_s: float, output_file: str | None, pid_file: str | None) -> None:
        self.argv = argv
        self.emitter = emitter
        self.clock = clock
        self.source = source
        self.interval_s = interval_s
        self.output_file = output_file
        self.pid_file = pid_file
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_tail = b""
        self.stopping = False

    def run(self) -> int:
        import subprocess
        import threading

        sampler, ready = self._open_sampler()
        started = self.clock.now()
        reader = MarkerReader(self.emitter, self.clock)
        status: int | None = None
        try:
            if self.stopping:
                raise OSError("the agent was told to stop before the workload started")
            reader.launched_t = self.clock.now()
            env = dict(os.environ)
            env[ENV_LAUNCH_T] = "%.6f" % reader.launched_t
            if self.clock.scale != 1.0:   # one clock on the host: the workload keeps the agent's
                env.update({ENV_TIME_SCALE: repr(self.clock.scale), ENV_TIME_ORIGIN: repr(self.clock.origin),
                            ENV_TIME_ANCHOR: repr(self.clock.anchor)})
            proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env)
            # ``ready`` comes once the workload is launched, before any of its records, and the sampler's thread
            # after it: what the agent does before the launch is never read as the workload's start-up (the
            # workload's first record less ``ready``'s time, docs/method.md), which production would not pay for.
            reader.launched_t = self.clock.now()   # no workload record is stamped before ``ready``
            self.emitter.emit("phase", ready, t=reader.launched_t)
            if sampler is not None:
                sampler.start(len(sampler.live))
        except OSError as exc:
            self.emitter.emit("phase", ready)
            self.emitter.error("workload_start_failed", "cannot start %s: %s" % (self.argv[0], exc))
            status = 127
        else:
            self.proc = proc
            _write_pid_file(self.pid_file, os.getpid(), proc.pid)
            err_thread = threading.Thread(target=self._drain_stderr, args=(proc.stderr,), daemon=True)
            out_thread = threading.Thread(target=self._drain_stdout, args=(proc.stdout, reader), daemon=True)
            err_thread.start()
            out_thread.start()
            status = proc.wait()
            # A child the workload left behind (``sleep 1000 &``) keeps its pipes open: drain what the workload
            # wrote, then stop listening rather than wait for the child.
            give_up = time.monotonic() + LEFTOVER_GRACE_S
            out_thread.join(LEFTOVER_GRACE_S)
            err_thread.join(max(0.0, give_up - time.monotonic()))
            if out_thread.is_alive() or err_thread.is_alive():
                reader.close()
                self.emitter.error("workload_left_children", "the workload exited but a process it started still "
                                   "holds its output open; that process's output is ignored")

        if sampler is not None:
            sampler.stop()
            self.source.close()
        self._emit_result(reader, status, started)
        return 0

    def _open_sampler(self) -> tuple[Sampler | None, dict[str, object]]:
        """NVML opened (or why not, as error records), the sampler not yet started, and the ``ready`` record's
        fields: the agent's environment."""
        try:
            count = self.source.open() if self.source is not None else None
        except Exception as exc:  # any NVML init failure means "no NVML here"; the run goes on without it
            count = None
            self.emitter.error("nvml_unavailable", "NVML could not start: %s" % exc)
        driver = self.source.driver_version() if count is not None else None
        if self.source is None:
            self.emitter.error("nvml_unavailable", "no NVML module (pynvml) on this host; GPU samples are off")
        ready: dict[str, object] = {"name": "ready", "detail": None, "agent_version": AGENT_VERSION,
                                    "python": "%d.%d.%d" % sys.version_info[:3], "gpu_count": count,
                                    "driver_version": driver}
        if count is None:
            return None, ready
        sampler = Sampler(self.source, self.emitter, self.clock, self.interval_s)
        sampler.live = list(range(count))
        return sampler, ready

    def _drain_stdout(self, pipe: Any, reader: MarkerReader) -> None:
        with pipe:   # each pipe is closed by the thread that reads it, whenever its end comes
            for line in iter(pipe.readline, b""):
                reader.feed(line)

    def _drain_stderr(self, pipe: Any) -> None:
        with pipe:
            for chunk in iter(lambda: pipe.read(4096), b""):
                self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL_BYTES:]

    def _emit_result(self, reader: MarkerReader, status: int | None, started: float) -> None:
        digest: str | None = "sha256:" + reader.digest.hexdigest()
        size = reader.output_bytes
        if self.output_file is not None:
            try:
                digest, size = _file_digest(self.output_file)
            except OSError as exc:
                self.emitter.error("output_file_missing", "cannot read %s: %s" % (self.output_file, exc))
                digest, size = None, 0
        sig = None
        if status is not None and status < 0:
            sig = _signal_name(-status)
            status = None
        self.emitter.emit("result", {
            "exit_status": status, "signal": sig, "output_digest": digest, "output_bytes": size,
            "units_total": reader.units_total, "accepted_total": reader.accepted_total,
            "elapsed_s": round(self.clock.now() - started, 6),
            "stderr_tail": self.stderr_tail.decode("utf-8", "replace"),
        })

    def terminate(self, signum: int, frame: object) -> None:
        """SIGTERM: stop the workload; ``run`` then writes the result as usual."""
        self.stopping = True
        proc = self.proc
        if proc is not None and proc.poll() is None:
            import threading

            proc.terminate()
            threading.Thread(target=_kill_later, args=(proc, 10.0), daemon=True).start()


def _kill_later(proc: Any, wall_s: float) -> None:
    import subprocess

    try:
        proc.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        proc.kill()


def _file_digest(path: str) -> tuple[str, int]:
    import hashlib

    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return "sha256:" + digest.hexdigest(), size


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "SIG%d" % number


def _write_pid_file(path: str | None, agent_pid: int, workload_pid: int | None) -> None:
    if not path:
        return
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())   # the parent and its forked agent each write their own
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"agent": agent_pid, "workload": workload_pid}, handle)
    os.replace(tmp, path)


def _read_pid_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _is_alive(pid: object) -> bool:
    """True while ``pid`` runs. A zombie counts as gone: in containers PID 1 often reaps late or never."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc here: trust kill(0)


def follow(path: str, from_seq: int, pid_file: str | None, stream: Any, poll_s: float = FOLLOW_POLL_S,
           heartbeat_s: float = 5.0) -> int:
    """Print records of ``path`` with seq >= ``from_seq`` as they are written; stop after the result.

    Returns 0 after a result, EXIT_AGENT_GONE when the agent's pid is gone and no result came. A blank line is
    written after ``heartbeat_s`` of silence so a dead SSH channel is noticed (the write fails).
    """
    offset, pending, quiet_since = 0, b"", time.monotonic()
    while True:
        agent_alive = pid_file is None or _is_alive(_read_pid_file(pid_file).get("agent"))
        chunk = b""
        if os.path.exists(path):
            with open(path, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            offset += len(chunk)
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        out = []
        finished = False
        for raw in lines:
            seq, kind = _seq_and_kind(raw)
            if seq is None or seq >= from_seq:
                out.append(raw.decode("utf-8", "replace") + "\n")
            finished = finished or kind == "result"
        try:
            if out:
                stream.write("".join(out))
                stream.flush()
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > heartbeat_s:
                stream.write("\n")
                stream.flush()
                quiet_since = time.monotonic()
        except (OSError, ValueError):
            return 0  # the reader went away; a runner will start a new follower
        if finished:
            return 0
        if not agent_alive and not chunk:
            return EXIT_AGENT_GONE
        time.sleep(poll_s)


def _seq_and_kind(raw: bytes) -> tuple[int | None, str | None]:
    try:
        record = json.loads(raw.decode("utf-8"))
        return int(record["seq"]), str(record["kind"])
    except (ValueError, KeyError, TypeError):
        return None, None


def stop(pid_file: str, stream: Any, grace_s: float = 10.0) -> int:
    """SIGTERM the detached agent (it stops its workload and writes the result); SIGKILL what is left."""
    pids = _read_pid_file(pid_file)
    agent, workload = pids.get("agent"), pids.get("workload")
    if isinstance(agent, int) and _is_alive(agent):
        os.kill(agent, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while _is_alive(agent) and time.monotonic() < deadline:
            time.sleep(0.01)
    killed = []
    for pid in (agent, workload):
        if isinstance(pid, int) and _is_alive(pid):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    stream.write(json.dumps({"stopped": agent, "killed": killed}) + "\n")
    stream.flush()
    return 0


def detach(argv: list[str], out_path: str, pid_file: str | None, stream: Any) -> int:
    """Go on as this agent in the background (stdio away from the SSH channel) and print its pid.

    A fork, not a new interpreter: starting Python again would put its start-up on every run's critical path
    (and a simulated host's clock magnifies each wall second of it). The child waits until the pid file names it,
    so its own write (with the workload's pid) cannot be overwritten by the parent's."""
    split = argv.index("--") if "--" in argv else len(argv)
    options = [a for a in argv[:split] if a != "--detach"]
    parent = os.path.dirname(out_path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    if pid_file and not _claim(pid_file):
        # a start of this run got here before (the runner retried after a cut connection): one agent per run
        stream.write(json.dumps({"pid": _wait_for_agent_pid(pid_file), "already": True}) + "\n")
        stream.flush()
        return 0
    err = os.open(out_path + ".stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    ready_r, ready_w = os.pipe()
    stream.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:   # the agent: wait to be named, then leave the channel's stdio and run
        code = 1
        try:
            os.close(ready_w)
            os.read(ready_r, 1)
            os.close(ready_r)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            os.dup2(err, 2)
            _close_fds_from(3)
            code = main(options + argv[split:])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:   # noqa: BLE001 - a detached agent has only its stderr file to say why
            import traceback
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(err)
    os.close(ready_r)
    _write_pid_file(pid_file, pid, None)
    os.close(ready_w)   # the agent may go on
    stream.write(json.dumps({"pid": pid}) + "\n")
    stream.flush()
    return 0


def _claim(pid_file: str) -> bool:
    """Claim the run named by ``pid_file`` for this start; False when another start claimed it first."""
    parent = os.path.dirname(pid_file)
    if parent:
        os.makedirs(parent, exist_ok=True)
    try:
        os.close(os.open(pid_file + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def _wait_for_agent_pid(pid_file: str, wait_s: float = 5.0) -> Any:
    deadline = time.monotonic() + wait_s
    while True:
        agent = _read_pid_file(pid_file).get("agent")
        if agent is not None or time.monotonic() > deadline:
            return agent
        time.sleep(0.01)


def _close_fds_from(low: int) -> None:
    """Close every descriptor from ``low`` up (the SSH channel's among them, so it can end)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(low, 1024))
    for fd in fds:
        if fd >= low:
            try:
                os.close(fd)
            except OSError:
                pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent.py", description="vastui GPU-host agent")
    parser.add_argument("--out", help="append every record to FILE (resumable by seq)")
    parser.add_argument("--pid-file", help="JSON file with the agent's and the workload's pids")
    parser.add_argument("--interval", type=float, default=1.0, help="GPU sample interval, clock seconds")
    parser.add_argument("--output-file", help="digest this file instead of the workload's stdout")
    parser.add_argument("--nvml-module", default=None, help="pynvml-compatible module name (default pynvml)")
    parser.add_argument("--no-nvml", action="store_true", help="do not sample GPUs")
    parser.add_argument("--time-scale", type=float, default=None)
    parser.add_argument("--time-origin", type=float, default=None)
    parser.add_argument("--time-anchor", type=float, default=None)
    parser.add_argument("--detach", action="store_true", help="run in the background (needs --out)")
    parser.add_argument("--follow", metavar="FILE", help="print FILE's records until the result")
    parser.add_argument("--from-seq", type=int, default=1)
    parser.add_argument("--stop", action="store_true", help="stop the agent named in --pid-file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARG...")
    return parser


def _env_float(name: str) -> float | None:
    value = os.environ.get(name)
    try:
        return float(value) if value else None
    except ValueError:
        return None


def load_nvml(name: str | None) -> object | None:
    """The pynvml-compatible module, or None when it is not installed."""
    try:
        import importlib

        return importlib.import_module(name or os.environ.get(ENV_NVML_MODULE) or "pynvml")
    except ImportError:
        return None


def main(argv: list[str] | None = None, stream: Any = None, nvml: object = None,
         handle_signals: bool = True) -> int:
    """Entry point; ``stream``, ``nvml`` (a pynvml-like module) and ``handle_signals=False`` are for tests."""
    argv = list(sys.argv[1:] if argv is None else argv)
    stream = sys.stdout if stream is None else stream
    args = build_parser().parse_args(argv)
    if args.follow:
        return follow(args.follow, args.from_seq, args.pid_file, stream)
    if args.stop:
        return stop(args.pid_file, stream) if args.pid_file else 2
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        build_parser().error("no workload command given (use -- CMD ARG...)")
    if args.detach:
        if not args.out:
            build_parser().error("--detach needs --out")
        return detach(argv, args.out, args.pid_file, stream)
    clock = AgentClock(_first(args.time_scale, _env_float(ENV_TIME_SCALE)),
                       _first(args.time_origin, _env_float(ENV_TIME_ORIGIN)),
                       _first(args.time_anchor, _env_float(ENV_TIME_ANCHOR)))
    clock.count_start_at_scale_one()
    module = None if args.no_nvml else (nvml if nvml is not None else load_nvml(args.nvml_module))
    emitter = Emitter(clock, stream, args.out)
    _write_pid_file(args.pid_file, os.getpid(), None)
    agent = Agent(command, emitter, clock, PynvmlSource(module) if module is not None else None,
                  args.interval, args.output_file, args.pid_file)
    if handle_signals:
        signal.signal(signal.SIGTERM, agent.terminate)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # survive the SSH session that started us
    try:
        return agent.run()
    finally:
        emitter.close()


def _first(*values: float | None) -> float | None:
    for value in values:
        if value is not None:
            return value
    return None


if __name__ == "__main__":
    sys.exit(main())
