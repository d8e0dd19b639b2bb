"""`vastui manifest check FILE`: the digest on success; `file:line: field — reason` and a non-zero exit on error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vastui.bench.manifest import load_manifest
from vastui.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "resnet.toml"


def test_check_prints_the_digest_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest", "check", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    first, *rest = out.splitlines()
    assert first == load_manifest(EXAMPLE).digest
    assert any("sim-resnet" in line for line in rest) and any("20000 units" in line for line in rest)


def test_check_of_a_broken_manifest_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = EXAMPLE.read_text().replace("units = 20000", "units = -5")
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    (tmp_path / "resnet-canary.jsonl").write_bytes((EXAMPLE.parent / "resnet-canary.jsonl").read_bytes())
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.startswith("units = -5"))
    assert main(["manifest", "check", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"{bad}:{line}: production.units — must be >= 1, not -5"


def test_manifest_without_action_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest"]) == 2
    assert "check" in capsys.readouterr().out


def test_check_as_a_subprocess(tmp_path: Path) -> None:
    ok = subprocess.run([sys.executable, "-m", "vastui", "manifest", "check", "examples/resnet.toml"], cwd=ROOT,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == load_manifest(EXAMPLE).digest
    bad = tmp_path / "bad.toml"
    bad.write_text('[workload]\nname = "x"\nimage = "repo:latest"\n')
    broken = subprocess.run([sys.executable, "-m", "vastui", "manifest", "check", str(bad)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert broken.returncode == 1
    assert broken.stderr.startswith(f"{bad}:3: workload.image — must be pinned by digest")
