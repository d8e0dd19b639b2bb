"""The store: everything vastui keeps, in one SQLite file (the only place with SQL; owns aiosqlite)."""

from __future__ import annotations

from vastui.approval import RequestState
from vastui.store.migrations import SCHEMA_VERSION
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
)
from vastui.store.sqlite_store import SqliteStore

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
    "SqliteStore",
    "StoredScreening",
]
