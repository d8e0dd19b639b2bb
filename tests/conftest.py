"""Test-wide fixtures: no test sees the operator's environment, config or data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


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
