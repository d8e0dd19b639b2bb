"""Seeded mixes of chaos: one seed gives one mix (the simulator's knobs, its world, and where to kill the console).

Every mix leads with one fault kind (``FAULT_KINDS[seed % len]``), so a run over consecutive seeds covers every
kind, and adds two to four more drawn from the seed. A mix that disturbs the console runs it as its own process and,
after a drawn number of output lines, does to it what operators and machines do: ``kill -9`` (then ``vastui
campaign resume``), two signals 0.1 s apart (Ctrl-C twice, or a service manager's SIGTERMs), the reader of its
output exiting (``| head``; with Ctrl-C too, ``| tee``), or the disk under its store filling up. The others run the
console in the runner's process (real HTTP and SSH on loopback all the same), where replies slower than the
client's timeout are affordable because that timeout can be short. Half the kills come at a line of output, the
others as the console's first create or destroy reaches the simulator (which still does the work).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from vastui.sim.chaos import Chaos

Knobs = dict[str, float | int | bool | tuple[float, float]]

# The campaign's client gives up on a reply after this many wall seconds (the console's own default is 30 s);
# slow replies are held longer than that.
CLIENT_TIMEOUT_S = 4.0
SLOW_REPLY_S = 6.0
KILL = "kill9"
DOUBLE_SIGNAL = "double_signal"
BROKEN_PIPE = "broken_pipe"
FULL_DISK = "full_disk"
# What may happen to a console run as its own process (the runner's own ways of hurting it, not the simulator's).
DISTURBANCES = (KILL, DOUBLE_SIGNAL, BROKEN_PIPE, FULL_DISK)
# An outage lasts 1-3 wall seconds: at the runs' x300 that is 5-15 simulated minutes without an answer.
FAULT_AFTER_S = (20.0, 240.0)   # simulated seconds after running began; a fast campaign runs a few minutes


def _storm(rng: random.Random) -> Knobs:
    return {"rate_limit_every_n": rng.randint(5, 12), "rate_limit_storm_len": rng.randint(1, 3),
            "retry_after_s": round(rng.uniform(0.2, 1.0), 2)}


def _burst(rng: random.Random) -> Knobs:
    return {"error_5xx_rate": round(rng.uniform(0.02, 0.06), 3), "error_5xx_burst_len": rng.randint(1, 3)}


def _slow(rng: random.Random) -> Knobs:
    return {"slow_reply_rate": round(rng.uniform(0.01, 0.03), 3), "slow_reply_s": SLOW_REPLY_S}


def _number(value: float | int | bool | tuple[float, float]) -> float:
    assert not isinstance(value, tuple), value
    return float(value)


def _rate(name: str, low: float, high: float) -> Callable[[random.Random], Knobs]:
    return lambda rng: {name: round(rng.uniform(low, high), 3)}


def _mid_run(name: str, low: float, high: float) -> Callable[[random.Random], Knobs]:
    """A fault that strikes a while after the instance started running: soon enough to hit a short campaign."""
    return lambda rng: {name: round(rng.uniform(low, high), 3), "fault_after_s": FAULT_AFTER_S}


def _quota(rng: random.Random) -> Knobs:
    return {"search_quota_n": rng.randint(1, 6), "quota_reset_in_s": 3600.0}


# fault kind (as Chaos.injected counts it) -> how its knobs are drawn
FAULTS: dict[str, Callable[[random.Random], Knobs]] = {
    "rate_limited": _storm,
    "server_error": _burst,
    "slow_reply": _slow,
    "connection_dropped": lambda rng: {"drop_connection_rate": round(rng.uniform(0.01, 0.04), 3),
                                       "drop_mutation_rate": round(rng.uniform(0.15, 0.4), 3)},
    "offer_stolen": _rate("offer_stolen_rate", 0.1, 0.4),
    "stuck_loading": _rate("stuck_loading_rate", 0.1, 0.3),
    "goes_offline": _mid_run("offline_rate", 0.1, 0.3),
    "exited": _mid_run("exit_rate", 0.1, 0.3),
    "ssh_cut": _mid_run("ssh_cut_rate", 0.2, 0.5),
    "wrong_output": _rate("wrong_output_rate", 0.15, 0.35),
    "search_quota": _quota,
    "redirect": _rate("redirect_rate", 0.02, 0.08),
    # an outage from a request a fast campaign reaches: one makes about 90 (they were drawn up to 300 until the first
    # wave went to the cheaper hour, and one campaign's outage, at request 177, never came)
    "outage": lambda rng: {"outage_after_n": rng.randint(20, 80), "outage_s": round(rng.uniform(1.0, 3.0), 2)},
}
FAULT_KINDS = (*FAULTS, *DISTURBANCES)
# Instance faults share one roll per create (Chaos.draw_instance_fault): their rates must add up to at most 1.
_INSTANCE_RATES = ("stuck_loading_rate", "offline_rate", "exit_rate", "ssh_cut_rate", "wrong_output_rate")
WORLD_SEEDS = (2, 3, 5, 6, 7, 11, 13)


@dataclass(frozen=True, slots=True)
class Mix:
    seed: int
    world_seed: int
    kinds: tuple[str, ...]                   # the fault kinds this mix switches on (its disturbance included)
    knobs: Knobs = field(default_factory=dict)
    disturb_after_lines: int | None = None   # disturb the console after this many lines of its output...
    kill_at_request: str | None = None       # ...or (kill -9 only) as its first "create" / "destroy" reaches the simulator
    disturbance: str | None = None           # one of DISTURBANCES, when the console runs as its own process

    @property
    def disturbs_console(self) -> bool:
        return self.disturbance is not None

    def apply(self, chaos: Chaos) -> None:
        """Switch this mix's knobs on in ``chaos`` (a running simulator's), its dice seeded by the mix's seed."""
        for name, value in self.knobs.items():
            setattr(chaos, name, value)
        chaos.reseed(self.seed)

    def describe(self) -> str:
        knobs = ", ".join(f"{k}={v}" for k, v in sorted(self.knobs.items()))
        how = {KILL: "kill -9", DOUBLE_SIGNAL: "two signals 0.1 s apart", BROKEN_PIPE: "its output's reader exits",
               FULL_DISK: "its store's disk fills"}
        disturb = ""
        if self.kill_at_request is not None:
            disturb = f", kill -9 as its first {self.kill_at_request} arrives"
        elif self.disturbance is not None:
            disturb = f", {how[self.disturbance]} after {self.disturb_after_lines} lines"
        return f"seed {self.seed}: world {self.world_seed}, {'+'.join(self.kinds)} ({knobs}{disturb})"


