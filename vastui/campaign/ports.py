"""The small protocols through which a campaign reaches the marketplace, the hosts and the store.

The composition root (vastui/cli/) passes the real ones: ``HttpVastClient``, ``SshRunner``, ``SqliteStore`` or ``PostgresStore``. Keeping the
campaign on protocols keeps it free of httpx, asyncssh and aiosqlite (docs/architecture.md, Dependency rules).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

from vastui.approval import Approval, AuditRecord, AuditSink, RequestState
from vastui.remote.protocol import AgentError, GpuSample, Phase, Progress, Result
from vastui.store import records
from vastui.vast.models import Answered, CreatedInstance, Instance, InstanceListing, Offer

Record = GpuSample | Progress | Phase | Result | AgentError


class Marketplace(Protocol):
    async def search_offers(self, query: str = "", *, order: str = "score-", type_: str = "on-demand",
                            limit: int | None = None, storage_gib: float = 5.0,
                            no_default: bool = False) -> list[Offer]: ...

    async def list_instances(self) -> InstanceListing: ...

    async def show_instance(self, instance_id: int) -> Instance | None: ...

    async def request_logs(self, instance_id: int, *, tail: int | None = None, daemon: bool = False) -> str: ...

    async def create_instance(self, *, offer_id: int, image: str, disk_gib: float, label: str, approval: Approval,
                              onstart: str | None = None, env: Mapping[str, str] | None = None,
                              runtype: str = ...) -> CreatedInstance: ...

    async def destroy_instance(self, instance_id: int, *, approval: Approval) -> Answered | None: ...


class AgentSession(Protocol):
    """One agent run: iterate its records; leaving the context stops it."""

    result: Result | None

    def __aiter__(self) -> AsyncIterator[Record]: ...

    def abandon(self) -> None:
        """Leave without stopping the remote run: its instance is about to be destroyed, which ends it."""
        ...


class HostConnection(Protocol):
    """One host's SSH connection, as ``HostExecutor.connect`` hands it back: every call on it rides that one
    connection, reopened when it drops."""

    async def put_chunks(self, *, open_chunks: Callable[[], Iterable[bytes]], remote_path: str) -> None:
        """Stream ``open_chunks()`` to ``remote_path`` atomically; an error the source raises ends it unwritten."""
        ...

    def run_agent(self, argv: Sequence[str], *, interval_s: float = 1.0,
                  output_file: str | None = None) -> AbstractAsyncContextManager[AgentSession]: ...


class HostExecutor(Protocol):
    def connect(self, host: str, port: int, *, deadline_s: float) -> AbstractAsyncContextManager[HostConnection]:
        """Wait until the host accepts SSH, then hand back the connection every call inside the block rides; a
        second ``connect`` to a connected host shares it."""
        ...

    def connect_first(self, endpoints: Sequence[tuple[str, int]], *,
                      deadline_s: float) -> AbstractAsyncContextManager[HostConnection]:
        """``connect`` to the first of one instance's endpoints (in order) that accepts SSH."""
        ...

    def forget_host(self, host: str, port: int) -> int: ...


