"""What an earlier campaign's knob screening left for a later campaign of the same workload (docs/method.md, Repeat
campaigns): the profile it kept and the batch sizes it saw fit or fail, on how much GPU memory. A later campaign
within the manifest's ``reverify_max_age_days`` races at that profile from its first block instead of screening
again (``Screening.inherit``), and its re-verified hosts keep their earlier runs at it (campaign/repeat.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vastui.bench.manifest import Manifest, Tuning
from vastui.bench.tuning import Profile


@dataclass(frozen=True, slots=True)
class BatchSeen:
    """A batch size run at a precision on a GPU with ``gpu_ram_mb`` of memory: it fitted, or its output failed
    (out of memory, most likely)."""

    batch_size: int
    precision: str | None
    gpu_ram_mb: float
    fitted: bool


def largest_batch_held(*, gpu_ram_mb: float | None, precision: str | None, wanted: int, fallback: int | None,
                       seen: Sequence[BatchSeen]) -> int | None:
    """The largest batch up to ``wanted`` that a GPU with ``gpu_ram_mb`` is known to hold at ``precision``: one at
    least as large fitted, at that precision, on a GPU with no more memory, and none as small failed on a GPU with
    as much or more. ``fallback`` (the first profile's batch, which every candidate's canary runs) when none is.
    A GPU whose memory the offer does not state is held to the fallback."""
    if gpu_ram_mb is None:
        return fallback
    fitted = [s.batch_size for s in seen if s.fitted and s.precision == precision and s.gpu_ram_mb <= gpu_ram_mb]
    failed = [s.batch_size for s in seen if not s.fitted and s.precision == precision and s.gpu_ram_mb >= gpu_ram_mb]
    held = [b for b in fitted if b <= wanted and all(b < f for f in failed)]
    if held:
        return max(held)
    fits_wanted = any(b >= wanted for b in fitted) and all(wanted < f for f in failed)
    return wanted if fits_wanted else fallback


def _allowed(tuning: Tuning, profile: Profile) -> bool:
    """Whether every knob of ``profile`` is one the manifest's tuning lists allow (or the workload's own: None)."""
    pairs = ((profile.batch_size, tuning.batch_sizes), (profile.precision, tuning.precisions),
             (profile.loaders, tuning.loaders))
    return all((value is None and not allowed) or value in allowed for value, allowed in pairs)


@dataclass(frozen=True, slots=True)
class StoredTrial:
    """One screening trial as a later campaign reads it back: the change, its verdict (kept, the paired gain's
    interval, whether its output failed or it broke the latency SLO, whether it was judged on the cost of N alone)
    and the GPU memory of each machine that played it with whether its batch fitted there."""

    knob: str
    baseline: str
    value: str
    change: Profile | None
    accepted: bool
    gain: tuple[float, float, float] | None   # point, low, high
    pairs: int
    reason: str
    output_failed: bool = False
    breaks_slo: bool = False
    on_cost: bool = False
    memory_seen: tuple[tuple[float, bool], ...] = ()

    def as_json(self) -> dict[str, object]:
        return {"knob": self.knob, "baseline": self.baseline, "value": self.value,
                "change": None if self.change is None else json.loads(self.change.to_json()),
                "accepted": self.accepted, "gain": None if self.gain is None else list(self.gain),
                "pairs": self.pairs, "reason": self.reason, "output_failed": self.output_failed,
                "breaks_slo": self.breaks_slo, "on_cost": self.on_cost,
                "memory_seen": [[ram, fitted] for ram, fitted in self.memory_seen]}


class _Reader:
    """Reads one stored screening's JSON, each malformed field a ValueError naming it and the campaign."""

    def __init__(self, campaign_id: str) -> None:
        self.campaign_id = campaign_id

    def fail(self, what: str) -> ValueError:
        return ValueError(f"the stored screening of campaign {self.campaign_id} has {what}")

    def profile(self, value: object, what: str) -> Profile:
        profile = Profile.from_json(json.dumps(value))
        if profile is None:
            raise self.fail(f"a malformed {what} ({value!r})")
        return profile

    def get(self, data: dict[str, object], key: str, kind: type | tuple[type, ...], what: str) -> object:
        value = data.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
            raise self.fail(f"a malformed {what}: {key} is {value!r}")
        return value

    def trial(self, entry: object) -> StoredTrial:
        if not isinstance(entry, dict):
            raise self.fail(f"a malformed trial ({entry!r})")
        knob, baseline, value = (str(self.get(entry, key, str, "trial")) for key in ("knob", "baseline", "value"))
        gain = entry.get("gain")
        if gain is not None and (not isinstance(gain, list) or len(gain) != 3
                                 or not all(isinstance(g, int | float) and not isinstance(g, bool) for g in gain)):
            raise self.fail(f"a malformed trial gain ({gain!r})")
        memory = entry.get("memory_seen", [])
        if not isinstance(memory, list) or not all(
                isinstance(m, list) and len(m) == 2 and isinstance(m[0], int | float) and isinstance(m[1], bool)
                for m in memory):
            raise self.fail(f"a malformed trial memory record ({memory!r})")
        change = entry.get("change")
        flags = [self.get(entry, key, bool, "trial") for key in ("accepted", "output_failed", "breaks_slo", "on_cost")]
        return StoredTrial(
            knob=knob, baseline=baseline, value=value,
            change=None if change is None else self.profile(change, "trial change"),
            accepted=bool(flags[0]), gain=None if gain is None else (float(gain[0]), float(gain[1]), float(gain[2])),
            pairs=int(str(self.get(entry, "pairs", int, "trial"))),
            reason=str(self.get(entry, "reason", str, "trial")), output_failed=bool(flags[1]),
            breaks_slo=bool(flags[2]), on_cost=bool(flags[3]),
            memory_seen=tuple((float(m[0]), bool(m[1])) for m in memory))

    def batch(self, entry: object) -> BatchSeen:
        if (not isinstance(entry, list) or len(entry) != 4 or not isinstance(entry[0], int)
                or not (entry[1] is None or isinstance(entry[1], str))
                or not isinstance(entry[2], int | float) or not isinstance(entry[3], bool)):
            raise self.fail(f"a malformed batch entry {entry!r}")
        return BatchSeen(entry[0], entry[1], float(entry[2]), entry[3])


