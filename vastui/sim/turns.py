"""The turns a real rental takes on its way to ``running`` (Realism's "keys and the instance lifecycle" group).

Each rental draws its fate once, at create, from dice seeded by the world's seed and the instance id (so a run can
be replayed, and one rental's draw never shifts another's): a ``scheduling`` phase before loading, a scheduling
failure (an error, or a *stopped* instance when the create said ``cancel_unavail: false``), a transient ``unknown``
("no recent heartbeat") for a poll or two, and a null first ``show instance`` right after the create. One turn is
the machine's, not the rental's: a host whose container runtime is broken (``status_msg`` carries an "OCI runtime
... nvidia-container-cli ... driver rpc error" and the container never runs) fails every rental until its owner
repairs it, so that die is seeded by the machine alone (``runtime_broken``). The sources are cited in
docs/api-notes.md, "Keys and the instance lifecycle".
"""

from __future__ import annotations

import random
from dataclasses import dataclass

OCI_FAILURE = ("Error response from daemon: failed to create task for container: OCI runtime create failed: "
               "runc create failed: unable to start container process: nvidia-container-cli: initialization "
               "error: driver rpc error: failed")
SCHEDULING_FAILURE = ("Scheduling failed: the machine does not have the resources free for this rental now")


@dataclass(frozen=True, slots=True)
class LifecycleOdds:
    """How often each turn happens (per rental) and how long the transient ones last, in market seconds.

    Tests may set their own (e.g. ``scheduling_failure=1.0``) on ``Market.lifecycle_odds``."""

    scheduling: float = 0.5                  # a scheduling phase before loading
    scheduling_s: tuple[float, float] = (3.0, 20.0)
    scheduling_failure: float = 0.05         # scheduling cannot place the rental at all
    transient_unknown: float = 0.3           # "unknown" for a while during loading or running
    unknown_after_s: tuple[float, float] = (0.0, 60.0)   # from the create
    unknown_s: tuple[float, float] = (5.0, 25.0)
    null_first_show: float = 0.3             # the first show after the create answers {"instances": null}
    runtime_failure: float = 0.03            # share of machines whose container runtime is broken: never runs

    @classmethod
    def never(cls) -> LifecycleOdds:
        """No rental takes a turn: for tests whose rentals are set-up, not what they test."""
        return cls(scheduling=0.0, scheduling_failure=0.0, transient_unknown=0.0, null_first_show=0.0,
                   runtime_failure=0.0)


@dataclass(frozen=True, slots=True)
class Fate:
    """What one rental will go through (all zero/False: the kind path)."""

    scheduling_s: float = 0.0
    scheduling_fails: bool = False
    unknown_from: float | None = None        # seconds after the create
    unknown_until: float | None = None
    null_first_show: bool = False
    runtime_fails: bool = False


def runtime_broken(*, seed: int, machine_id: int, odds: LifecycleOdds) -> bool:
    """Whether this machine's container runtime is broken: the host's own state (a driver the container toolkit
    cannot talk to), so every rental on it fails alike; drawn from the world's seed and the machine only."""
    return random.Random(f"{seed}:{machine_id}:runtime").random() < odds.runtime_failure


def draw_fate(*, seed: int, instance_id: int, offer_id: int, machine_id: int, odds: LifecycleOdds, lifecycle: bool,
              scheduling_failures: bool, refused_before: int = 0) -> Fate:
    """The fate of one rental: ``lifecycle`` switches the transient turns on, ``scheduling_failures`` the failures.

    The rental is part of the seed of its own turns, and so is how many creates on this offer scheduling refused
    before (``refused_before``): a refused create creates nothing, so the next instance id is the same when the
    offer is asked again with no create between, and the ask must still draw afresh. A broken runtime is the
    machine's (``runtime_broken``) and fails every rental on it."""
    again = f":{refused_before}" if refused_before else ""   # (a first ask draws as it always did)
    rng = random.Random(f"{seed}:{instance_id}:{offer_id}:lifecycle{again}")
    rolls = [rng.random() for _ in range(5)]   # the fifth was the runtime's die: kept so the others stay as drawn
    spans = [rng.uniform(*odds.scheduling_s), rng.uniform(*odds.unknown_after_s), rng.uniform(*odds.unknown_s)]
    fails = scheduling_failures and rolls[1] < odds.scheduling_failure
    if not lifecycle:
        return Fate(scheduling_fails=fails)
    unknown = rolls[2] < odds.transient_unknown
    return Fate(scheduling_s=spans[0] if rolls[0] < odds.scheduling else 0.0, scheduling_fails=fails,
                unknown_from=spans[1] if unknown else None, unknown_until=spans[1] + spans[2] if unknown else None,
                null_first_show=rolls[3] < odds.null_first_show,
                runtime_fails=runtime_broken(seed=seed, machine_id=machine_id, odds=odds))