class CampaignStore(AuditSink, Protocol):
    """What a campaign keeps in and reads from the store (``SqliteStore`` and ``PostgresStore`` implement it): campaigns and
    their phases, intents and instance transitions, runs and measurements, hosts, the audit log, kept requests."""

    async def add_measurements(self, *, progress: Sequence[records.ProgressRecord] = (),
                               samples: Sequence[records.GpuSample] = ()) -> None: ...

    async def audit_records(self, *, campaign_id: str | None = None) -> list[AuditRecord]: ...

    async def bad_hosts(self, *, now: float, machine_id: int | None = None) -> list[records.BadHost]: ...

    async def bind_intent(self, *, intent_id: int, instance_id: int, at: float) -> records.Intent: ...

    async def campaign(self, campaign_id: str) -> records.Campaign | None: ...

    async def campaign_owners(self) -> dict[str, records.CampaignOwner]: ...

    async def campaigns(self) -> list[records.Campaign]: ...

    async def cancel_kept_requests(self, campaign_id: str, *, at: float, reason: str) -> int: ...

    async def claim_campaign(self, owner: records.CampaignOwner) -> None: ...

    async def create_campaign(
        self,
        *,
        campaign_id: str,
        manifest_digest: str,
        created_at: float,
        phase: str,
        budget_usd: float | None = None,
        deadline_at: float | None = None,
    ) -> records.Campaign: ...

    async def fail_intent(self, *, intent_id: int, error: str, at: float) -> records.Intent: ...

    async def finish_campaign(self, *, campaign_id: str, phase: str, at: float, note: str | None = None) -> records.Campaign: ...

    async def finish_run(
        self,
        *,
        run_id: int,
        status: records.RunStatus,
        at: float,
        throughput_units_per_s: float | None = None,
        stats_json: str | None = None,
        error: str | None = None,
    ) -> records.Run: ...

    async def host_knowledge(self, *, workload_digest: str,
                             machine_ids: Sequence[int] | None = None) -> list[records.HostKnowledge]: ...

    async def intent_for_instance(self, instance_id: int) -> records.Intent | None: ...

    async def last_offer_snapshots(self, machine_ids: Sequence[int]) -> list[records.OfferSnapshot]: ...

    async def latest_screening(self, *, workload_digest: str,
                               since: float | None = None) -> records.StoredScreening | None: ...

    async def keep_request(self, *, campaign_id: str, request_id: str, action: str, target: str, summary: str,
                           cost_cap_usd: float | None, gpu_name: str | None, num_gpus: int | None,
                           dph_usd: float | None, deadline_at: float | None, asked_at: float,
                           expires_at: float) -> records.KeptRequest: ...

    async def kept_requests(self, campaign_id: str, *,
                            state: RequestState | None = None) -> list[records.KeptRequest]: ...

    async def manifest(self, digest: str) -> records.Manifest | None: ...

    async def open_runs(self, *, campaign_id: str) -> list[records.Run]: ...

    async def owned_instances(self, *, campaign_id: str | None = None) -> list[records.OwnedInstance]: ...

    @property
    def path(self) -> Path: ...

    async def record_bad_host(
        self,
        *,
        machine_id: int,
        reason: str,
        evidence_json: str,
        recorded_at: float,
        expires_at: float | None,
        campaign_id: str | None = None,
    ) -> records.BadHost: ...

    async def record_gone(self, *, instance_id: int, missed_listing_at: Sequence[float], at: float) -> records.DestroyEvidence: ...

    async def record_intent(
        self,
        *,
        campaign_id: str,
        offer_id: int,
        label: str,
        at: float,
        machine_id: int | None = None,
        dph_usd: float | None = None,
        deadline_at: float | None = None,
    ) -> records.Intent: ...

    async def record_run_phases(self, *, run_id: int, pull_s: float | None = None, ready_s: float | None = None,
                                warmup_s: float | None = None) -> records.Run: ...

    async def record_transition(self, *, instance_id: int, state: records.InstanceState | str, at: float,
                                detail: str | None = None) -> None: ...

    async def release_campaign(self, campaign_id: str, *, pid: int) -> None: ...

    async def rule_out_intent(self, *, intent_id: int, at: float, reason: str) -> records.Intent: ...

    async def runs(self, *, campaign_id: str) -> list[records.Run]: ...

    async def save_manifest(self, *, digest: str, name: str, toml_text: str, stored_at: float) -> records.Manifest: ...

    async def save_offer_snapshots(self, snapshots: Sequence[records.OfferSnapshot]) -> None: ...

    async def save_receipt(self, *, campaign_id: str, created_at: float, json_text: str,
                           markdown_text: str) -> records.Receipt: ...

    async def save_screening(self, *, campaign_id: str, workload_digest: str, screened_at: float,
                             json_text: str) -> records.StoredScreening: ...

    async def set_campaign_phase(self, *, campaign_id: str, phase: str, at: float, note: str | None = None) -> records.Campaign: ...

    async def settle_kept_request(self, row_id: int, *, state: RequestState, answered_by: str, at: float,
                                  reason: str | None) -> None: ...

    async def start_run(
        self,
        *,
        campaign_id: str,
        instance_id: int | None,
        machine_id: int,
        gpu_name: str,
        num_gpus: int,
        workload_digest: str,
        variant_json: str,
        started_at: float,
    ) -> records.Run: ...

    async def transitions(self, instance_id: int) -> list[records.InstanceTransition]: ...
