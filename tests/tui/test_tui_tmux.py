"""The console in a real terminal: ``scripts/tmux_console.sh`` drives it in tmux (160x48) against ``vastui sim``
and checks the screen after every step; this test runs the script as CI would and shows its log on a miss."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_tmux_script_drives_the_console_end_to_end(tmp_path: Path) -> None:
    assert shutil.which("tmux"), "tmux is needed to drive the console in a real terminal (apt-get install tmux)"
    vastui = Path(sys.executable).with_name("vastui")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VAST", "TMUX"))}
    env["VASTUI"] = str(vastui)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "tmux_console.sh")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=400)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    for step in ("a bad query names its column", "two instances rented", "both destroyed",
                 "the simulator lists 0 instances"):
        assert f"ok: {step}" in log, log
