"""``vastui offers`` and ``vastui instances`` against the simulator on loopback, and the official ``vastai`` CLI
as the referee: the same query must give the same offers in the same order."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes import FakeClock
from vastui.cli import main
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.sim.server import SimServer

KEY = "cli-sim-key-42424242"
QUERY = "gpu_name=RTX_4090 num_gpus>=2 reliability>0.98"
VASTAI = Path(sys.executable).parent / "vastai"


@pytest.fixture
def market() -> Market:
    return build_market(7, clock=FakeClock(), api_key=KEY)


@pytest.fixture
async def server(market: Market) -> AsyncIterator[SimServer]:
    async with SimServer(market, poll=False) as running:
        yield running


async def run(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def clean_env(tmp_path: Path, url: str) -> dict[str, str]:
    home = tmp_path / "throwaway-home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VAST", "VASTUI_"))}
    env.update(HOME=str(home), VAST_URL=url, VASTAI_NO_UPDATE_CHECK="1", VASTUI_CONFIG_DIR=str(home / "cfg"),
               VASTUI_DATA_DIR=str(home / "data"))
    return env


async def test_offers_json_matches_the_official_cli(server: SimServer, tmp_path: Path) -> None:
    env = clean_env(tmp_path, server.url)
    ours, official = await asyncio.gather(
        run(sys.executable, "-m", "vastui", "offers", QUERY, "-o", "dlperf_usd-", "--json",
            "--url", server.url, "--api-key", KEY, env=env),
        run(str(VASTAI), "--url", server.url, "--api-key", KEY, "--raw", "search", "offers", QUERY,
            "-o", "dlperf_usd-", env=env),
    )
    assert ours[0] == 0, ours[2]
    assert official[0] == 0, official[2]
    our_rows = json.loads(ours[1])
    their_rows = json.loads(official[1])
    assert our_rows, "the seeded world has matching offers"
    assert [row["id"] for row in our_rows] == [row["id"] for row in their_rows]
    for row in our_rows:
        assert row["gpu_name"] == "RTX 4090" and row["num_gpus"] >= 2 and row["reliability"] > 0.98
    ranks = [row["dlperf_per_dphtotal"] for row in our_rows]
    assert ranks == sorted(ranks, reverse=True)


async def test_offers_table_and_instances(server: SimServer, market: Market,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = await asyncio.to_thread(main, ["offers", QUERY, "-o", "dlperf_usd-", "--limit", "3", "--url",
                                          server.url, "--api-key", KEY])
    out = capsys.readouterr().out
    assert code == 0
    assert "3 offers" in out and "RTX 4090" in out and "dlperf/$" in out
    code = await asyncio.to_thread(main, ["instances", "--json", "--url", server.url, "--api-key", KEY])
    listing = json.loads(capsys.readouterr().out)
    assert code == 0 and listing == {"instances": [], "is_complete": True, "error": None, "unreadable": []}


async def test_an_incomplete_listing_exits_non_zero(server: SimServer, market: Market,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    market.chaos.error_5xx_rate = 1.0
    code = await asyncio.to_thread(main, ["instances", "--url", server.url, "--api-key", KEY])
    assert code == 3
    captured = capsys.readouterr()
    assert "INCOMPLETE" in captured.err
    # the table never passes an empty partial listing off as "0 instances"
    assert "listing INCOMPLETE" in captured.out and "0 instances\n" not in captured.out


def test_a_bad_query_shows_a_caret_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["offers", "gpu_name=RTX", "4090", "--url", "http://127.0.0.1:9", "--api-key", KEY])
    err = capsys.readouterr().err
    assert code != 0
    lines = err.splitlines()
    assert "column 14" in lines[0]
    assert lines[1].strip() == "gpu_name=RTX 4090"
    assert lines[2].index("^") == lines[1].index("4")


def test_no_api_key_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["offers", "num_gpus=1", "--url", "http://127.0.0.1:9"])
    assert code != 0
    assert "API key" in capsys.readouterr().err


async def test_a_rejected_key_fails_with_the_servers_message(server: SimServer,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = await asyncio.to_thread(main, ["offers", "--url", server.url, "--api-key", "not-the-key-1234"])
    err = capsys.readouterr().err
    assert code != 0 and "Invalid user key" in err and "not-the-key-1234" not in err


async def test_a_rejected_key_never_shows_the_urls_password(server: SimServer, tmp_path: Path) -> None:
    # the refusal names the URL it was sent to; a user:pass in that URL is a secret as much as the key
    url = server.url.replace("http://", "http://operator:url-pass-31337@")
    code, out, err = await run(sys.executable, "-m", "vastui", "offers", "--url", url, "--api-key",
                               "not-the-key-1234", env=clean_env(tmp_path, server.url))
    assert code == 1 and "Invalid user key" in err and "<redacted>@127.0.0.1" in err, err
    assert "url-pass-31337" not in out + err and "not-the-key-1234" not in out + err


async def test_an_odd_row_is_named_on_stderr_and_the_others_are_shown(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    good = {"id": 7, "actual_status": "running", "label": "kept", "gpu_name": "RTX 4090", "num_gpus": 1}
    odd = {**good, "id": 9, "label": "odd", "dph_total": "cheap"}

    async def listing(request: object) -> JSONResponse:
        return JSONResponse({"instances": [good, odd], "next_token": None})

    app = Starlette(routes=[Route("/api/v1/instances/", listing)])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(30):   # a guard against a hang: the condition is the server's own flag
            while not server.started:
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        code = await asyncio.to_thread(main, ["instances", "--url", f"http://127.0.0.1:{port}", "--api-key", KEY])
    finally:
        server.should_exit = True
        await serving
    captured = capsys.readouterr()
    assert code == 3
    assert "instance 9: unreadable row" in captured.err and "'dph_total'" in captured.err
    assert "kept" in captured.out and "1 instances" in captured.out
