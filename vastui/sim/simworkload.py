"""The simulator's reference workload ("sim-resnet"): trains for a while on a simulated host, by its hidden truth.

Run on a simulated host (the pool's environment points it at the machine)::

    python3 -m vastui.sim.simworkload --steps 200 --batch 64 --precision bf16 --loaders 8 --gpus 1 --input in.jsonl
    python3 -m simworkload ...        (the same; simulated hosts put a ``simworkload`` shim on the path)

Every ``--report-every`` steps it prints a progress marker (the agent's documented ``VASTUI {...}`` line) with the
physics-derived compute and data-wait seconds and per-step latencies (``latency_ms``: one value per step, i.e. the
time to serve one batch), after sleeping that long on the simulator's clock (wall = simulated / scale). At the end it prints its output: one prediction line per input record, which
depends only on the input bytes — except on a WRONG_OUTPUT machine. Told ``--canary-steps N``
(``VASTUI_CANARY_STEPS``), it also prints that output at the first marker at or past step N, then the marker
``VASTUI {"output": "end"}``, and runs on warm: the canary folded into a measuring run (docs/method.md).
Faults: THROTTLES slows compute after ``fault_after_s``; DIES_MID_RUN takes the whole host down at that moment (no
result ever comes); a batch that does not fit in VRAM fails like CUDA does (stderr message, exit status 1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from vastui.remote.agent import ENV_LAUNCH_T, ENV_TIME_ANCHOR, ENV_TIME_ORIGIN, ENV_TIME_SCALE, AgentClock
from vastui.sim import hostenv
from vastui.sim.physics import (
    GpuState,
    HostSpec,
    Precision,
    StepPlan,
    Variant,
    busy_state,
    idle_state,
    noisy_step,
    plan_step,
    run_factor,
)
from vastui.sim.truth import Fault

WARMUP_SLOWDOWN = 1.0          # the first warm-up step takes (1 + this) × as long; it decays linearly
DEFAULT_INPUT_RECORDS = 32
EXIT_OOM = 1


@dataclass(slots=True)
class _Block:
    compute_s: float = 0.0
    data_wait_s: float = 0.0
    step_s: list[float] = field(default_factory=list)


# The documented, language-neutral way a campaign tells a workload its variant: VASTUI_* environment variables.
# Flags win over them; they win over the defaults.
ENV_DEFAULTS = {"steps": "VASTUI_STEPS", "seconds": "VASTUI_SECONDS", "batch": "VASTUI_BATCH_SIZE",
                "precision": "VASTUI_PRECISION", "loaders": "VASTUI_LOADERS", "gpus": "VASTUI_GPUS",
                "canary_steps": "VASTUI_CANARY_STEPS"}


def build_parser(environ: dict[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if environ is None else environ

    def default(name: str, fallback: str) -> str:
        return env.get(ENV_DEFAULTS[name]) or fallback

    parser = argparse.ArgumentParser(prog="simworkload", description="vastui simulated reference workload")
    parser.add_argument("--steps", type=int, default=int(default("steps", "200")),
                        help="steps to run (0: no limit; default 200, or $VASTUI_STEPS)")
    parser.add_argument("--seconds", type=float, default=float(default("seconds", "0")),
                        help="stop after this many clock seconds (0: none; or $VASTUI_SECONDS)")
    parser.add_argument("--batch", type=int, default=int(default("batch", "32")),
                        help="items per GPU per step (default 32, or $VASTUI_BATCH_SIZE)")
    parser.add_argument("--precision", choices=[p.value for p in Precision],
                        default=default("precision", Precision.FP32.value), help="or $VASTUI_PRECISION")
    parser.add_argument("--loaders", type=int, default=int(default("loaders", "4")),
                        help="input loader workers (default 4, or $VASTUI_LOADERS)")
    parser.add_argument("--gpus", type=int, default=int(default("gpus", "1")),
                        help="GPUs to use (default 1, or $VASTUI_GPUS)")
    parser.add_argument("--canary-steps", type=int, default=int(default("canary_steps", "0")),
                        help="write the output after this many steps, then the marker {\"output\": \"end\"}, "
                             "and run on (0: only at the end; or $VASTUI_CANARY_STEPS)")
    parser.add_argument("--input", help="input records (JSON lines); the output depends only on their bytes")
    parser.add_argument("--report-every", type=int, default=10, help="steps per progress marker (default 10)")
    parser.add_argument("--warmup-steps", type=int, default=10, help="steps before the measure phase")
    parser.add_argument("--noise-seed", type=int, default=None, help="seed of the timing noise (default: random)")
    return parser


class _Workload:
    def __init__(self, spec: HostSpec, variant: Variant, clock: AgentClock, out: TextIO,
                 env: dict[str, str], rng: random.Random, output: Sequence[str] = ()) -> None:
        self.spec = spec
        self.output = output      # the output lines (written early when the campaign asks for them mid-run)
        self.variant = variant
        self.clock = clock
        self.out = out
        self.env = env
        self.rng = rng
        self.state_path = env.get(hostenv.ENV_NVML_STATE)
        self.started = _start_at_launch(clock, env)

    def marker(self, payload: dict[str, object], clock_s: float) -> None:
        payload = {**payload, "t": round(self.started + clock_s, 6)}
        self.out.write("VASTUI " + json.dumps(payload, separators=(",", ":")) + "\n")
        self.out.flush()

    def sleep_until(self, clock_t: float) -> None:
        wall = self.clock.wall_seconds(clock_t - self.clock.now())
        if wall > 0:
            time.sleep(wall)

    def publish(self, plan: StepPlan | None, *, throttled: bool, oom: bool = False) -> None:
        if not self.state_path:
            return
        states: list[GpuState] = []
        for index in range(self.spec.num_gpus):
            if plan is None or index >= plan.gpus:
                states.append(idle_state(self.spec))
                continue
            jitter = self.rng.uniform(-0.02, 0.02)
            mem = float(self.spec.truth.vram_mib) if oom else plan.mem_used_mib
            states.append(busy_state(self.spec, busy=0.0 if oom else plan.gpu_busy + jitter,
                                     units_per_s_per_gpu=0.0 if oom else plan.units_per_s / plan.gpus,
                                     mem_used_mib=mem, throttled=throttled))
        hostenv.write_gpu_states(self.state_path, states)

    def run(self, *, steps: int, seconds: float, report_every: int, warmup_steps: int, canary_steps: int = 0) -> int:
        plan = plan_step(self.spec, self.variant)
        if not plan.fits:
            return self.out_of_memory(plan)
        factor = run_factor(self.rng, self.spec.truth)
        self.marker({"phase": "warmup" if warmup_steps > 0 else "measure"}, 0.0)
        done, clock_s = 0, 0.0
        while (steps <= 0 or done < steps) and (seconds <= 0 or clock_s < seconds):
            throttled = self._faulted(Fault.THROTTLES, clock_s)
            plan = plan_step(self.spec, self.variant, throttled=throttled)
            self.publish(plan, throttled=throttled)
            count = report_every if steps <= 0 else min(report_every, steps - done)
            if done < warmup_steps:
                count = min(count, warmup_steps - done)
            block = self._block(plan, factor, first_step=done, count=count, warmup_steps=warmup_steps)
            block_s = sum(block.step_s)
            if self._faulted(Fault.DIES_MID_RUN, clock_s + block_s):
                self.sleep_until(self.started + (self.spec.truth.fault_after_s or 0.0))
                self.die()
            clock_s += block_s
            self.sleep_until(self.started + clock_s)
            done += count
            self.marker({"units": plan.units * count, "accepted": plan.units * count, "steps": count,
                         "data_wait_s": round(block.data_wait_s, 6), "compute_s": round(block.compute_s, 6),
                         "latency_ms": [round(s * 1000.0, 3) for s in block.step_s]}, clock_s)
            if done == warmup_steps and warmup_steps > 0:
                self.marker({"phase": "measure"}, clock_s)
            if 0 < canary_steps <= done and done - count < canary_steps:   # the first marker at or past them
                self.out.writelines(self.output)
                self.marker({"output": "end"}, clock_s)
        return 0

    def _block(self, plan: StepPlan, factor: float, *, first_step: int, count: int, warmup_steps: int) -> _Block:
        block = _Block()
        for step in range(first_step, first_step + count):
            compute_s, data_s = noisy_step(plan, self.rng, cv=self.spec.truth.noise_cv, factor=factor)
            if step < warmup_steps:
                compute_s *= 1.0 + WARMUP_SLOWDOWN * (1.0 - step / warmup_steps)
            block.compute_s += compute_s
            block.data_wait_s += max(0.0, data_s - compute_s)
            block.step_s.append(max(compute_s, data_s))
        return block

    def _faulted(self, fault: Fault, clock_s: float) -> bool:
        truth = self.spec.truth
        return truth.fault == fault and truth.fault_after_s is not None and clock_s >= truth.fault_after_s

    def out_of_memory(self, plan: StepPlan) -> int:
        self.publish(plan, throttled=False, oom=True)
        self.sleep_until(self.started + 2.0)  # model load, then the first forward pass fails
        sys.stderr.write(
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {plan.mem_used_mib:.0f} MiB "
            f"(GPU 0; {self.spec.truth.vram_mib} MiB total capacity)\n")
        sys.stderr.flush()
        return EXIT_OOM

    def die(self) -> None:
        """The host goes down: every process of this session is killed at once, so no result is written."""
        died = self.env.get(hostenv.ENV_DIED_FILE)
        if not died:
            os._exit(137)
        with open(died, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"t": self.clock.now()}))
        os.killpg(os.getpgrp(), signal.SIGKILL)


def _start_at_launch(clock: AgentClock, env: dict[str, str]) -> float:
    """When the simulated work starts: the moment the agent launched this process.

    Starting an interpreter takes real wall time, which a scaled clock would magnify (0.2 s is a minute at ×300)
    by however busy the simulator's machine is, and even counted at wall speed it is the simulator machine's load,
    not the simulated host's: the truth has no workload init (the oracle's cost has none), so none is simulated.
    The workload then keeps pace from the launch (it sleeps less at first to catch up), and stamps each marker with
    the simulated time its work ended (the agent's ``t`` field), so a CPU-starved moment on the simulator's machine
    delays a marker's delivery but not its time. See docs/simulator.md.
    """
    now = clock.now()
    launched = _env_float(env, ENV_LAUNCH_T)
    if launched is None or not launched <= now:
        return now
    return launched


def predictions(input_bytes: bytes, *, wrong: bool) -> list[str]:
    """One output line per input record: a function of the record's bytes only (a WRONG_OUTPUT host errs)."""
    records = input_bytes.splitlines() or [f"record {i}".encode() for i in range(DEFAULT_INPUT_RECORDS)]
    lines = []
    for index, record in enumerate(records):
        digest = hashlib.sha256(record).hexdigest()[:16]
        if wrong and (index % 4 == 3 or index == len(records) - 1):
            digest = hashlib.sha256(record + b"\x00").hexdigest()[:16]
        lines.append(f"{index} {digest}\n")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    env = dict(os.environ)
    try:
        spec = hostenv.read_spec(env)
    except (KeyError, OSError, ValueError) as exc:
        sys.stderr.write(f"simworkload: not on a simulated host ({exc!r})\n")
        return 2
    clock = AgentClock(_env_float(env, ENV_TIME_SCALE), _env_float(env, ENV_TIME_ORIGIN),
                       _env_float(env, ENV_TIME_ANCHOR))
    variant = Variant(batch_size=args.batch, precision=Precision(args.precision), loaders=args.loaders,
                      gpus=args.gpus)
    data = b""
    if args.input:
        with open(args.input, "rb") as handle:
            data = handle.read()
    output = predictions(data, wrong=spec.truth.fault == Fault.WRONG_OUTPUT)
    workload = _Workload(spec, variant, clock, sys.stdout, env, random.Random(args.noise_seed), output)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        status = workload.run(steps=args.steps, seconds=args.seconds, report_every=max(1, args.report_every),
                              warmup_steps=max(0, args.warmup_steps), canary_steps=max(0, args.canary_steps))
        if status == 0:
            sys.stdout.writelines(output)
            sys.stdout.flush()
        return status
    except _Terminated:
        workload.publish(None, throttled=False)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # end "killed by SIGTERM", as a real workload would
        raise
    finally:
        workload.publish(None, throttled=False)


class _Terminated(Exception):
    """SIGTERM arrived: the GPUs go idle before the process ends."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated()


def _env_float(env: dict[str, str], name: str) -> float | None:
    value = env.get(name)
    return float(value) if value else None


if __name__ == "__main__":
    sys.exit(main())
