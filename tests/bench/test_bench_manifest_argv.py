"""Impossible argv, environment and paths are refused at load with `file:line: field — reason`: a NUL byte cannot
travel in a command line, an environment variable or a file name, so a manifest carrying one would fail on every
host it rented (and, before this check, blame each of them)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vastui.bench.manifest import load_manifest
from vastui.bench.toml_fields import Locator, TableReader
from vastui.errors import ManifestError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "resnet.toml"
COMMAND = '["python3", "-m", "simworkload", "--input", "resnet-canary.jsonl"]'

CASES = {
    "command": ("command", 'command = ["python3", "-m", "sim\\u0000workload"]', "workload.command",
                "item 2 contains a NUL byte"),
    "env": ("command", 'command = ["env", "A=1\\u0000B=2", "python3", "-m", "simworkload"]', "workload.command",
            "item 1 contains a NUL byte"),
    "input path": ("inputs", 'inputs = ["resnet-canary.jsonl\\u0000../secret.txt"]', "workload.inputs",
                   "item 0 contains a NUL byte"),
    "name": ("name", 'name = "sim\\u0000resnet"', "workload.name", "contains a NUL byte"),
    "image": ("image", 'image = "vastui/sim-resnet\\u0000@sha256:' + "0" * 64 + '"', "workload.image",
              "contains a NUL byte"),
}


def _manifest(tmp_path: Path, key: str, line: str) -> tuple[Path, int]:
    text, count = re.subn(rf"(?m)^{key} = .*$", line.replace("\\", "\\\\"), EXAMPLE.read_text(encoding="utf-8"))
    assert count == 1
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    shutil.copy(EXAMPLE.with_name("resnet-canary.jsonl"), tmp_path / "resnet-canary.jsonl")
    return path, next(n for n, row in enumerate(text.splitlines(), 1) if row == line)


@pytest.mark.parametrize("case", list(CASES))
def test_a_nul_byte_is_refused_with_file_line_and_field(tmp_path: Path, case: str) -> None:
    key, line, field, reason = CASES[case]
    path, number = _manifest(tmp_path, key, line)
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), number, field)
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{path}:{number}: {field} — ")


@pytest.mark.parametrize("case", ["command", "input path", "env"])
def test_manifest_check_refuses_a_nul_byte_as_a_subprocess(tmp_path: Path, case: str) -> None:
    key, line, field, reason = CASES[case]
    path, number = _manifest(tmp_path, key, line)
    checked = subprocess.run([sys.executable, "-m", "vastui", "manifest", "check", str(path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 1, checked.stdout
    assert checked.stdout == ""
    first = checked.stderr.strip().splitlines()[0]
    assert first.startswith(f"{path}:{number}: {field} — ") and reason in first, checked.stderr
    assert "Traceback" not in checked.stderr


def test_an_empty_command_is_refused(tmp_path: Path) -> None:
    path, number = _manifest(tmp_path, "command", "command = []")
    with pytest.raises(ManifestError, match=r"workload.command — must be a non-empty list") as caught:
        load_manifest(path)
    assert caught.value.line == number


@pytest.mark.parametrize("value", ["a\udc80b", "\ud800"])
def test_a_lone_surrogate_has_no_utf8_form_and_is_refused(value: str) -> None:
    # TOML itself cannot spell one (``\\ud800`` is not a scalar value), but a table handed in from elsewhere can
    reader = TableReader({"command": ["python3", value]}, name="workload",
                         locator=Locator('[workload]\ncommand = ["python3", "?"]\n', path="m.toml"), present=True)
    with pytest.raises(ManifestError, match=r"m.toml:2: workload.command — item 1 contains a character with no "
                                            r"UTF-8 form"):
        reader.texts("command", non_empty=True)
