"""The schema as an ordered list of migration steps, keyed on ``PRAGMA user_version``.

Step k (1-based) takes a database from version k-1 to version k. Each step runs in one ``BEGIN IMMEDIATE``
transaction together with its ``PRAGMA user_version = k`` (the header write is transactional), so a crash mid-step
leaves the database at k-1, never half-migrated. Never edit a released step: append a new one.

History:
  v1  the initial schema: campaigns, manifests, offer snapshots, intents, instance transitions, destroy evidence,
      runs, progress, GPU samples, bad hosts (no expiry yet), audit log, receipts.
  v2  bad-host expiry (rows from v1 get NULL: never expires, still shown), the host-knowledge index on runs,
      bad-host and audit lookups by machine and by campaign.
  v3  campaign owners: the process (host, pid and its start) running an active campaign, so a resume can refuse a
      live campaign and the leak watcher can tell a dead owner from a live one.
  v4  kept approval requests: a detached campaign's requests that wait for ``vastui campaign approve`` (another
      process answers them here; the campaign's broker polls for the answers).
  v5  screenings: the profile a campaign's knob screening kept for a workload, with the batch sizes seen to fit,
      so a later campaign of that workload can race at it without screening again (campaign/screening.py).
  v6  who wrote it: the operator (config ``operator``), host and pid of the process that created each campaign,
      intent (so each instance), kept approval request and audit record, and the operator of a campaign's owner,
      so consoles sharing one store (a team's PostgreSQL) can say whose each is. Rows from before: unknown (NULL).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from vastui.errors import StoreError


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: the statements that take the database from ``version - 1`` to ``version``."""

    version: int
    description: str
    statements: tuple[str, ...]


def _append_only(table: str) -> tuple[str, ...]:
    # History tables are evidence; the database itself refuses to rewrite them.
    return (
        f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END",
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END",
    )


_V1 = (
    """CREATE TABLE manifests (
        digest TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        toml_text TEXT NOT NULL,
        stored_at REAL NOT NULL)""",
    """CREATE TABLE campaigns (
        campaign_id TEXT PRIMARY KEY,
        manifest_digest TEXT NOT NULL REFERENCES manifests(digest),
        created_at REAL NOT NULL,
        phase TEXT NOT NULL,
        phase_at REAL NOT NULL,
        budget_usd REAL,
        deadline_at REAL,
        finished_at REAL)""",
    "CREATE INDEX campaigns_active ON campaigns(finished_at)",
    """CREATE TABLE campaign_phases (
        id INTEGER PRIMARY KEY,
        campaign_id TEXT NOT NULL REFERENCES campaigns(campaign_id),
        phase TEXT NOT NULL,
        at REAL NOT NULL,
        note TEXT)""",
    "CREATE INDEX campaign_phases_by_campaign ON campaign_phases(campaign_id, id)",
    *_append_only("campaign_phases"),
    """CREATE TABLE offer_snapshots (
        id INTEGER PRIMARY KEY,
        campaign_id TEXT REFERENCES campaigns(campaign_id),
        offer_id INTEGER NOT NULL,
        machine_id INTEGER NOT NULL,
        gpu_name TEXT NOT NULL,
        num_gpus INTEGER NOT NULL,
        dph_usd REAL NOT NULL,
        taken_at REAL NOT NULL,
        snapshot_json TEXT NOT NULL)""",
    "CREATE INDEX offer_snapshots_by_campaign ON offer_snapshots(campaign_id, id)",
    """CREATE TABLE intents (
        intent_id INTEGER PRIMARY KEY,
        campaign_id TEXT NOT NULL REFERENCES campaigns(campaign_id),
        offer_id INTEGER NOT NULL,
        label TEXT NOT NULL,
        created_at REAL NOT NULL,
        status TEXT NOT NULL,
        machine_id INTEGER,
        dph_usd REAL,
        deadline_at REAL,
        instance_id INTEGER UNIQUE,
        bound_at REAL,
        error TEXT,
        resolved_at REAL)""",
    "CREATE INDEX intents_by_campaign ON intents(campaign_id, intent_id)",
    """CREATE TABLE instance_transitions (
        id INTEGER PRIMARY KEY,
        instance_id INTEGER NOT NULL,
        state TEXT NOT NULL,
        at REAL NOT NULL,
        detail TEXT)""",
    "CREATE INDEX instance_transitions_by_instance ON instance_transitions(instance_id, id)",
    *_append_only("instance_transitions"),
    """CREATE TABLE destroy_evidence (
        instance_id INTEGER PRIMARY KEY,
        missed_listing_at_json TEXT NOT NULL,
        confirmed_at REAL NOT NULL)""",
    *_append_only("destroy_evidence"),
    """CREATE TABLE runs (
        run_id INTEGER PRIMARY KEY,
        campaign_id TEXT NOT NULL REFERENCES campaigns(campaign_id),
        instance_id INTEGER,
        machine_id INTEGER NOT NULL,
        gpu_name TEXT NOT NULL,
        num_gpus INTEGER NOT NULL,
        workload_digest TEXT NOT NULL,
        variant_json TEXT NOT NULL,
        started_at REAL NOT NULL,
        status TEXT NOT NULL,
        pull_s REAL,
        ready_s REAL,
        warmup_s REAL,
        throughput_units_per_s REAL,
        stats_json TEXT,
        finished_at REAL,
        error TEXT)""",
    "CREATE INDEX runs_by_campaign ON runs(campaign_id, run_id)",
    """CREATE TABLE progress (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(run_id),
        at REAL NOT NULL,
        units_done REAL NOT NULL,
        units_accepted REAL NOT NULL,
        data_wait_s REAL,
        compute_s REAL,
        latencies_json TEXT NOT NULL)""",
    "CREATE INDEX progress_by_run ON progress(run_id, id)",
    """CREATE TABLE gpu_samples (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(run_id),
        at REAL NOT NULL,
        gpu_index INTEGER NOT NULL,
        util_pct REAL,
        mem_used_mib REAL,
        mem_total_mib REAL,
        power_w REAL,
        pcie_rx_kib_s REAL,
        pcie_tx_kib_s REAL,
        sm_clock_mhz REAL,
        mem_clock_mhz REAL,
        throttle_reasons INTEGER)""",
    "CREATE INDEX gpu_samples_by_run ON gpu_samples(run_id, id)",
    """CREATE TABLE bad_hosts (
        id INTEGER PRIMARY KEY,
        machine_id INTEGER NOT NULL,
        reason TEXT NOT NULL,
        evidence_json TEXT NOT NULL,
        recorded_at REAL NOT NULL,
        campaign_id TEXT)""",
    *_append_only("bad_hosts"),
    """CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        approval_id TEXT,
        granted_by TEXT,
        outcome TEXT NOT NULL,
        campaign_id TEXT)""",
    *_append_only("audit_log"),
    """CREATE TABLE receipts (
        id INTEGER PRIMARY KEY,
        campaign_id TEXT NOT NULL REFERENCES campaigns(campaign_id),
        created_at REAL NOT NULL,
        json_text TEXT NOT NULL,
        markdown_text TEXT NOT NULL)""",
    "CREATE INDEX receipts_by_campaign ON receipts(campaign_id, id)",
)

