"""The rooms keep their boundaries (docs/architecture.md, Dependency rules): scripts/check, its contract types, and
a subprocess that imports the core."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from scripts.import_contracts import AcyclicContract, PurePackageContract, file_accesses

ROOT = Path(__file__).resolve().parents[1]


def _check(*parts: str) -> subprocess.CompletedProcess[str]:
    """scripts/check (the same checks a person runs), with this interpreter's tools."""
    return subprocess.run([str(ROOT / "scripts" / "check"), *parts], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHON": sys.executable})


def test_import_contracts_hold() -> None:
    result = _check("lint-imports")
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
def test_lint_and_strict_types_pass() -> None:
    """ruff, and mypy --strict on vastui/ and tests/ with the settings in pyproject.toml (the package ships py.typed)."""
    result = _check("ruff", "mypy")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success" in result.stdout


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in imports:
        for module in (importer, imported):
            parts = module.split(".")
            for depth in range(1, len(parts) + 1):  # the packages above each module exist too
                graph.add_module(".".join(parts[:depth]))
        graph.add_import(importer=importer, imported=imported, line_number=3, line_contents=f"import {imported}")
    return graph


def test_the_acyclic_contract_sees_a_package_importing_its_child_back() -> None:
    """The built-in acyclic_siblings misses this shape (vastui.cli <-> vastui.cli.console once): ours must not."""
    contract = AcyclicContract(name="no cycles", session_options={}, contract_options={"containers": ["pkg"]})
    broken = contract.check(_graph(("pkg", "pkg.console"), ("pkg.console", "pkg"), ("pkg.low", "pkg.lower")),
                            verbose=False)
    assert not broken.kept
    [cycle] = broken.metadata["cycles"]
    assert [(line.importer, line.imported) for line in cycle] == [("pkg", "pkg.console"), ("pkg.console", "pkg")]
    kept = contract.check(_graph(("pkg", "pkg.console"), ("pkg.console", "pkg.low"), ("pkg.low", "pkg.lower")),
                          verbose=False)
    assert kept.kept


def test_the_acyclic_contract_sees_a_long_cycle_across_packages() -> None:
    contract = AcyclicContract(name="no cycles", session_options={}, contract_options={"containers": ["pkg"]})
    check = contract.check(_graph(("pkg.a.x", "pkg.b.y"), ("pkg.b.y", "pkg.c"), ("pkg.c", "pkg.a.x"),
                                  ("pkg.a.x", "pkg.d")), verbose=False)
    assert not check.kept
    [cycle] = check.metadata["cycles"]
    assert {line.importer for line in cycle} == {"pkg.a.x", "pkg.b.y", "pkg.c"}


def test_bench_may_not_import_another_room() -> None:
    """Today's bench keeps the contract; one import of vastui.events (not in any deny-list) breaks it."""
    contract = PurePackageContract(name="bench is pure", session_options={}, contract_options={
        "source": "vastui.bench", "allowed_modules": ["vastui.errors"],
        "loaders": ["vastui.bench.manifest", "vastui.bench.inputs"]})
    graph = grimp.build_graph("vastui", include_external_packages=True, cache_dir=None)
    assert contract.check(graph, verbose=False).kept
    graph.add_import(importer="vastui.bench.cost", imported="vastui.events", line_number=9,
                     line_contents="import vastui.events")
    check = contract.check(graph, verbose=False)
    assert not check.kept
    assert [(line.importer, line.imported) for line in check.metadata["imports"]] == [
        ("vastui.bench.cost", "vastui.events")]


@pytest.mark.parametrize("code", [
    "open(path)",
    "from pathlib import Path\nPath(path).read_text()",
    "path.write_bytes(b'')",
    "import os\nos.remove(path)",
    "import os.path\nos.path.exists(path)",
    "from os import listdir\nlistdir(path)",
    "import shutil as sh\nsh.copy(a, b)",
    "import tempfile\ntempfile.mkdtemp()",
])
def test_file_access_is_seen(code: str) -> None:
    assert [access.line_number for access in file_accesses(code, module="m")] == [code.count("\n") + 1]


@pytest.mark.parametrize("code", [
    "import os\nos.path.join(a, b)",
    "import re\nre.match(p, s).group(1)",
    "import dataclasses\ndataclasses.replace(x)",
    "import json\njson.dumps(x)",
    "text.replace('a', 'b')",
])
def test_pure_code_is_not_file_access(code: str) -> None:
    assert file_accesses(code, module="m") == []


def test_the_loaders_are_exempt_because_they_do_read_files() -> None:
    """The exemption is not idle: the detector finds the reads in both named loaders."""
    for name in ("manifest", "inputs"):
        source = (ROOT / "vastui" / "bench" / f"{name}.py").read_text(encoding="utf-8")
        assert file_accesses(source, module=f"vastui.bench.{name}")
