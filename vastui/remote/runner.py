"""The SSH edge: connect to a rented host, upload and drive the agent, stream its records; asyncssh stays here.

Host keys are trusted on first use and a changed key is refused (``known_hosts.py``). Every remote command is
built with ``shlex.join``. Inside ``async with runner.hold(host, port)`` every channel to that host — uploads,
the agent's start, its follower, one-shot commands, its stop — rides one SSH connection, opened once: a handshake
per operation would cost the console seconds per candidate (minutes on a simulator's scaled clock) and make the
measured console overhead depend on how busy this machine is. A dropped held connection is replaced on the next
use. The agent runs detached on the host and appends its records to a file (``agent_run.py``), so a dropped
connection loses nothing: the runner reconnects and resumes reading after the last ``seq`` it has. asyncssh and
OS errors are translated into ``RemoteError`` (``RemoteTimeout`` for deadlines, ``HostKeyMismatch`` for keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from vastui.clock import Clock, WallClock
from vastui.errors import HostKeyMismatch, RemoteError, RemoteTimeout
from vastui.remote.agent_run import AGENT_SOURCE, AgentRun
from vastui.remote.known_hosts import KnownHosts
from vastui.remote.sshio import SSH_ERRORS as _SSH_ERRORS
from vastui.remote.sshio import sftp_write as _sftp_write
from vastui.remote.sshio import text_of as _text
from vastui.remote.sshio import translate as _translate

log = logging.getLogger(__name__)
MAX_PUT_RECONNECTS = 3  # connections cut during one file write before it is given up

__all__ = ["AGENT_SOURCE", "AgentRun", "CommandResult", "SshRunner"]


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A finished one-shot command; ``exit_status`` is None when it ended by a signal."""

    exit_status: int | None
    stdout: str
    stderr: str