@dataclass(frozen=True, slots=True)
class InheritedScreening:
    """What an earlier campaign's screening of this workload kept, as a later campaign races at it: from which
    profile (``start``, its GPU count aside: each candidate keeps its own), the profile kept, the batch sizes seen
    to fit or fail and on how much memory (``BatchSeen``, which bound each GPU class's batch as they did there),
    its trials in that campaign's words (``knobs``) and as verdicts (``trials``: what they settled, the leader's
    tuning does not try again; campaign/screening.py), and the screener's GPU memory and count."""

    campaign_id: str
    screened_at: float
    start: Profile
    profile: Profile
    batches: tuple[BatchSeen, ...]
    knobs: tuple[str, ...]
    trials: tuple[StoredTrial, ...] = ()
    screener: str = ""
    screener_gpu_ram_mb: float | None = None
    screener_gpus: int | None = None

    def to_json(self) -> str:
        """As the store keeps it (``screenings.json_text``); the campaign and time are the row's own."""
        return json.dumps({"start": json.loads(self.start.to_json()), "profile": json.loads(self.profile.to_json()),
                           "batches": [[b.batch_size, b.precision, b.gpu_ram_mb, b.fitted] for b in self.batches],
                           "knobs": list(self.knobs), "trials": [t.as_json() for t in self.trials],
                           "screener": self.screener, "screener_gpu_ram_mb": self.screener_gpu_ram_mb,
                           "screener_gpus": self.screener_gpus}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, *, campaign_id: str, screened_at: float) -> InheritedScreening:
        """Read a stored screening back; ValueError saying what is wrong with a text that is not one."""
        read = _Reader(campaign_id)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"the stored screening of campaign {campaign_id} is not JSON ({exc})") from exc
        if not isinstance(data, dict) or not {"start", "profile", "batches", "knobs"} <= set(data):
            raise ValueError(f"the stored screening of campaign {campaign_id} lacks start, profile, batches or knobs")
        start, profile = read.profile(data["start"], "profile"), read.profile(data["profile"], "profile")
        batches = [read.batch(entry) for entry in (data["batches"] if isinstance(data["batches"], list) else [None])]
        knobs = data["knobs"]
        if not isinstance(knobs, list) or not all(isinstance(k, str) for k in knobs):
            raise read.fail("malformed knob descriptions")
        trials = data.get("trials", [])
        if not isinstance(trials, list):
            raise read.fail(f"a malformed trial list ({trials!r})")
        ram, gpus = data.get("screener_gpu_ram_mb"), data.get("screener_gpus")
        if ram is not None and (not isinstance(ram, int | float) or isinstance(ram, bool)):
            raise read.fail(f"a malformed screener memory ({ram!r})")
        if gpus is not None and (not isinstance(gpus, int) or isinstance(gpus, bool)):
            raise read.fail(f"a malformed screener GPU count ({gpus!r})")
        return cls(campaign_id=campaign_id, screened_at=screened_at, start=start, profile=profile,
                   batches=tuple(batches), knobs=tuple(knobs), trials=tuple(read.trial(t) for t in trials),
                   screener=str(data.get("screener") or ""), screener_gpu_ram_mb=None if ram is None else float(ram),
                   screener_gpus=gpus)

    def unusable(self, manifest: Manifest) -> str | None:
        """Why this manifest cannot race at the inherited profile (its first profile or allowed values changed
        since), or None when it can."""
        if self.start != Profile.first(manifest.tuning, gpu_count=None):
            return (f"campaign {self.campaign_id} screened from {self.start.describe()}, the manifest now starts at "
                    f"{Profile.first(manifest.tuning, gpu_count=None).describe()}")
        if not _allowed(manifest.tuning, self.profile):
            return f"campaign {self.campaign_id} kept {self.profile.describe()}, which the manifest no longer allows"
        return None

    def profile_for(self, *, gpu_ram_mb: float | None, gpu_count: int | None) -> Profile:
        """The profile a candidate on GPUs with ``gpu_ram_mb`` each is raced at: the kept one, with the largest kept
        batch its memory is known to hold (the first profile's batch when none is)."""
        batch = self.profile.batch_size
        if batch is not None:
            batch = largest_batch_held(gpu_ram_mb=gpu_ram_mb, precision=self.profile.precision, wanted=batch,
                                       fallback=self.start.batch_size, seen=self.batches)
        return replace(self.profile, batch_size=batch, gpu_count=gpu_count)

    def describe(self, *, now: float | None) -> str:
        age = "" if now is None else f", {max(0.0, now - self.screened_at) / 86_400.0:.1f} days ago"
        return f"knobs screened by campaign {self.campaign_id}{age}: raced at {self.profile.describe()}"
