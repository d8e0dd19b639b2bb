"""bench/ is pure: importing every bench module loads only the standard library (and vastui.errors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import importlib, json, pkgutil, sys
before = set(sys.modules)
import vastui.bench
names = [info.name for info in pkgutil.iter_modules(vastui.bench.__path__, 'vastui.bench.')]
for name in names:
    importlib.import_module(name)
print(json.dumps({"names": names, "loaded": sorted(set(sys.modules) - before)}))
"""


def test_bench_imports_only_the_standard_library() -> None:
    result = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for module in ("manifest", "stats", "cost", "attribution", "select", "tuning", "receipt"):
        assert f"vastui.bench.{module}" in report["names"]
    stdlib = sys.stdlib_module_names
    foreign = []
    for name in report["loaded"]:
        top = name.split(".")[0]
        if top == "vastui":
            if not (name in ("vastui", "vastui.bench", "vastui.errors") or name.startswith("vastui.bench.")):
                foreign.append(name)
        elif top.lstrip("_") not in stdlib and top not in stdlib:
            foreign.append(name)
    assert foreign == []
    assert "vastui.bench.manifest" in report["loaded"]  # the check saw the imports happen
