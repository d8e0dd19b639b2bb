"""SshRunner against real asyncssh servers on 127.0.0.1: host keys (TOFU), readiness, the connections it hands back,
one-shot commands, files."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import asyncssh
import pytest

from tests.fakes import FakeClock
from tests.remote.remote_support import ClientKey, make_machine, put_bytes, reach_ssh
from vastui.campaign.ports import HostConnection, HostExecutor
from vastui.errors import HostKeyMismatch, RemoteError, RemoteTimeout
from vastui.remote.runner import SshConnection, SshRunner
from vastui.sim.hosts import SshHostPool


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _NoAuth(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return False  # anyone may log in: these servers only show their host key


async def _bare_server(port: int) -> asyncssh.SSHAcceptor:
    key = asyncssh.generate_private_key("ssh-ed25519")
    return await asyncssh.create_server(_NoAuth, "127.0.0.1", port, server_host_keys=[key], config=[])


async def test_first_contact_records_the_host_key_and_later_contacts_must_match(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey, tmp_path: Path) -> None:
    host, port = await pool.start_host(instance_id=1, machine=make_machine(), authorized_keys=[client_key.public])
    await reach_ssh(runner, [(host, port)], deadline_s=10)
    recorded = runner.known_hosts.lookup(host, port)
    assert recorded == [" ".join(pool.host_public_key(instance_id=1).split()[:2])]
    assert (tmp_path / "known_hosts").read_text().startswith(f"[127.0.0.1]:{port} ssh-ed25519 ")
    assert (tmp_path / "known_hosts").stat().st_mode & 0o077 == 0
    async with runner.connect(host, port, deadline_s=10) as conn:
        result = await conn.run_command(["true"])
    assert result.exit_status == 0
    assert len(runner.known_hosts.lookup(host, port)) == 1  # not recorded twice

    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:{port} {other[0]} {other[1]}\n")
    with pytest.raises(HostKeyMismatch):
        async with runner.connect(host, port, deadline_s=10):
            pass
    started = time.monotonic()
    with pytest.raises(HostKeyMismatch):  # refused at once, not retried until the deadline
        await reach_ssh(runner, [(host, port)], deadline_s=30)
    assert time.monotonic() - started < 5

    assert runner.forget_host(host, port) == 1
    async with runner.connect(host, port, deadline_s=10) as conn:
        assert (await conn.run_command(["true"])).exit_status == 0


async def test_a_changed_key_on_the_same_address_is_refused(runner: SshRunner) -> None:
    port = _free_port()
    first = await _bare_server(port)
    conn = await runner.open_connection("127.0.0.1", port)
    conn.close()
    await conn.wait_closed()
    first.close()
    await first.wait_closed()
    assert len(runner.known_hosts.lookup("127.0.0.1", port)) == 1
    second = await _bare_server(port)  # same address, new key: a reinstalled host, or someone in between
    try:
        with pytest.raises(HostKeyMismatch, match="differs from the one recorded"):
            await runner.open_connection("127.0.0.1", port)
    finally:
        second.close()
        await second.wait_closed()


async def test_the_host_key_is_stable_per_instance_across_restarts(pool: SshHostPool, client_key: ClientKey) -> None:
    await pool.start_host(instance_id=4, machine=make_machine(), authorized_keys=[client_key.public])
    key = pool.host_public_key(instance_id=4)
    await pool.stop_host(instance_id=4)
    await pool.start_host(instance_id=4, machine=make_machine(), authorized_keys=[client_key.public])
    assert pool.host_public_key(instance_id=4) == key
    await pool.start_host(instance_id=5, machine=make_machine(), authorized_keys=[client_key.public])
    assert pool.host_public_key(instance_id=5) != key


async def test_an_unknown_client_key_is_refused_until_it_is_attached(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    keys: list[str] = []
    host, port = await pool.start_host(instance_id=6, machine=make_machine(), authorized_keys=keys)
    with pytest.raises(RemoteError, match="refused our SSH key") as caught:
        await runner.open_connection(host, port)
    assert not isinstance(caught.value, HostKeyMismatch)
    keys.append(client_key.public)  # the market's live list: attaching a key takes effect at the next login
    async with runner.connect(host, port, deadline_s=10) as conn:
        assert (await conn.run_command(["true"])).exit_status == 0


async def test_connect_gives_up_at_the_deadline_on_the_runner_clock(client_key: ClientKey, tmp_path: Path) -> None:
    clock = FakeClock()
    runner = SshRunner(known_hosts=tmp_path / "kh", client_keys=[client_key.path], use_agent=False, clock=clock,
                       retry_interval_s=2.0, connect_timeout_s=2.0)
    with pytest.raises(RemoteTimeout, match="did not accept SSH within 5 s"):
        await reach_ssh(runner, [("127.0.0.1", _free_port())], deadline_s=5)
    assert clock.sleeps == [2.0, 2.0]


async def test_connect_returns_once_ssh_accepts(pool: SshHostPool, client_key: ClientKey, tmp_path: Path) -> None:
    port = _free_port()
    runner = SshRunner(known_hosts=tmp_path / "kh", client_keys=[client_key.path], use_agent=False,
                       retry_interval_s=0.05)
    waiting = asyncio.create_task(reach_ssh(runner, [("127.0.0.1", port)], deadline_s=20))
    for _ in range(5):  # the port refuses for a while
        await asyncio.sleep(0.05)
        assert not waiting.done()
    server = await asyncssh.create_server(
        asyncssh.SSHServer, "127.0.0.1", port, server_host_keys=[asyncssh.generate_private_key("ssh-ed25519")],
        authorized_client_keys=asyncssh.import_authorized_keys(client_key.public + "\n"), config=[])
    try:
        await asyncio.wait_for(waiting, 20)
        assert len(runner.known_hosts.lookup("127.0.0.1", port)) == 1
    finally:
        server.close()
        await server.wait_closed()


async def test_run_command_keeps_arguments_intact_and_reports_status_and_streams(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=7, machine=make_machine(), authorized_keys=[client_key.public])
    tricky = ["a b", "c'd", "$HOME", "; rm -rf /", "*"]
    async with runner.connect(host, port, deadline_s=10) as conn:
        result = await conn.run_command(["printf", "%s|", *tricky])
        assert result.exit_status == 0 and result.stdout == "|".join(tricky) + "|"
        result = await conn.run_command(
            ["python3", "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
        assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
        out: list[str] = []
        err: list[str] = []
        status = await conn.stream_command(["sh", "-c", "echo one; echo two >&2; echo three; exit 4"],
                                           on_stdout=out.append, on_stderr=err.append)
    assert status == 4 and "".join(out) == "one\nthree\n" and "".join(err) == "two\n"


async def test_an_upload_writes_into_the_instance_filesystem(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=8, machine=make_machine(), authorized_keys=[client_key.public])
    async with runner.connect(host, port, deadline_s=10) as conn:
        await put_bytes(conn, b"\x00payload", remote_path="inputs/canary.jsonl")
        assert (pool.root_dir(instance_id=8) / "inputs" / "canary.jsonl").read_bytes() == b"\x00payload"
        result = await conn.run_command(["python3", "-c", "print(open('inputs/canary.jsonl','rb').read())"])
    assert result.stdout == "b'\\x00payload'\n"


async def test_commands_see_no_operator_secrets(pool: SshHostPool, runner: SshRunner, client_key: ClientKey,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAST_API_KEY", "operator-secret-key")
    host, port = await pool.start_host(instance_id=9, machine=make_machine(), authorized_keys=[client_key.public])
    async with runner.connect(host, port, deadline_s=10) as conn:
        result = await conn.run_command(["env"])
    assert result.exit_status == 0 and "operator-secret-key" not in result.stdout
    assert "VASTUI_NVML_MODULE=vastui.sim.fakenvml" in result.stdout


async def test_connect_hands_back_a_connection_shared_per_host_and_closed_with_its_last_block(
        pool: SshHostPool, runner: SshRunner, client_key: ClientKey) -> None:
    host, port = await pool.start_host(instance_id=31, machine=make_machine(), authorized_keys=[client_key.public])
    other_host, other_port = await pool.start_host(instance_id=32, machine=make_machine(),
                                                   authorized_keys=[client_key.public])
    executor: HostExecutor = runner              # the campaign's port, as the campaign sees the runner
    async with executor.connect(host, port, deadline_s=10) as first:
        assert isinstance(first, SshConnection) and first.endpoint == (host, port)
        async with runner.connect(host, port, deadline_s=10) as second:
            assert second is first               # a second connect to a connected host shares its connection
            assert (await second.run_command(["echo", "one"])).stdout == "one\n"
        assert not first.is_closed               # still in use by the outer block
        assert (await first.run_command(["echo", "two"])).stdout == "two\n"
        assert runner.connections_opened == 1
        async with runner.connect(other_host, other_port, deadline_s=10) as other:
            assert other is not first and other.endpoint == (other_host, other_port)
            assert (await other.run_command(["true"])).exit_status == 0
        assert other.is_closed and runner.connections_opened == 2
    assert first.is_closed and not runner._held
    with pytest.raises(RemoteError, match="connection was closed"):
        await first.run_command(["true"])       # nothing rides a connection once its last block has ended
    async with runner.connect(host, port, deadline_s=10) as again:
        assert again is not first and runner.connections_opened == 3


async def test_connect_fails_when_no_endpoint_accepts_and_keeps_nothing(client_key: ClientKey,
                                                                       tmp_path: Path) -> None:
    clock = FakeClock()
    runner = SshRunner(known_hosts=tmp_path / "kh", client_keys=[client_key.path], use_agent=False, clock=clock,
                       retry_interval_s=2.0, connect_timeout_s=2.0)
    first = _free_port()
    second = next(port for port in iter(_free_port, 0) if port != first)
    reached: list[HostConnection] = []
    with pytest.raises(RemoteTimeout, match=f"127.0.0.1:{first} or 127.0.0.1:{second} did not accept SSH within 5 s"):
        async with runner.connect_first([("127.0.0.1", first), ("127.0.0.1", second)], deadline_s=5) as conn:
            reached.append(conn)
    assert reached == [] and not runner._held and runner.connections_opened == 0
    assert clock.sleeps == [2.0, 2.0]
