"""The store: everything vastui keeps, in one SQLite file or on a team's PostgreSQL server (the only place with SQL;
owns aiosqlite and psycopg)."""

from __future__ import annotations

from vastui.approval import RequestState
from vastui.store.migrations import SCHEMA_VERSION
from vastui.store.opening import open_store
from vastui.store.postgres_store import PostgresStore, is_postgres_url
from vastui.store.records import (
    BadHost,
    Campaign,
    CampaignPhaseChange,
    DestroyEvidence,
    GpuSample,
    HostKnowledge,
    InstanceState,
    InstanceTransition,
    Intent,
    IntentStatus,
    KeptRequest,
    Manifest,
    OfferSnapshot,
    OwnedInstance,
    ProgressRecord,
    Receipt,
    Run,
    RunStatus,
    StoredScreening,
    WatchAlert,
    WatchRound,
)
from vastui.store.sqlite_store import SqliteStore
from vastui.store.store import Store

__all__ = [
    "SCHEMA_VERSION",
    "BadHost",
    "Campaign",
    "CampaignPhaseChange",
    "DestroyEvidence",
    "GpuSample",
    "HostKnowledge",
    "InstanceState",
    "InstanceTransition",
    "Intent",
    "IntentStatus",
    "KeptRequest",
    "RequestState",
    "Manifest",
    "OfferSnapshot",
    "OwnedInstance",
    "ProgressRecord",
    "Receipt",
    "Run",
    "RunStatus",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "StoredScreening",
    "WatchAlert",
    "WatchRound",
    "is_postgres_url",
    "open_store",
]