_V2 = (
    "ALTER TABLE bad_hosts ADD COLUMN expires_at REAL",
    "CREATE INDEX runs_by_host ON runs(workload_digest, machine_id, gpu_name, num_gpus, throughput_units_per_s)",
    "CREATE INDEX bad_hosts_by_machine ON bad_hosts(machine_id, expires_at)",
    "CREATE INDEX audit_by_campaign ON audit_log(campaign_id, id)",
)

_V3 = (
    """CREATE TABLE campaign_owners (
        campaign_id TEXT PRIMARY KEY REFERENCES campaigns(campaign_id),
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        pid_started TEXT NOT NULL,
        claimed_at REAL NOT NULL)""",
)

_V4 = (
    """CREATE TABLE kept_requests (
        id INTEGER PRIMARY KEY,
        campaign_id TEXT NOT NULL REFERENCES campaigns(campaign_id),
        request_id TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        summary TEXT NOT NULL,
        cost_cap_usd REAL,
        gpu_name TEXT,
        num_gpus INTEGER,
        dph_usd REAL,
        deadline_at REAL,
        asked_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'granted', 'refused', 'expired', 'cancelled')),
        answered_by TEXT,
        answered_at REAL,
        reason TEXT)""",
    # a request id names one pending request of its campaign (a resumed broker numbers from r1 again)
    "CREATE UNIQUE INDEX kept_requests_pending ON kept_requests(campaign_id, request_id) WHERE state = 'pending'",
    "CREATE INDEX kept_requests_by_campaign ON kept_requests(campaign_id, id)",
)

_V5 = (
    """CREATE TABLE screenings (
        id INTEGER PRIMARY KEY,
        campaign_id TEXT NOT NULL REFERENCES campaigns(campaign_id),
        workload_digest TEXT NOT NULL,
        screened_at REAL NOT NULL,
        json_text TEXT NOT NULL)""",
    "CREATE INDEX screenings_by_workload ON screenings(workload_digest, screened_at)",
    *_append_only("screenings"),
)

