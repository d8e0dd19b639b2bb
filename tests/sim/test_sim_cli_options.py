"""``vastui sim`` options from a careless hand: the key from a file or the environment (argv shows in ``ps``),
bad ports and time scales, chaos profiles. Each bad value is one line on stderr and a non-zero exit."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from tests.fakes import subcommand
from vastui.sim.factory import DEMO_API_KEY

KEY = "sk-sim-from-elsewhere-42"


async def start_sim(*args: str, env: dict[str, str] | None = None) -> tuple[asyncio.subprocess.Process, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vastui", "sim", "--port", "0", "--seed", "3", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(30):
        while not any("export VAST_URL=" in line for line in lines):
            line = (await proc.stdout.readline()).decode()
            assert line, f"vastui sim exited early: {lines}"
            lines.append(line.strip())
    return proc, lines


async def stop_sim(proc: asyncio.subprocess.Process) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(20):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode(), err.decode()


async def accepted_keys(lines: list[str]) -> dict[str, int]:
    url = next(line for line in lines if "serving http://" in line).split("serving ", 1)[1].strip()
    async with httpx.AsyncClient(base_url=url) as client:
        return {key: (await client.get("/api/v0/users/current", headers={"Authorization": f"Bearer {key}"}))
                .status_code for key in (KEY, DEMO_API_KEY)}


async def test_the_sim_key_can_come_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "sim_key"
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    proc, lines = await start_sim("--api-key-file", str(path))
    try:
        assert await accepted_keys(lines) == {KEY: 200, DEMO_API_KEY: 404}   # a key it does not know: 404 auth_error (§1.2)
        assert not any(KEY in line for line in lines) and any(str(path) in line for line in lines)
    finally:
        out, err = await stop_sim(proc)
    assert KEY not in out + err


async def test_the_sim_key_can_come_from_the_environment() -> None:
    proc, lines = await start_sim(env={"VASTUI_SIM_API_KEY": KEY})
    try:
        assert await accepted_keys(lines) == {KEY: 200, DEMO_API_KEY: 404}   # a key it does not know: 404 auth_error (§1.2)
        assert not any(KEY in line for line in lines) and any("VASTUI_SIM_API_KEY" in line for line in lines)
    finally:
        await stop_sim(proc)


async def test_argv_still_works_and_the_help_names_the_safer_ways() -> None:
    proc, lines = await start_sim("--api-key", KEY)
    try:
        assert (await accepted_keys(lines))[KEY] == 200
    finally:
        await stop_sim(proc)
    helped = await asyncio.create_subprocess_exec(sys.executable, "-m", "vastui", "sim", "--help",
                                                  stdout=asyncio.subprocess.PIPE)
    out, _ = await helped.communicate()
    text = out.decode()
    assert "--api-key-file" in text and "VASTUI_SIM_API_KEY" in text and "ps" in text


def test_a_bad_sim_key_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vastui.cli import main

    path = tmp_path / "two_lines"
    path.write_text(f"{KEY}\nsecond-part-xyz\n")
    assert main(["sim", "--port", "0", "--api-key-file", str(path)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "one line" in err
    assert KEY not in err and "second-part-xyz" not in err
    assert main(["sim", "--port", "0", "--api-key-file", str(tmp_path / "nope")]) == 1
    assert "no such file" in capsys.readouterr().err


async def _observed_faults(lines: list[str], n: int) -> dict[str, int]:
    url = next(line for line in lines if "serving http://" in line).split("serving ", 1)[1].strip()
    seen = {"rate_limited": 0, "server_error": 0, "connection_dropped": 0}
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(n):
            try:
                r = await client.get("/api/v0/users/current", headers={"Authorization": f"Bearer {DEMO_API_KEY}"})
            except httpx.TransportError:
                seen["connection_dropped"] += 1
                continue
            if r.status_code == 429:
                seen["rate_limited"] += 1
            elif r.status_code >= 500:
                seen["server_error"] += 1
    return {kind: count for kind, count in seen.items() if count}


def _injected(err: str) -> dict[str, int]:
    line = next(row for row in err.splitlines() if "chaos storm injected:" in row)
    pairs = [item.strip().rsplit(" ", 1) for item in line.split("injected:", 1)[1].split(",")]
    return {kind: int(count) for kind, count in pairs}


async def test_sim_chaos_is_seeded_counted_and_printed() -> None:
    runs = []
    for _ in range(2):
        proc, lines = await start_sim("--chaos", "storm")
        try:
            assert any(line.startswith("chaos storm (seed 3): 429 on 1 request in 3") for line in lines)
            observed = await _observed_faults(lines, 60)
        finally:
            _, err = await stop_sim(proc)
        assert _injected(err) == observed  # every fault the client met was counted, and nothing else
        assert set(observed) == {"rate_limited", "server_error", "connection_dropped"}
        runs.append(observed)
    assert runs[0] == runs[1]  # same seed, same faults


def test_the_chaos_choices_are_the_simulators_profiles() -> None:
    from vastui.cli import build_parser
    from vastui.sim.chaos import PROFILES, Chaos

    sim = subcommand(build_parser(["sim"]), "sim")
    action = next(a for a in sim._actions if a.dest == "chaos")
    assert tuple(action.choices or ()) == tuple(PROFILES)
    assert Chaos.from_profile("quota", seed=1).describe() == "the search quota exhausted"


def test_an_unknown_chaos_profile_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from vastui.cli import main

    with pytest.raises(SystemExit) as caught:
        main(["sim", "--chaos", "apocalypse"])
    assert caught.value.code == 2 and "--chaos" in capsys.readouterr().err
