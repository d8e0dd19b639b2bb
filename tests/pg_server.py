"""A real PostgreSQL server for the tests, from what the project installs (the ``pgserver`` package bundles the
server's binaries): started once per test session, one fresh database per test.

Run as root (a CI container), ``pgserver`` runs the server as a system user of its own, since PostgreSQL refuses
to run as root; its data directory and socket live under the session's temporary folder."""

from __future__ import annotations

import contextlib
import itertools
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

_numbers = itertools.count(1)


@dataclass(frozen=True, slots=True)
class PgServer:
    """A running server: its data directory (for the secrecy grep) and the URL of its maintenance database."""

    data_dir: Path
    admin_url: str

    def url_for(self, database: str) -> str:
        return self.admin_url.replace("/postgres?", f"/{database}?", 1)

    @contextlib.contextmanager
    def fresh_database(self) -> Iterator[str]:
        """A new, empty database for one test (dropped afterwards); yields its URL."""
        name = f"vastui_test_{os.getpid()}_{next(_numbers)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield self.url_for(name)
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def checkpoint(self) -> None:
        """Write every committed page to the data files (the secrecy grep reads them)."""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")

    def data_bytes(self) -> bytes:
        """Every byte of the server's data directory: tables, indexes and write-ahead log."""
        out = bytearray()
        for path in sorted(self.data_dir.rglob("*")):
            with contextlib.suppress(OSError):
                if path.is_file():
                    out += path.read_bytes()
        return bytes(out)


@contextlib.contextmanager
def running_server(parent: Path) -> Iterator[PgServer]:
    """Start a server in ``parent / "pgdata"``; stop it and delete its data when the block ends."""
    with warnings.catch_warnings():
        # it picks its lock file's folder when imported, and warns that XDG_RUNTIME_DIR is unset (as in CI)
        warnings.simplefilter("ignore")
        import pgserver

    data_dir = parent / "pgdata"
    server = pgserver.get_server(data_dir, cleanup_mode="delete")  # type: ignore[attr-defined]
    try:
        yield PgServer(data_dir, server.get_uri())
    finally:
        server.cleanup()