def _written_by(table: str) -> tuple[str, ...]:
    return (f"ALTER TABLE {table} ADD COLUMN operator TEXT", f"ALTER TABLE {table} ADD COLUMN host TEXT",
            f"ALTER TABLE {table} ADD COLUMN pid INTEGER")


_V6 = (
    *_written_by("campaigns"),
    *_written_by("intents"),
    *_written_by("kept_requests"),
    *_written_by("audit_log"),
    "ALTER TABLE campaign_owners ADD COLUMN operator TEXT",
)

_V7 = (
    """CREATE TABLE watch_rounds (
        id INTEGER PRIMARY KEY,
        checked_at REAL NOT NULL,
        verdict TEXT NOT NULL,
        listed_count INTEGER NOT NULL,
        leaked_count INTEGER NOT NULL,
        unowned_count INTEGER NOT NULL,
        burn_usd_per_h REAL,
        credit_usd REAL,
        error TEXT,
        operator TEXT,
        host TEXT,
        pid INTEGER)""",
    "CREATE INDEX watch_rounds_by_time ON watch_rounds(checked_at)",
    *_append_only("watch_rounds"),
    """CREATE TABLE watch_alerts (
        id INTEGER PRIMARY KEY,
        alert_key TEXT NOT NULL,
        kind TEXT NOT NULL,
        instance_id INTEGER,
        text TEXT NOT NULL,
        raised_at REAL NOT NULL,
        delivered_at REAL,
        claimed_until REAL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        operator TEXT,
        host TEXT,
        pid INTEGER)""",
    "CREATE INDEX watch_alerts_by_key ON watch_alerts(alert_key, raised_at)",
    "CREATE INDEX watch_alerts_undelivered ON watch_alerts(id) WHERE delivered_at IS NULL",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _V1),
    Migration(2, "bad-host expiry; host-knowledge, bad-host and audit indexes", _V2),
    Migration(3, "campaign owners: which process runs an active campaign", _V3),
    Migration(4, "kept approval requests: a detached campaign's requests answered by another process", _V4),
    Migration(5, "screenings: the profile a campaign's knob screening kept, for later campaigns of the workload", _V5),
    Migration(6, "who wrote it: operator, host and pid on campaigns, intents, kept requests and the audit log", _V6),
    Migration(7, "the leak watch: what each round saw, and its alerts with their delivery", _V7),
)
SCHEMA_VERSION = len(MIGRATIONS)


async def schema_version(conn: aiosqlite.Connection) -> int:
    """The database's ``PRAGMA user_version`` (0 for a new file)."""
    rows = list(await conn.execute_fetchall("PRAGMA user_version"))
    return int(rows[0][0])


async def check_is_vastui(conn: aiosqlite.Connection, db_path: Path) -> None:
    """Refuse another program's SQLite file before anything is written to it (WAL mode, our tables).

    A file with tables is vastui's only when it has a schema version and the first step's tables (a file with no
    tables holds nothing to protect). Raises StoreError naming the file and what it holds.
    """
    rows = await conn.execute_fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    tables = [str(row[0]) for row in rows]
    version = await schema_version(conn)
    ours = {"manifests", "campaigns"}
    if tables and (version == 0 or not ours <= set(tables)):
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise StoreError(
            f"{db_path} is not a vastui database (schema version {version}, tables: {shown or 'none'}); "
            "vastui adds nothing to another program's file: pass another --db",
            title="Not a vastui database",
        )


async def migrate(
    conn: aiosqlite.Connection,
    *,
    target: int | None = None,
    steps: Sequence[Migration] = MIGRATIONS,
) -> int:
    """Bring the database up to ``target`` (default: the last step), one transaction per step; return the version.

    Raises StoreError for a database newer than this code, or when a step fails (that step is rolled back).
    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    goal = len(steps) if target is None else target
    current = await schema_version(conn)
    if current > len(steps):
        raise StoreError(
            f"the database is at schema version {current}, newer than this vastui knows ({len(steps)}); "
            "upgrade vastui or use another database file",
            title="Database too new",
        )
    for step in steps[current:goal]:
        await _apply(conn, step)
    return max(current, goal)


async def _apply(conn: aiosqlite.Connection, step: Migration) -> None:
    try:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in step.statements:
                await conn.execute(statement)
            await conn.execute(f"PRAGMA user_version = {int(step.version)}")
            await conn.execute("COMMIT")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise StoreError(
            f"could not migrate the database to schema version {step.version} ({step.description}): {exc}",
            title="Database migration failed",
        ) from exc
