"""Copying one store into another (``vastui migrate``): an operator's SQLite file into the team's PostgreSQL store.

Everything is copied in one write transaction on the target: a copy that fails part-way leaves the target as it
was. What people name keeps its value: campaign ids, manifest digests, instance, offer and machine ids, request
ids, and who wrote each row (operator, host and pid, where the source recorded them). Row ids are kept too where
the target has none in their range (a new team store: the copy is exact); where another operator's rows already
hold them, the copied rows get the target's next ids and the rows that point at them (a run's progress and GPU
samples) follow. A store whose campaigns are already in the target is refused whole: copied before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vastui.errors import StoreError
from vastui.store.base import Transaction
from vastui.store.store import Store

# Every table, in an order that writes what a row refers to before the row: (table, its generated row id or None
# where the key is a natural one). tests/store/test_store_copy.py checks it names every table of the schema.
COPIED_TABLES: tuple[tuple[str, str | None], ...] = (
    ("manifests", None),
    ("campaigns", None),
    ("campaign_phases", "id"),
    ("campaign_owners", None),
    ("offer_snapshots", "id"),
    ("intents", "intent_id"),
    ("instance_transitions", "id"),
    ("destroy_evidence", None),
    ("runs", "run_id"),
    ("progress", "id"),
    ("gpu_samples", "id"),
    ("bad_hosts", "id"),
    ("audit_log", "id"),
    ("receipts", "id"),
    ("kept_requests", "id"),
    ("screenings", "id"),
    ("watch_rounds", "id"),
    ("watch_alerts", "id"),
)
# the natural key of each table without a generated one (rows are read in its order)
_NATURAL_KEYS = {"manifests": "digest", "campaigns": "campaign_id", "campaign_owners": "campaign_id",
                 "destroy_evidence": "instance_id"}
# natural keys a target may already hold with the same meaning: those rows are left as the target has them
_SHARED_KEYS = {"manifests": "digest", "destroy_evidence": "instance_id"}
_RUN_REFERENCES = ("progress", "gpu_samples")


@dataclass(slots=True)
class CopyReport:
    """Rows copied per table; the tables whose row ids were taken in the target (their rows renumbered); rows
    the target already had (a manifest by its digest, an instance's proof of destruction)."""

    copied: dict[str, int] = field(default_factory=dict)
    renumbered: list[str] = field(default_factory=list)
    already_there: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.copied.values())


async def copy_store(source: Store, target: Store, *,
                     on_table: Callable[[str, int], None] | None = None) -> CopyReport:
    """Copy every row of ``source`` into ``target`` (both at the current schema) in one transaction; StoreError
    when the target already holds one of the source's campaigns (nothing is copied then)."""
    report = CopyReport()
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for table, key in COPIED_TABLES:
        read = await source._read(f"read {table}", f"SELECT * FROM {table} ORDER BY {key or _NATURAL_KEYS[table]}")
        rows_of[table] = [{name: row[name] for name in row.keys()} for row in read]
    campaign_ids = [row["campaign_id"] for row in rows_of["campaigns"]]
    async with target._write(f"copy {source.location} into this store") as tx:
        known = await _present(tx, "campaigns", "campaign_id", campaign_ids)
        if known:
            shown = ", ".join(sorted(known)[:3]) + (f" and {len(known) - 3} more" if len(known) > 3 else "")
            raise StoreError(f"{target.location} already holds campaign(s) {shown} of {source.location}: it was "
                             "copied before (nothing copied now)", title="Already copied")
        new_run_ids: dict[int, int] = {}
        for table, key in COPIED_TABLES:
            rows = rows_of[table]
            if table in _RUN_REFERENCES and new_run_ids:
                rows = [{**row, "run_id": new_run_ids[row["run_id"]]} for row in rows]
            if table in _SHARED_KEYS:
                name = _SHARED_KEYS[table]
                there = await _present(tx, table, name, [row[name] for row in rows])
                if there:
                    report.already_there[table] = len(there)
                rows = [row for row in rows if row[name] not in there]
            if key is None or not rows or not await _ids_taken(tx, table, key, rows):
                await _insert(tx, table, rows)
                if key is not None and rows:
                    await tx.ids_follow(table, key)
            else:
                report.renumbered.append(table)
                for row in rows:
                    values = {name: value for name, value in row.items() if name != key}
                    new_id = await tx.insert(f"INSERT INTO {table} ({', '.join(values)}) "
                                             f"VALUES ({', '.join('?' * len(values))})", tuple(values.values()), key=key)
                    if table == "runs":
                        new_run_ids[row[key]] = new_id
            report.copied[table] = len(rows)
            if on_table is not None:
                on_table(table, len(rows))
    return report


async def _present(tx: Transaction, table: str, column: str, values: Sequence[Any]) -> set[Any]:
    """The ``values`` that ``table.column`` already holds in the target."""
    found: set[Any] = set()
    for start in range(0, len(values), 500):
        chunk = values[start:start + 500]
        if chunk:
            rows = await tx.fetchall(f"SELECT {column} FROM {table} WHERE {column} IN "
                                     f"({', '.join('?' * len(chunk))})", tuple(chunk))
            found.update(row[0] for row in rows)
    return found


async def _ids_taken(tx: Transaction, table: str, key: str, rows: Sequence[dict[str, Any]]) -> bool:
    ids = [row[key] for row in rows]
    taken = await tx.fetchone(f"SELECT COUNT(*) FROM {table} WHERE {key} BETWEEN ? AND ?", (min(ids), max(ids)))
    return taken is not None and int(taken[0]) > 0


async def _insert(tx: Transaction, table: str, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    await tx.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                         [tuple(row[name] for name in columns) for row in rows])
