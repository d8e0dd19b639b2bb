"""No rent without a registered SSH key. A rented host accepts only the account's keys, so a campaign whose key is
not registered would pay for every candidate and measure nothing ("refused our SSH key" after each readiness
wait). ``campaign run`` checks first: without a terminal it refuses in one line naming the key file and the command
that fixes it, before anything is rented; ``vastui ssh-key add`` registers the key behind an approval."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import httpx
import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.fakes import FakeClock, FakeVastApi
from vastui.approval import Action, Approval, ApprovalRequest
from vastui.campaign.approvers import PromptApprover
from vastui.cli import main
from vastui.cli.sshkey import local_keys, register_key, require_registered_key
from vastui.config import Secret
from vastui.errors import ApiError, ConfigError
from vastui.remote.local_keys import read_public_key_file, runner_public_keys
from vastui.sim.demo import demo_world, operator_key
from vastui.sim.factory import build_market
from vastui.sim.market import Market
from vastui.sim.server import SimServer
from vastui.vast.client import HttpVastClient

API_KEY = "sshkey-test-api-key-7f3a"
TIME_SCALE = "300"
VASTUI = [sys.executable, "-m", "vastui"]
WAIT_S = 240.0   # a guard against a hang on a busy machine, not a speed check


def _rents(market: Market) -> list[str]:
    return [r.path for r in market.request_log if r.method == "PUT" and r.path.startswith("/api/v0/asks/")]


def _key_posts(market: Market) -> list[str]:
    return [r.path for r in market.request_log if r.method == "POST" and r.path == "/api/v0/ssh/"]


async def _vastui(*args: str) -> tuple[int, str, str]:
    """Run vastui as an operator's script would: no terminal (stdin is /dev/null), the API key in the environment."""
    env = {**os.environ, "VAST_API_KEY": API_KEY}
    proc = await asyncio.create_subprocess_exec(*VASTUI, *args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, env=env)
    async with asyncio.timeout(WAIT_S):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _run_until_rented(argv: list[str]) -> tuple[list[str], str]:
    """Start a campaign run, wait for its first rent, then stop it as Ctrl-C would (it tears down what it rented)."""
    env = {**os.environ, "VAST_API_KEY": API_KEY}
    proc = await asyncio.create_subprocess_exec(*VASTUI, *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(WAIT_S):
            while not any("rented offer" in line for line in lines):
                line = (await proc.stdout.readline()).decode()
                if not line:
                    break
                lines.append(line)
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)
            await proc.stdout.read()
            err = (await proc.stderr.read()).decode()
            await proc.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    return lines, err


@pytest.mark.slow
async def test_a_headless_run_refuses_before_renting_until_ssh_key_add_registers_the_key(tmp_path: Path) -> None:
    manifest = fast_manifest(tmp_path / "m", max_candidates=2)
    key = operator_key(tmp_path)
    pub = Path(f"{key}.pub")
    async with demo_world(seed=7, time_scale=float(TIME_SCALE), work_dir=tmp_path / "world",
                          api_key=API_KEY) as (server, _clock):
        market = server.market
        run = ["campaign", "run", str(manifest), "--approve-plan", "--headless", "--url", server.url,
               "--db", str(tmp_path / "campaign.sqlite3"), "--ssh-key", str(key), "--time-scale", TIME_SCALE]

        status, out, err = await _vastui(*run)
        assert status == 1 and len(err.strip().splitlines()) == 1, err
        assert str(pub) in err and f"vastui ssh-key add {pub} --url {server.url}" in err
        assert "rented offer" not in out
        await market.refresh()
        assert market.instance_ids() == [] and _rents(market) == [] and _key_posts(market) == []

        status, _, err = await _vastui("ssh-key", "add", str(pub), "--url", server.url)   # no terminal, no --yes
        assert status == 1 and "--yes" in err and _key_posts(market) == [] and not market.account.ssh_keys

        status, out, _ = await _vastui("ssh-key", "add", str(pub), "--yes", "--url", server.url)
        fingerprint = read_public_key_file(pub).fingerprint
        assert status == 0 and fingerprint in out and len(_key_posts(market)) == 1
        assert [k.public_key for k in market.account.ssh_keys.values()] == [pub.read_text().strip()]
        status, out, _ = await _vastui("ssh-key", "list", "--json", "--url", server.url)
        assert status == 0 and [k["public_key"] for k in json.loads(out)] == [pub.read_text().strip()]

        lines, err = await _run_until_rented(run)
        assert "SSH key not registered" not in err
        assert any("rented offer" in line for line in lines), "".join(lines) + err
        assert _rents(market), "the run went on to rent once the key was registered"
        await market.refresh()
        assert market.instance_ids() == [], "stopped like Ctrl-C, the run destroyed what it rented"


