"""Test-wide fixtures: no test sees the operator's environment, config or data."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.pg_server import PgServer, running_server

# Property and fuzz tests: CI runs a fixed seed and a fixed budget (the same examples on every run, so a failure
# reproduces); HYPOTHESIS_PROFILE=long is the documented longer hunt (random seeds, 50x the examples); see
# docs/testing.md. Tests that pin max_examples themselves keep their number under every profile.
_COMMON: dict[str, Any] = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
           "print_blob": True}
settings.register_profile("ci", derandomize=True, database=None, max_examples=100, **_COMMON)
settings.register_profile("long", max_examples=5000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("VAST", "VASTUI_")):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("VASTUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("VASTUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("VASTAI_NO_UPDATE_CHECK", "1")


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    """One real PostgreSQL server for the whole session (tests/pg_server.py); each test asks it for a database."""
    with running_server(tmp_path_factory.mktemp("postgres")) as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh, empty database on the session's server, dropped after the test."""
    with pg_server.fresh_database() as url:
        yield url
