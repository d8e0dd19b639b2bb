"""Smaller CLI promises: the console without a terminal refuses at once, an unknown ``--theme`` is refused with the
list of themes, ``campaign run --help`` documents the exit status of a choice whose SLO no measurement certified,
and progress lines never land behind a pending ``[y/N]`` prompt (a real pseudo-terminal)."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import until
from vastui.cli.campaign import SLO_NOT_MET
from vastui.cli.terminal import ask_on_terminal, held_while_asking
from vastui.tui.themes import theme_names

WAIT_S = 10.0


def _vastui(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAST")}
    env.update(HOME=str(tmp_path), VASTUI_CONFIG_DIR=str(tmp_path / "cfg"), VASTUI_DATA_DIR=str(tmp_path / "data"))
    # a guard against the hang this refuses, not a speed check
    return subprocess.run([sys.executable, "-m", "vastui", *argv], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env=env, timeout=120)


def test_the_console_without_a_terminal_refuses_at_once(tmp_path: Path) -> None:
    result = _vastui(tmp_path, "console", "--url", "http://127.0.0.1:9", "--api-key", "k" * 16)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "the console needs a terminal" in lines[0] and "campaign plan/run" in lines[0]


@pytest.mark.parametrize("argv", [["console", "--theme", "nosuch"], ["--theme", "nosuch"]])
def test_an_unknown_theme_is_refused_with_the_list_of_themes(tmp_path: Path, argv: list[str]) -> None:
    result = _vastui(tmp_path, *argv)
    assert result.returncode == 2
    assert f"unknown theme; the themes are: {', '.join(theme_names())}" in result.stderr
    assert {"dark", "light"} <= set(theme_names())


def test_campaign_run_help_documents_the_slo_not_met_status(tmp_path: Path) -> None:
    result = _vastui(tmp_path, "campaign", "run", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert f"{SLO_NOT_MET} teardown passed and a profile was chosen but no profile certified the SLO" in text


@pytest.fixture
def pty_pair() -> Iterator[tuple[int, int]]:
    master, slave = pty.openpty()
    try:
        yield master, slave
    finally:
        os.close(master)
        os.close(slave)


async def test_progress_lines_wait_for_the_pending_prompt_then_follow_it(
        pty_pair: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty_pair
    monkeypatch.setattr(sys, "stdin", os.fdopen(slave, "r", encoding="utf-8", closefd=False))
    screen = io.StringIO()   # the prompt (stderr) and the progress lines share one screen, as on a terminal
    monkeypatch.setattr(sys, "stderr", screen)
    progress = held_while_asking(lambda line: print(line, file=screen))

    progress("c0: renting")
    answer = asyncio.create_task(ask_on_terminal("rent offer 501?"))
    await until(lambda: screen.getvalue().endswith("[y/N] "), "the prompt")
    progress("c1: measuring")         # published while the question waits
    progress("c2: canary passed")
    await asyncio.sleep(0.05)
    assert screen.getvalue().endswith("rent offer 501? [y/N] "), screen.getvalue()
    os.write(master, b"y\n")
    assert await asyncio.wait_for(answer, WAIT_S) is True
    # (the typed "y" and its newline echo on the terminal itself, between the prompt and the held lines)
    assert screen.getvalue() == "c0: renting\nrent offer 501? [y/N] c1: measuring\nc2: canary passed\n"
    progress("c1: done")              # no question pending: shown at once
    assert screen.getvalue().endswith("c2: canary passed\nc1: done\n")


async def test_a_withdrawn_prompt_ends_its_line_before_the_held_progress(
        pty_pair: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    _, slave = pty_pair
    monkeypatch.setattr(sys, "stdin", os.fdopen(slave, "r", encoding="utf-8", closefd=False))
    screen = io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)
    progress = held_while_asking(lambda line: print(line, file=screen))
    answer = asyncio.create_task(ask_on_terminal("rent offer 502?"))
    await until(lambda: screen.getvalue().endswith("[y/N] "), "the prompt")
    progress("c0: offer vanished")
    answer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await answer
    assert screen.getvalue() == "rent offer 502? [y/N]  (withdrawn)\nc0: offer vanished\n"
