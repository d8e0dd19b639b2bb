"""No dead code: ``scripts/unused_symbols.py`` (what in vastui/ nothing outside the tests uses) lists nothing, so every
symbol in vastui/ has a caller in the product, the benchmarks or the scripts (docs/development.md). ``scripts/check``
runs it by default."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_symbol_has_a_caller_outside_the_tests() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "unused_symbols.py")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.stderr == ""
    assert result.stdout == "", f"without a caller outside the tests:\n{result.stdout}"
    assert result.returncode == 0