@pytest.fixture
async def market_url() -> AsyncIterator[tuple[Market, str]]:
    market = build_market(5, clock=FakeClock(), api_key=API_KEY, n_machines=5)
    async with SimServer(market) as server:
        yield market, server.url


class ScriptedOperator:
    """Answers each approval with a fixed yes or no, remembering what it was asked and what the simulator had been
    sent by then."""

    def __init__(self, market: Market, *, approve: bool) -> None:
        self.market = market
        self.approve = approve
        self.asked: list[tuple[ApprovalRequest, int]] = []

    async def request(self, request: ApprovalRequest) -> Approval | None:
        self.asked.append((request, len(_key_posts(self.market))))
        return Approval(request, granted_by="test operator", granted_at=0.0) if self.approve else None


async def test_the_key_is_registered_only_after_approval_and_only_once(market_url: tuple[Market, str],
                                                                       tmp_path: Path) -> None:
    market, url = market_url
    key = operator_key(tmp_path)
    operator = ScriptedOperator(market, approve=True)
    async with HttpVastClient(base_url=url, api_key=Secret(API_KEY), clock=FakeClock()) as client:
        await require_registered_key(client, key_path=key, approver=operator, url=url)
        await require_registered_key(client, key_path=key, approver=operator, url=url)   # registered: no question
    ((request, posts_when_asked),) = operator.asked
    assert request.action is Action.CREATE_SSH_KEY and posts_when_asked == 0
    assert read_public_key_file(Path(f"{key}.pub")).fingerprint in request.summary
    assert len(_key_posts(market)) == 1
    assert [k.public_key for k in market.account.ssh_keys.values()] == [Path(f"{key}.pub").read_text().strip()]


async def test_a_declined_registration_sends_nothing_and_refuses_the_run(market_url: tuple[Market, str],
                                                                        tmp_path: Path) -> None:
    market, url = market_url
    key = operator_key(tmp_path)
    questions: list[str] = []

    async def say_no(text: str) -> bool:
        questions.append(text)
        return False

    async with HttpVastClient(base_url=url, api_key=Secret(API_KEY), clock=FakeClock()) as client:
        with pytest.raises(ConfigError, match="declined; nothing was rented"):
            await require_registered_key(client, key_path=key, approver=PromptApprover(say_no, clock=FakeClock()),
                                         url=url)
    (question,) = questions
    assert read_public_key_file(Path(f"{key}.pub")).fingerprint in question and str(key) in question
    assert _key_posts(market) == [] and not market.account.ssh_keys


async def test_a_key_registered_with_another_comment_counts(market_url: tuple[Market, str], tmp_path: Path) -> None:
    market, url = market_url
    key = operator_key(tmp_path)
    kind, data = Path(f"{key}.pub").read_text().split()[:2]
    market.account.add_key(f"{kind} {data} registered-from-the-web-console", at=0.0)
    operator = ScriptedOperator(market, approve=False)
    async with HttpVastClient(base_url=url, api_key=Secret(API_KEY), clock=FakeClock()) as client:
        await require_registered_key(client, key_path=key, approver=operator, url=url)
    assert operator.asked == [] and _key_posts(market) == []


async def test_a_team_api_key_is_told_why_its_key_cannot_be_registered(tmp_path: Path) -> None:
    key = read_public_key_file(Path(f"{operator_key(tmp_path)}.pub"))
    api = FakeVastApi(httpx.Response(400, json={"success": False, "error": "team_ssh_keys_not_supported",
                                                "msg": "Team SSH keys are not supported."}))
    operator = ScriptedOperator(build_market(5, clock=FakeClock(), api_key=API_KEY, n_machines=5), approve=True)
    async with HttpVastClient(base_url="http://vast.test", api_key=Secret(API_KEY), clock=FakeClock(),
                              transport=api.transport(), max_attempts=1) as client:
        with pytest.raises(ApiError, match="belongs to a team") as caught:
            await register_key(client, key, approver=operator)
    assert caught.value.title == "Team SSH keys not supported" and len(operator.asked) == 1