class SshRunner:
    """Runs commands and the agent on hosts over SSH.

    ``client_keys`` empty means the usual discovery (ssh-agent, then ``~/.ssh/id_ed25519`` and friends).
    ``clock`` drives deadlines and retry pauses; ``known_hosts`` is the TOFU file vastui owns.
    """

    def __init__(self, *, known_hosts: Path, client_keys: Sequence[Path] = (), use_agent: bool = True,
                 username: str = "root", connect_timeout_s: float = 15.0, keepalive_interval_s: float = 10.0,
                 retry_interval_s: float = 1.0, reconnect_deadline_s: float = 120.0, python: str = "python3",
                 remote_dir: str = ".vastui", clock: Clock | None = None) -> None:
        self.known_hosts = KnownHosts(known_hosts)
        self._client_keys = [str(path) for path in client_keys]
        self._use_agent = use_agent
        self._username = username
        self._connect_timeout_s = connect_timeout_s
        self._keepalive_interval_s = keepalive_interval_s
        self._retry_interval_s = retry_interval_s
        self.reconnect_deadline_s = reconnect_deadline_s
        self.python = python
        self.remote_dir = remote_dir
        self.clock: Clock = clock or WallClock()
        self._tofu_locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._held: dict[tuple[str, int], asyncssh.SSHClientConnection] = {}
        self._holds: dict[tuple[str, int], int] = {}
        # A held endpoint's way back after a drop: itself first, then its instance's other endpoints.
        self._routes: dict[tuple[str, int], list[tuple[str, int]]] = {}
        self.connections_opened = 0      # SSH handshakes made (a held host should need one)

    async def connect(self, host: str, port: int, *,
                      siblings: Sequence[tuple[str, int]] = ()) -> asyncssh.SSHClientConnection:
        """One SSH connection, with the recorded host key enforced (or recorded now, on first contact). A first
        contact trusts a key recorded at ``siblings`` (the instance's other endpoints), if any (``known_hosts.py``)."""
        where = f"{host}:{port}"
        # One first contact per address at a time (so a key is recorded once); other hosts are not held up.
        async with self._tofu_locks.setdefault((host, port), asyncio.Lock()):
            recorded = bool(self.known_hosts.lookup(host, port))
            trusted = self.known_hosts.trusted(host, port, also=[s for s in siblings if s != (host, port)])
            try:
                conn = await asyncssh.connect(
                    host, port, known_hosts=trusted, username=self._username, config=[],
                    client_keys=self._client_keys or (), agent_path=() if self._use_agent else None,
                    connect_timeout=self._connect_timeout_s, keepalive_interval=self._keepalive_interval_s,
                    keepalive_count_max=3)
            except _SSH_ERRORS as exc:
                raise _translate(exc, where) from exc
            self.connections_opened += 1
            if not recorded:
                key = conn.get_server_host_key()
                if key is None:
                    conn.close()
                    raise RemoteError(f"{where} presented no host key")
                self.known_hosts.record(host, port, key)
                log.info("recorded the host key of %s on first contact", where)
        return conn

    @contextlib.asynccontextmanager
    async def hold(self, host: str, port: int, *, deadline_s: float) -> AsyncIterator[None]:
        """Wait (up to ``deadline_s``) until ``host`` accepts SSH, then keep that one connection for every call
        to the host inside the block; it is closed when the last hold on the host ends."""
        async with self.hold_first([(host, port)], deadline_s=deadline_s):
            yield

    @contextlib.asynccontextmanager
    async def hold_first(self, endpoints: Sequence[tuple[str, int]], *,
                         deadline_s: float) -> AsyncIterator[tuple[str, int]]:
        """``hold`` on the first of ``endpoints`` (one instance's addresses, in order) that accepts SSH within
        ``deadline_s``; yields the endpoint every call inside the block must use. A connection to it that drops
        is reopened at it, or else at the instance's next endpoint that accepts (a direct port that closes
        mid-run leaves the proxy)."""
        key = next((endpoint for endpoint in endpoints if endpoint in self._held), None)
        if key is None:
            conn, key = await self.connect_first(endpoints, deadline_s=deadline_s)
            if key in self._held:          # another hold connected meanwhile: keep theirs
                conn.close()
            else:
                self._held[key] = conn
        self._holds[key] = self._holds.get(key, 0) + 1
        self._routes.setdefault(key, [key, *(e for e in dict.fromkeys(endpoints) if e != key)])
        try:
            yield key
        finally:
            self._holds[key] -= 1
            if self._holds[key] <= 0:
                del self._holds[key]
                self._routes.pop(key, None)
                held = self._held.pop(key, None)
                if held is not None:
                    held.close()
                    with contextlib.suppress(*_SSH_ERRORS):
                        await held.wait_closed()

    async def _connection(self, host: str, port: int) -> tuple[asyncssh.SSHClientConnection, bool]:
        """The held connection to the host (reopened if it dropped), or a new one; True when the caller owns
        it and must close it."""
        key = (host, port)
        if key not in self._holds:
            return await self.connect(host, port), True
        held = self._held.get(key)
        if held is None or held.is_closed():
            held = await self._reopen(key)
            self._held[key] = held
        return held, False

    async def _reopen(self, key: tuple[str, int]) -> asyncssh.SSHClientConnection:
        """One try along a held endpoint's route (itself, then its instance's other endpoints); the endpoint's own
        error when none accepts."""
        route = self._routes.get(key, [key])
        errors: list[RemoteError] = []
        for host, port in route:
            try:
                return await self.connect(host, port, siblings=route)
            except HostKeyMismatch:
                raise
            except RemoteError as exc:
                errors.append(exc)
        raise errors[0]

    async def _reconnect_within(self, host: str, port: int, *,
                                deadline_s: float) -> tuple[asyncssh.SSHClientConnection, bool]:
        """After a drop: ``connect_within``; the new connection becomes the held one when the host is held."""
        key = (host, port)
        held = self._held.get(key)
        if key in self._holds and held is not None and not held.is_closed():
            return held, False             # another channel has reconnected already
        conn, _endpoint = await self.connect_first(self._routes.get(key, [key]), deadline_s=deadline_s)
        if key not in self._holds:
            return conn, True
        self._held[key] = conn
        return conn, False

    def _lost(self, host: str, port: int, conn: asyncssh.SSHClientConnection) -> None:
        """A channel on ``conn`` failed at the SSH level: drop it so the next use reconnects."""
        if self._held.get((host, port)) is conn:
            del self._held[(host, port)]
        conn.abort()

    def forget_host(self, host: str, port: int) -> int:
        """Forget the recorded key of ``host:port`` (call after its instance is destroyed; ports get reused)."""
        return self.known_hosts.forget(host, port)

    async def wait_ready(self, host: str, port: int, *, deadline_s: float) -> None:
        """Retry connecting until SSH accepts, for at most ``deadline_s`` seconds of the runner's clock.

        A changed host key is refused at once; refused keys are retried (keys reach new instances late).
        """
        await self.wait_ready_first([(host, port)], deadline_s=deadline_s)

    async def wait_ready_first(self, endpoints: Sequence[tuple[str, int]], *,
                               deadline_s: float) -> tuple[str, int]:
        """``wait_ready`` over one instance's endpoints in order; returns the first that accepted."""
        conn, endpoint = await self.connect_first(endpoints, deadline_s=deadline_s)
        conn.close()
        await conn.wait_closed()
        return endpoint

    async def connect_within(self, host: str, port: int, *, deadline_s: float) -> asyncssh.SSHClientConnection:
        """``connect``, retried every ``retry_interval_s`` until it works or ``deadline_s`` has passed."""
        conn, _endpoint = await self.connect_first([(host, port)], deadline_s=deadline_s)
        return conn

    async def connect_first(self, endpoints: Sequence[tuple[str, int]], *,
                            deadline_s: float) -> tuple[asyncssh.SSHClientConnection, tuple[str, int]]:
        """Try each endpoint in order, round after round every ``retry_interval_s``, until one accepts or
        ``deadline_s`` has passed. A refused connection, a dropped handshake (sshd not up yet) and a refused key
        (keys reach new instances late) are retried; a changed host key ends it at once. At the deadline the
        error names each endpoint's last reason."""
        endpoints = list(dict.fromkeys(endpoints))
        if not endpoints:
            raise RemoteError("the instance has no SSH endpoint yet", title="Not reachable")
        deadline = self.clock.now() + deadline_s
        while True:
            reasons: list[RemoteError] = []
            for host, port in endpoints:
                try:
                    return await self.connect(host, port, siblings=endpoints), (host, port)
                except HostKeyMismatch:
                    raise
                except RemoteError as exc:
                    reasons.append(exc)
                    log.debug("waiting for SSH on %s:%d: %s", host, port, exc)
            if self.clock.now() + self._retry_interval_s > deadline:
                names = " or ".join(f"{host}:{port}" for host, port in endpoints)
                raise RemoteTimeout(f"{names} did not accept SSH within {deadline_s:g} s: "
                                    f"{'; '.join(map(str, reasons))}", title="SSH not ready") from reasons[-1]
            await self.clock.sleep(self._retry_interval_s)

    async def run_command(self, host: str, port: int, argv: Sequence[str], *,
                          timeout_s: float | None = None) -> CommandResult:
        """Run one command to completion (argv joined with ``shlex.join``)."""
        where = f"{host}:{port}"
        conn, owned = await self._connection(host, port)
        try:
            result = await conn.run(shlex.join(argv), check=False, timeout=timeout_s)
        except TimeoutError as exc:       # the command was slow; the connection is fine
            raise _translate(exc, where) from exc
        except _SSH_ERRORS as exc:
            self._lost(host, port, conn)
            raise _translate(exc, where) from exc
        finally:
            if owned:
                conn.close()
        return CommandResult(exit_status=result.exit_status, stdout=_text(result.stdout),
                             stderr=_text(result.stderr))

    async def put_file(self, host: str, port: int, *, data: bytes, remote_path: str) -> None:
        """Write ``data`` to ``remote_path`` (relative paths start in the login directory) over SFTP."""
        await self.put_chunks(host, port, open_chunks=lambda: (data,), remote_path=remote_path)

    async def put_chunks(self, host: str, port: int, *, open_chunks: Callable[[], Iterable[bytes]],
                         remote_path: str) -> None:
        """Stream the chunks ``open_chunks()`` yields to ``remote_path`` over SFTP, one chunk in memory at a time.

        The write is atomic (a temporary name, then a rename), so a connection cut meanwhile is reconnected
        (within ``reconnect_deadline_s``) and the write done again from a fresh ``open_chunks()``, up to
        ``MAX_PUT_RECONNECTS`` times. An error the source raises (not an SSH one) ends the write at once, the
        temporary file removed, and is raised as it is."""
        where = f"{host}:{port}"
        conn, owned = await self._connection(host, port)
        cuts = 0
        while True:
            try:
                async with conn.start_sftp_client() as sftp:
                    await _sftp_write(sftp, remote_path, open_chunks())
            except asyncssh.PermissionDenied as exc:
                if owned:
                    conn.close()
                raise _translate(exc, where) from exc
            except _SSH_ERRORS as exc:
                self._lost(host, port, conn)   # aborted, held or not
                cuts += 1
                if cuts > MAX_PUT_RECONNECTS:
                    raise _translate(exc, where) from exc
                log.warning("lost %s while writing %s (%s); reconnecting", where, remote_path, exc)
                conn, owned = await self._reconnect_within(host, port, deadline_s=self.reconnect_deadline_s)
                continue
            except BaseException:
                if owned:
                    conn.close()
                raise
            if owned:
                conn.close()
            return

    async def stream_command(self, host: str, port: int, argv: Sequence[str], *,
                             on_stdout: Callable[[str], None], on_stderr: Callable[[str], None]) -> int | None:
        """Run one command, handing its output to the callbacks as it comes; returns the exit status."""
        where = f"{host}:{port}"
        conn, owned = await self._connection(host, port)
        try:
            async with conn.create_process(shlex.join(argv)) as process:
                await asyncio.gather(_relay(process.stdout, on_stdout), _relay(process.stderr, on_stderr))
                await process.wait()
                return process.exit_status
        except _SSH_ERRORS as exc:
            self._lost(host, port, conn)
            raise _translate(exc, where) from exc
        finally:
            if owned:
                conn.close()

    def run_agent(self, host: str, port: int, argv: Sequence[str], *, interval_s: float = 1.0,
                  output_file: str | None = None) -> AgentRun:
        """Upload the agent, start ``argv`` under it on the host, and stream its records.

        Use as ``async with runner.run_agent(...) as run: async for record in run: ...``; leaving the block
        before the result (an exception, a break, a cancel) stops the remote agent and its workload.
        """
        return AgentRun(self, host, port, list(argv), interval_s=interval_s, output_file=output_file)


async def _relay(stream: asyncssh.SSHReader[str], sink: Callable[[str], None]) -> None:
    while chunk := await stream.read(65536):
        sink(chunk)


