"""The rooms keep their boundaries (docs/architecture.md, Dependency rules): import-linter and a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and " 0 broken" in result.stdout


def test_core_import_loads_no_ui() -> None:
    code = (
        "import sys, importlib, pkgutil, vastui\n"
        "for pkg in ('vastui.vast', 'vastui.store', 'vastui.remote', 'vastui.bench', 'vastui.campaign'):\n"
        "    mod = importlib.import_module(pkg)\n"
        "    for info in pkgutil.iter_modules(mod.__path__, pkg + '.'):\n"
        "        if not info.name.endswith('.agent'):\n"
        "            importlib.import_module(info.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'textual', 'textual_plotext', 'plotext'})\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


@pytest.mark.slow
def test_package_is_typed_strictly() -> None:
    """mypy strict on vastui/ (the package ships py.typed)."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "vastui"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success" in result.stdout
