"""Startup as its parts, each from the source that knows it, and what an instance was billed.

- **Image pull** and **readiness** come from the marketplace: the instance's creation time (``start_date``) and
  its log, which stamps the pull's end and the container's start. Without a usable log, the time from creation to
  the first listing that showed ``running`` is counted as loading, unsplit.
- **Workload init** comes from the agent's timestamps: from the agent's start to the workload's first record.
- **Console overhead** is the rest, from the container's start to the agent's start: SSH, the agent's upload,
  starting it. A production run is launched by the image's on-start, not by this console, so this part is shown
  and never charged to production.

What a benchmark instance was billed is the billing model over the same moments the marketplace showed
(created, running, destroyed) and the bytes its log says were pulled.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from vastui.bench import billing
from vastui.vast.models import Offer

# A line that starts with a time stamp: the platform's (microseconds) or the container daemon's (RFC 3339 with up
# to nanoseconds, ``Z`` or an offset).
_STAMPED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d)?\s+(.*)$")
_PULLED = re.compile(r"Image pulled \((\d+(?:\.\d+)?) MB\)")
_DOWNLOADED = "Status: Downloaded newer image for"    # the daemon's summary at the end of a pull
_UP_TO_DATE = "Status: Image is up to date for"       # the image was cached: nothing pulled
_RUNNING = "Container started"
# Where loading begins: the daemon starts pulling, or says the image is there; the platform's own wording says it
# is pulling or starting the container.
_LOADING = re.compile(r": Pulling from |Status: Image is up to date for|^Pulling image |^Starting container")
# The disk every campaign rental takes, and so the disk its shortlist search prices into ``dph_total`` and filters
# on: an offer with less free disk cannot be rented at this size, and a price at a smaller disk understates storage.
RENTED_DISK_GIB = 32.0


@dataclass(frozen=True, slots=True)
class LoadingSplit:
    """Pull and readiness from the instance's log (seconds on the marketplace's clock); None when unknown."""

    pull_s: float | None
    readiness_s: float | None
    running_at: float | None
    pulled_gb: float | None
    scheduling_s: float | None = None   # creation to the start of loading (the marketplace's queue), when dated


def _stamp(day_time: str, fraction: str | None, zone: str | None) -> float:
    at = dt.datetime.strptime(day_time, "%Y-%m-%dT%H:%M:%S")
    offset = dt.timedelta(0)
    if zone not in (None, "Z"):
        assert zone is not None
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    seconds = at.replace(tzinfo=dt.UTC).timestamp() - offset.total_seconds()
    return seconds + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)


def split_loading(log_text: str, *, created_at: float) -> LoadingSplit:
    """Read where loading began, the pull's end and the container's start from an instance's log.

    Two wordings are read: the platform's (``Image pulled (N MB)`` then ``Container started``) and the container
    daemon's (``Status: Downloaded newer image for …``, or ``… is up to date`` for a cached image), which says when
    the pull ended but neither its size nor when the container started. A log with a container start but no pull
    line means the image was cached: the pull took no time. The pull is timed from where loading began (the time
    before it, ``scheduling_s``, is the marketplace's queue, not the host's). Whatever is not in the log is None;
    lines without a time stamp (the container's own output) say nothing about time and are skipped.
    """
    began_at: float | None = None
    pulled_at: float | None = None
    pulled_gb: float | None = None
    cached = False
    running_at: float | None = None
    for line in log_text.splitlines():
        match = _STAMPED.match(line.strip())
        if match is None:
            continue
        at, text = _stamp(match.group(1), match.group(2), match.group(3)), match.group(4)
        if began_at is None and _LOADING.search(text):
            began_at = at
        if pulled_at is None and (size := _PULLED.search(text)) is not None:
            pulled_at, pulled_gb = at, float(size.group(1)) / 1000.0
        elif pulled_at is None and (_DOWNLOADED in text or _UP_TO_DATE in text):
            pulled_at, cached = at, _UP_TO_DATE in text
        elif _RUNNING in text and running_at is None:
            running_at = at
    if cached:
        pulled_gb = 0.0
    began = created_at if began_at is None else max(created_at, began_at)
    scheduling_s = None if began_at is None else began - created_at
    if running_at is None:
        return LoadingSplit(pull_s=None if pulled_at is None else max(0.0, pulled_at - began),
                            readiness_s=None, running_at=None, pulled_gb=pulled_gb, scheduling_s=scheduling_s)
    pull_end = pulled_at if pulled_at is not None else began
    return LoadingSplit(pull_s=max(0.0, pull_end - began), readiness_s=max(0.0, running_at - pull_end),
                        running_at=running_at, pulled_gb=pulled_gb if pulled_at is not None else 0.0,
                        scheduling_s=scheduling_s)


def gpu_usd_per_hour(offer: Offer) -> float:
    """The GPUs' price of an offer: ``dph_base``, else ``dph_total`` less the storage its search priced into it
    (campaign searches ask for ``RENTED_DISK_GIB``)."""
    if offer.dph_base is not None and offer.dph_base > 0:
        return offer.dph_base
    search_storage = billing.storage_usd_per_hour(storage_cost_usd_per_gb_month=offer.storage_cost or 0.0,
                                                  disk_gb=RENTED_DISK_GIB)
    return max(0.0, offer.dph_total - search_storage)


def rates_of(offer: Offer, *, disk_gib: float) -> billing.Rates:
    """The prices a rental of ``offer`` with ``disk_gib`` of disk is billed at."""
    return billing.Rates(gpu_usd_per_hour=gpu_usd_per_hour(offer),
                         storage_usd_per_hour=billing.storage_usd_per_hour(
                             storage_cost_usd_per_gb_month=offer.storage_cost or 0.0, disk_gb=disk_gib),
                         inet_down_usd_per_gb=offer.inet_down_cost or 0.0,
                         inet_up_usd_per_gb=offer.inet_up_cost or 0.0)


@dataclass(frozen=True, slots=True)
class StartupParts:
    """One rental's startup, part by part (seconds); None where the source did not say."""

    pull_s: float | None
    readiness_s: float | None
    loading_s: float | None            # pull + readiness (or the unsplit loading time)
    workload_init_s: float | None
    console_overhead_s: float | None

    @property
    def production_startup_s(self) -> float | None:
        """What a production run pays before working: loading and the workload's init, not the console's part."""
        if self.loading_s is None:
            return None
        return self.loading_s + (self.workload_init_s or 0.0)
