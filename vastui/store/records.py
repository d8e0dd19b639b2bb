"""The store's records: small frozen values that go into and come out of ``SqliteStore``.

They depend on nothing but the standard library, so the store never depends on the Vast client's models.
Times are epoch seconds (``*_at``) from the caller's clock; durations are seconds (``*_s``). JSON fields
(``*_json``) are JSON text the caller serialised; the store checks it parses and keeps it verbatim
(less any registered secret, which is replaced by ``<redacted>``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from vastui.approval import RequestState


class IntentStatus(enum.StrEnum):
    """Where a create intent stands. Only RULED_OUT (or a confirmed destroy) releases it."""

    PENDING = "pending"  # written before the create call; the call has not answered
    BOUND = "bound"  # the create call returned an instance id
    FAILED = "failed"  # the create call raised: the instance is *possibly created* until listings say otherwise
    RULED_OUT = "ruled_out"  # complete listings show no instance for it: nothing was created


class InstanceState(enum.StrEnum):
    """Well-known lifecycle states for ``record_transition``; any other provider status string is accepted too."""

    CREATED = "created"
    LOADING = "loading"
    RUNNING = "running"
    EXITED = "exited"
    OFFLINE = "offline"
    UNKNOWN = "unknown"
    STOPPED = "stopped"
    DESTROY_REQUESTED = "destroy_requested"
    GONE = "gone"  # two successive complete listings missed it (see ``record_gone``)


class RunStatus(enum.StrEnum):
    """How a run ended. Only OK runs with a throughput count for a host's best (``HostKnowledge.best``)."""

    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    INTERRUPTED = "interrupted"  # found still RUNNING after a crash and closed by resume


class CampaignPhase(enum.StrEnum):
    """The phases a campaign is recorded in (``set_campaign_phase`` / ``finish_campaign``); the store keeps the
    text, so an older database reads the same."""

    PLANNED = "planned"         # recorded with its plan; nothing rented yet
    MEASURING = "measuring"     # the engine runs: candidates rent, race and tune
    TEARDOWN = "teardown"       # destroying and proving every instance gone
    FINISHED = "finished"       # receipt written, teardown proven
    LEAKED = "leaked"           # ended with an instance not proven gone
    CLEANED_UP = "cleaned_up"   # resumed after a crash and torn down
    CRASHED = "crashed"         # the engine raised; ``vastui campaign resume`` cleans up


@dataclass(frozen=True, slots=True)
class Writer:
    """Who wrote a row: the operator (config ``operator``), and the host and pid of the process. In a store a team
    shares, what tells one console's campaigns, instances and approvals from another's."""

    operator: str
    host: str
    pid: int

    def describe(self) -> str:
        return f"{self.operator} on {self.host} (pid {self.pid})"

    @property
    def short(self) -> str:
        """Operator and host in one word, as a table cell shows it: ``ana@ws-3`` (the host once, when the
        operator's default name already ends with it)."""
        return self.operator if self.operator.endswith(f"@{self.host}") else f"{self.operator}@{self.host}"


def writer_of(row: object) -> Writer | None:
    """The writer a row records (None for a row written before schema v6, or by nobody known)."""
    try:
        operator, host, pid = row["operator"], row["host"], row["pid"]   # type: ignore[index]
    except (IndexError, KeyError):
        return None
    return Writer(operator, host, int(pid)) if operator is not None and host is not None and pid is not None else None


@dataclass(frozen=True, slots=True)
class Manifest:
    """A workload manifest as it was written, keyed by its identity digest."""

    digest: str
    name: str
    toml_text: str
    stored_at: float


@dataclass(frozen=True, slots=True)
class CampaignOwner:
    """The process running an active campaign: its host, pid and the pid's start (so a reused pid is not it)."""

    campaign_id: str
    host: str
    pid: int
    pid_started: str
    claimed_at: float
    operator: str | None = None   # who runs it (schema v6; None before)


@dataclass(frozen=True, slots=True)
class Campaign:
    """One campaign. It is active until ``finished_at`` is set."""

    campaign_id: str
    manifest_digest: str
    created_at: float
    phase: str
    phase_at: float
    budget_usd: float | None
    deadline_at: float | None
    finished_at: float | None
    by: Writer | None = field(default=None, compare=False)   # who created it (schema v6)

    @property
    def is_active(self) -> bool:
        return self.finished_at is None


@dataclass(frozen=True, slots=True)
class CampaignPhaseChange:
    """One entry of a campaign's append-only phase history."""

    campaign_id: str
    phase: str
    at: float
    note: str | None


@dataclass(frozen=True, slots=True)
class OfferSnapshot:
    """An offer as the marketplace showed it at ``taken_at``; ``snapshot_json`` is the whole row."""

    campaign_id: str | None
    offer_id: int
    machine_id: int
    gpu_name: str
    num_gpus: int
    dph_usd: float
    taken_at: float
    snapshot_json: str


@dataclass(frozen=True, slots=True)
class Intent:
    """A create intent: written before the create call, bound to the instance id after it."""

    intent_id: int
    campaign_id: str
    offer_id: int
    label: str
    created_at: float
    status: IntentStatus
    machine_id: int | None
    dph_usd: float | None
    deadline_at: float | None
    instance_id: int | None
    bound_at: float | None
    error: str | None
    resolved_at: float | None
    by: Writer | None = field(default=None, compare=False)   # who rented it (schema v6)


