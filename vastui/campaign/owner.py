"""Who runs a campaign: the process that claimed it in the store, and whether that process is still alive.

A campaign's phase says what it was doing when last written, not whether anyone is still doing it: a console killed
with SIGKILL leaves ``measuring`` behind. So the running process claims the campaign (host, pid and the pid's start
time, which tells a reused pid apart) and drops the claim when it ends. ``campaign resume`` refuses a campaign whose
owner is alive (it would destroy a live campaign's instances under it), and the leak watcher treats an active
campaign whose owner is gone like a crashed one.
"""

from __future__ import annotations

import enum
import os
import socket

from vastui.store.records import CampaignOwner


class OwnerState(enum.StrEnum):
    ALIVE = "alive"
    GONE = "gone"
    UNKNOWN = "unknown"      # claimed on another host: this one cannot tell


def pid_started(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux ``/proc``), or "" where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return fields[19]   # field 22 of stat(5); the first two (pid, comm) are before the split
    except (OSError, IndexError):
        return ""


def current_owner(campaign_id: str, *, at: float) -> CampaignOwner:
    pid = os.getpid()
    return CampaignOwner(campaign_id=campaign_id, host=socket.gethostname(), pid=pid, pid_started=pid_started(pid),
                         claimed_at=at)


def owner_state(owner: CampaignOwner) -> OwnerState:
    if owner.host != socket.gethostname():
        return OwnerState.UNKNOWN
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return OwnerState.GONE
    except PermissionError:
        pass   # alive, someone else's
    started = pid_started(owner.pid)
    if owner.pid_started and started and started != owner.pid_started:
        return OwnerState.GONE   # the pid was reused by a later process
    if _is_zombie(owner.pid):
        return OwnerState.GONE
    return OwnerState.ALIVE


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
