"""No new dead code: ``scripts/unused_symbols.py`` (what in vastui/ nothing outside the tests uses) lists nothing but
the accessors still waiting for a caller or their removal. When this set is empty, ``scripts/check`` runs the tool
by default (docs/development.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Test-only accessors of the SSH runner (its port is being reworked) and of the console's tables.
STILL_LISTED = {
    "vastui/campaign/ports.py HostExecutor.wait_ready",
    "vastui/remote/protocol.py GpuSample.is_throttled",
    "vastui/remote/protocol.py Result.is_success",
    "vastui/remote/runner.py SshRunner.wait_ready",
    "vastui/remote/runner.py SshRunner.connect_within",
    "vastui/remote/runner.py SshRunner.put_file",
    "vastui/tui/widgets/keyed_table.py KeyedTable.cells_of",
}
_LINE = re.compile(r"^(?P<path>\S+):\d+: unused [a-z ]+ (?P<name>\S+)$")


def test_nothing_new_is_left_without_a_caller() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "unused_symbols.py")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.stderr == ""
    listed = set()
    for line in result.stdout.splitlines():
        match = _LINE.match(line)
        assert match is not None, f"an unexpected line: {line!r}"
        listed.add(f"{match['path']} {match['name']}")
    assert result.returncode == (1 if listed else 0)
    assert listed <= STILL_LISTED, f"without a caller outside the tests: {sorted(listed - STILL_LISTED)}"
