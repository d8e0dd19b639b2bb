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


def profile_from_json(text: str) -> Profile | None:
    """A stored run's or screening's profile (``Profile.to_json``), or None when the text is not one."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) != {"batch_size", "precision", "loaders", "gpu_count"}:
        return None
    ints = (data["batch_size"], data["loaders"], data["gpu_count"])
    if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in ints):
        return None
    if data["precision"] is not None and not isinstance(data["precision"], str):
        return None
    return Profile(batch_size=data["batch_size"], precision=data["precision"], loaders=data["loaders"],
                   gpu_count=data["gpu_count"])


def start_profile(manifest: Manifest, *, gpu_count: int | None) -> Profile:
    """The manifest's first profile (each tuning list's first value) on ``gpu_count`` GPUs."""
    t = manifest.tuning
    return Profile(batch_size=t.batch_sizes[0] if t.batch_sizes else None,
                   precision=t.precisions[0] if t.precisions else None,
                   loaders=t.loaders[0] if t.loaders else None, gpu_count=gpu_count)


def _allowed(tuning: Tuning, profile: Profile) -> bool:
    """Whether every knob of ``profile`` is one the manifest's tuning lists allow (or the workload's own: None)."""
    pairs = ((profile.batch_size, tuning.batch_sizes), (profile.precision, tuning.precisions),
             (profile.loaders, tuning.loaders))
    return all((value is None and not allowed) or value in allowed for value, allowed in pairs)


@dataclass(frozen=True, slots=True)
class InheritedScreening:
    """What an earlier campaign's screening of this workload kept, as a later campaign races at it: from which
    profile, the profile kept (its GPU count aside: each candidate keeps its own), the batch sizes seen to fit or
    fail and on how much memory (``BatchSeen``, which bound each GPU class's batch as they did there), and its
    trials in that campaign's words."""

    campaign_id: str
    screened_at: float
    start: Profile
    profile: Profile
    batches: tuple[BatchSeen, ...]
    knobs: tuple[str, ...]

    def to_json(self) -> str:
        """As the store keeps it (``screenings.json_text``); the campaign and time are the row's own."""
        return json.dumps({"start": json.loads(self.start.to_json()), "profile": json.loads(self.profile.to_json()),
                           "batches": [[b.batch_size, b.precision, b.gpu_ram_mb, b.fitted] for b in self.batches],
                           "knobs": list(self.knobs)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, *, campaign_id: str, screened_at: float) -> InheritedScreening:
        """Read a stored screening back; ValueError saying what is wrong with a text that is not one."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"the stored screening of campaign {campaign_id} is not JSON ({exc})") from exc
        if not isinstance(data, dict) or not {"start", "profile", "batches", "knobs"} <= set(data):
            raise ValueError(f"the stored screening of campaign {campaign_id} lacks start, profile, batches or knobs")
        start, profile = (profile_from_json(json.dumps(data[key])) for key in ("start", "profile"))
        if start is None or profile is None:
            raise ValueError(f"the stored screening of campaign {campaign_id} has a malformed profile")
        batches = []
        for entry in data["batches"] if isinstance(data["batches"], list) else [None]:
            if (not isinstance(entry, list) or len(entry) != 4 or not isinstance(entry[0], int)
                    or not (entry[1] is None or isinstance(entry[1], str))
                    or not isinstance(entry[2], int | float) or not isinstance(entry[3], bool)):
                raise ValueError(f"the stored screening of campaign {campaign_id} has a malformed batch entry "
                                 f"{entry!r}")
            batches.append(BatchSeen(entry[0], entry[1], float(entry[2]), entry[3]))
        knobs = data["knobs"]
        if not isinstance(knobs, list) or not all(isinstance(k, str) for k in knobs):
            raise ValueError(f"the stored screening of campaign {campaign_id} has malformed knob descriptions")
        return cls(campaign_id=campaign_id, screened_at=screened_at, start=start, profile=profile,
                   batches=tuple(batches), knobs=tuple(knobs))

    def unusable(self, manifest: Manifest) -> str | None:
        """Why this manifest cannot race at the inherited profile (its first profile or allowed values changed
        since), or None when it can."""
        if self.start != start_profile(manifest, gpu_count=None):
            return (f"campaign {self.campaign_id} screened from {self.start.describe()}, the manifest now starts at "
                    f"{start_profile(manifest, gpu_count=None).describe()}")
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