def test_ssh_key_add_refuses_a_private_key_file_without_printing_it(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    key = operator_key(tmp_path)
    secret_body = "".join(key.read_text().splitlines()[1:-1])
    status = main(["ssh-key", "add", str(key), "--yes", "--url", "http://127.0.0.1:9", "--api-key", API_KEY])
    captured = capsys.readouterr()
    assert status == 1 and "private key" in captured.err and f"{key}.pub" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    for chunk in (secret_body[i:i + 16] for i in range(0, len(secret_body) - 16, 16)):
        assert chunk not in captured.err and chunk not in captured.out


async def test_the_runner_s_keys_without_a_key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    home = tmp_path / "home"
    assert await runner_public_keys(key_path=None, home=home) == []
    with pytest.raises(ConfigError, match="ssh-keygen -t ed25519"):
        await local_keys(key_path=None)
    rsa = asyncssh.generate_private_key("ssh-rsa", comment="me@box")
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    rsa.write_private_key(str(home / ".ssh" / "id_rsa"))
    rsa.write_public_key(str(home / ".ssh" / "id_rsa.pub"))
    (found,) = await runner_public_keys(key_path=None, home=home)
    assert found.path == home / ".ssh" / "id_rsa.pub" and found.comment == "me@box"


async def test_the_agent_s_keys_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = subprocess.run(["ssh-agent", "-a", str(tmp_path / "agent.sock"), "-s"], capture_output=True, text=True,
                           check=True)
    pid = int(agent.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
        key = operator_key(tmp_path)
        key.chmod(0o600)   # ssh-add refuses a private key others may read
        subprocess.run(["ssh-add", str(key)], capture_output=True, check=True, env={**os.environ})
        (found,) = await runner_public_keys(key_path=None, home=tmp_path / "empty-home")
        assert found.source == "ssh-agent" and found.path is None
        assert found.fingerprint == read_public_key_file(Path(f"{key}.pub")).fingerprint
    finally:
        os.kill(pid, signal.SIGTERM)


async def _answer_at_a_terminal(argv: list[str], first_answer: bytes) -> tuple[int, str]:
    """Run vastui with a pseudo-terminal as stdin and stderr (where it asks); answer its first question with
    ``first_answer`` and every later one with no. Returns the exit status and everything the terminal showed."""
    master, slave = pty.openpty()
    env = {**os.environ, "VAST_API_KEY": API_KEY}
    try:
        proc = await asyncio.create_subprocess_exec(*VASTUI, *argv, stdin=slave, stdout=subprocess.PIPE,
                                                    stderr=slave, env=env)
        os.set_blocking(master, False)
        screen, answered = "", 0
        async with asyncio.timeout(WAIT_S):
            while proc.returncode is None:
                with contextlib.suppress(BlockingIOError, OSError):
                    screen += os.read(master, 65536).decode(errors="replace")
                if screen.count("[y/N]") > answered:
                    os.write(master, first_answer if answered == 0 else b"n\n")
                    answered += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 0.05)
        with contextlib.suppress(BlockingIOError, OSError):
            screen += os.read(master, 65536).decode(errors="replace")
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode is not None
    return proc.returncode, screen


@pytest.mark.slow
@pytest.mark.parametrize("answer", [b"y\n", b"n\n"])
async def test_at_a_terminal_the_run_offers_to_register_the_key_and_sends_it_only_on_yes(
        tmp_path: Path, answer: bytes) -> None:
    manifest = fast_manifest(tmp_path / "m", max_candidates=2)
    key = operator_key(tmp_path)
    async with demo_world(seed=7, time_scale=float(TIME_SCALE), work_dir=tmp_path / "world",
                          api_key=API_KEY) as (server, _clock):
        market = server.market
        status, screen = await _answer_at_a_terminal(
            ["campaign", "run", str(manifest), "--headless", "--url", server.url, "--db", str(tmp_path / "c.sqlite3"),
             "--ssh-key", str(key), "--time-scale", TIME_SCALE], answer)
        first_question = screen.split("[y/N]")[0]
        assert "Register the SSH public key" in first_question and str(key) in first_question
        assert read_public_key_file(Path(f"{key}.pub")).fingerprint in first_question
        assert _rents(market) == [], "every rent was answered no"
        if answer == b"y\n":
            assert len(_key_posts(market)) == 1 and len(market.account.ssh_keys) == 1
            assert "Approve exactly this plan" in screen, "once the key was registered, the run went on to its plan"
        else:
            assert status == 1 and "registering it was declined; nothing was rented" in screen
            assert _key_posts(market) == [] and not market.account.ssh_keys