def mix_for(seed: int) -> Mix:
    """The mix of ``seed``: deterministic, led by ``FAULT_KINDS[seed % len(FAULT_KINDS)]``."""
    rng = random.Random(seed)
    lead = FAULT_KINDS[seed % len(FAULT_KINDS)]
    disturbed = lead in DISTURBANCES or rng.random() < 0.25
    # A disturbed console runs in its own process with the console's own 30 s client timeout: no slow replies there.
    pool = [k for k in FAULTS if k != lead and not (disturbed and k == "slow_reply")]
    if disturbed and lead == "slow_reply":
        disturbed = False
    extra = rng.sample(pool, rng.randint(2, 4))
    kinds = tuple(k for k in (lead, *extra) if k not in DISTURBANCES)
    knobs: Knobs = {}
    for kind in kinds:
        knobs.update(FAULTS[kind](rng))
    total = sum(_number(knobs.get(name, 0.0)) for name in _INSTANCE_RATES)
    if total > 0.9:
        for name in _INSTANCE_RATES:
            if name in knobs:
                knobs[name] = round(_number(knobs[name]) * 0.9 / total, 3)
    world_seed = rng.choice(WORLD_SEEDS)
    lines = rng.randint(3, 45) if disturbed else None
    disturbance = (lead if lead in DISTURBANCES else rng.choice(DISTURBANCES)) if disturbed else None
    # Half the kills come at a line of output, the others while a create or a destroy is in flight.
    at_request = rng.choice((None, None, "create", "destroy")) if disturbance == KILL else None
    return Mix(seed=seed, world_seed=world_seed, kinds=(*kinds, *((disturbance,) if disturbance else ())),
               knobs=knobs, disturb_after_lines=lines, kill_at_request=at_request, disturbance=disturbance)