@dataclass(frozen=True, slots=True)
class InstanceTransition:
    """One row of an instance's append-only lifecycle history."""

    instance_id: int
    state: str
    at: float
    detail: str | None


@dataclass(frozen=True, slots=True)
class OwnedInstance:
    """An intent this campaign may still own: not ruled out and not proven gone.

    ``state`` is the latest recorded transition (None when none was recorded or no instance id is known yet).
    """

    intent: Intent
    state: str | None
    state_at: float | None


@dataclass(frozen=True, slots=True)
class DestroyEvidence:
    """Proof that an instance is gone: the times of the complete listings that missed it."""

    instance_id: int
    campaign_id: str | None
    missed_listing_at: tuple[float, ...]
    confirmed_at: float


@dataclass(frozen=True, slots=True)
class Run:
    """One measured run of a workload variant on one host. Every run is kept; "best" is a query."""

    run_id: int
    campaign_id: str
    instance_id: int | None
    machine_id: int
    gpu_name: str
    num_gpus: int
    workload_digest: str
    variant_json: str
    started_at: float
    status: RunStatus
    pull_s: float | None
    ready_s: float | None
    warmup_s: float | None
    throughput_units_per_s: float | None
    stats_json: str | None
    finished_at: float | None
    error: str | None


@dataclass(frozen=True, slots=True)
class ProgressRecord:
    """A ``progress`` line from the agent; ``latencies_s`` are the request latencies it carried."""

    run_id: int
    at: float
    units_done: float
    units_accepted: float
    data_wait_s: float | None = None
    compute_s: float | None = None
    latencies_s: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuSample:
    """A ``gpu`` line from the agent, for one GPU. Missing metrics are None."""

    run_id: int
    at: float
    gpu_index: int
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    pcie_rx_kib_s: float | None = None
    pcie_tx_kib_s: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    throttle_reasons: int | None = None


@dataclass(frozen=True, slots=True)
class HostKnowledge:
    """Everything known about one host key for one workload: every run, who measured it, and the best OK run."""

    machine_id: int
    gpu_name: str
    num_gpus: int
    workload_digest: str
    runs: tuple[Run, ...]
    throughputs_units_per_s: tuple[float, ...]
    campaign_ids: tuple[str, ...]
    best: Run | None

    @property
    def n_runs(self) -> int:
        return len(self.runs)

    @property
    def n_ok(self) -> int:
        return len(self.throughputs_units_per_s)


@dataclass(frozen=True, slots=True)
class BadHost:
    """A host flagged as bad, with why, the evidence, and when the flag lapses (None: never).

    ``is_expired`` is evaluated at the ``now`` given to the query; expired entries are still returned.
    """

    entry_id: int
    machine_id: int
    reason: str
    evidence_json: str
    recorded_at: float
    expires_at: float | None
    campaign_id: str | None
    is_expired: bool


@dataclass(frozen=True, slots=True)
class Receipt:
    """A campaign receipt in both renderings."""

    receipt_id: int
    campaign_id: str
    created_at: float
    json_text: str
    markdown_text: str


@dataclass(frozen=True, slots=True)
class StoredScreening:
    """What one campaign's knob screening kept for a workload (``json_text``: campaign/screening.py's
    ``InheritedScreening``), when it finished."""

    row_id: int
    campaign_id: str
    workload_digest: str
    screened_at: float
    json_text: str


@dataclass(frozen=True, slots=True)
class KeptRequest:
    """An approval request of a detached campaign, kept in the store so another process can answer it.

    ``asked_at``, ``expires_at`` and ``answered_at`` are epoch seconds of the wall clock (the operator's time, not
    the marketplace's); ``deadline_at`` is on the campaign's clock, as in the request. ``row_id`` is the store's
    own key: ``request_id`` is unique among the campaign's pending requests only."""

    row_id: int
    campaign_id: str
    request_id: str
    action: str
    target: str
    summary: str
    cost_cap_usd: float | None
    gpu_name: str | None
    num_gpus: int | None
    dph_usd: float | None
    deadline_at: float | None
    asked_at: float
    expires_at: float
    state: RequestState
    answered_by: str | None = None
    answered_at: float | None = None
    reason: str | None = None
    by: Writer | None = field(default=None, compare=False)   # the campaign process that asked (schema v6)

    def is_expired(self, now: float) -> bool:
        """Whether its time is up at ``now`` (epoch seconds), whatever its recorded state."""
        return now >= self.expires_at


@dataclass(frozen=True, slots=True)
class WatchRound:
    """What one round of ``vastui watch`` saw: the listing's verdict (clean, leaking or unknown) and counts, what
    every listed instance burns, the account's credit, and the error that made the listing incomplete."""

    row_id: int
    checked_at: float
    verdict: str
    listed_count: int
    leaked_count: int
    unowned_count: int
    burn_usd_per_h: float | None
    credit_usd: float | None
    error: str | None
    by: Writer | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class WatchAlert:
    """One alert the watch raised. ``alert_key`` names the condition (one leak, the runway, the API key): while
    an alert of a key is younger than the quiet period, the condition raises no other. ``delivered_at`` is None
    until the webhook took it (at once when there is none); until then every round tries again."""

    row_id: int
    alert_key: str
    kind: str
    instance_id: int | None
    text: str
    raised_at: float
    delivered_at: float | None
    attempts: int
    last_error: str | None
    by: Writer | None = field(default=None, compare=False)
