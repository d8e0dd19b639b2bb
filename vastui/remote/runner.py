"""The SSH edge: connect to a rented host, upload and drive the agent, stream its records; asyncssh stays here.

Host keys are trusted on first use and a changed key is refused (``known_hosts.py``). Every remote command is
built with ``shlex.join``. ``async with runner.connect(host, port, deadline_s=...) as conn`` waits until the host
accepts SSH and hands back an ``SshConnection``; every channel to that host — uploads, the agent's start, its
follower, one-shot commands, its stop — is a call on it and rides one SSH connection, opened once: a handshake
per operation would cost the console seconds per candidate (minutes on a simulator's scaled clock) and make the
measured console overhead depend on how busy this machine is. A second ``connect`` to a connected host shares that
connection, which is closed when the last block on it ends. A dropped connection is replaced on the next use. The
agent runs detached on the host and appends its records to a file (``agent_run.py``), so a dropped connection loses
nothing: the run reconnects and resumes reading after the last ``seq`` it has. asyncssh and OS errors are
translated into ``RemoteError`` (``RemoteTimeout`` for deadlines, ``HostKeyMismatch`` for keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path

import asyncssh

from vastui.clock import Clock, WallClock
from vastui.errors import HostKeyMismatch, RemoteError, RemoteTimeout
from vastui.remote.agent_run import AGENT_SOURCE, AgentRun
from vastui.remote.known_hosts import KnownHosts
from vastui.remote.sshio import SSH_ERRORS as _SSH_ERRORS
from vastui.remote.sshio import CommandResult
from vastui.remote.sshio import sftp_write as _sftp_write
from vastui.remote.sshio import text_of as _text
from vastui.remote.sshio import translate as _translate

log = logging.getLogger(__name__)
MAX_PUT_RECONNECTS = 3  # connections cut during one file write before it is given up

__all__ = ["AGENT_SOURCE", "AgentRun", "CommandResult", "SshConnection", "SshRunner"]


class SshRunner:
    """Opens SSH connections to hosts and hands them out (``connect``); commands and the agent run on those.

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
        # The connections handed out and not yet closed, by the endpoint each was opened at: a second ``connect``
        # to one of them shares it.
        self._held: dict[tuple[str, int], SshConnection] = {}
        self.connections_opened = 0      # SSH handshakes made (a connected host should need one)

    async def open_connection(self, host: str, port: int, *,
                              siblings: Sequence[tuple[str, int]] = ()) -> asyncssh.SSHClientConnection:
        """One bare SSH connection (the caller closes it), with the recorded host key enforced (or recorded now, on
        first contact). A first contact trusts a key recorded at ``siblings`` (the instance's other endpoints), if
        any (``known_hosts.py``)."""
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
    async def connect(self, host: str, port: int, *, deadline_s: float) -> AsyncIterator[SshConnection]:
        """Wait (up to ``deadline_s``) until ``host`` accepts SSH, then hand back the connection every call to the
        host inside the block rides; it is closed when the last block on it ends."""
        async with self.connect_first([(host, port)], deadline_s=deadline_s) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def connect_first(self, endpoints: Sequence[tuple[str, int]], *,
                            deadline_s: float) -> AsyncIterator[SshConnection]:
        """``connect`` to the first of ``endpoints`` (one instance's addresses, in order) that accepts SSH within
        ``deadline_s``; ``SshConnection.endpoint`` says which. When one of them is connected already (and its
        connection not lost), that connection is shared. A connection that drops is reopened at its endpoint, or
        else at the instance's next endpoint that accepts (a direct port that closes mid-run leaves the proxy)."""
        shared = next((self._held[e] for e in endpoints if e in self._held and self._held[e].is_live), None)
        if shared is None:
            conn, endpoint = await self.open_first(endpoints, deadline_s=deadline_s)
            shared = self._held.get(endpoint)
            if shared is None:
                route = [endpoint, *(e for e in dict.fromkeys(endpoints) if e != endpoint)]
                shared = self._held[endpoint] = SshConnection(self, endpoint, route=route, conn=conn)
            elif shared.is_live:       # another connect got there meanwhile: keep theirs
                conn.close()
            else:
                shared.adopt(conn)
        shared.users += 1
        try:
            yield shared
        finally:
            shared.users -= 1
            if shared.users <= 0:
                if self._held.get(shared.endpoint) is shared:
                    del self._held[shared.endpoint]
                await shared.close()

    def forget_host(self, host: str, port: int) -> int:
        """Forget the recorded key of ``host:port`` (call after its instance is destroyed; ports get reused)."""
        return self.known_hosts.forget(host, port)

    async def open_first(self, endpoints: Sequence[tuple[str, int]], *,
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
                    return await self.open_connection(host, port, siblings=endpoints), (host, port)
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


class SshConnection:
    """One host's SSH connection as ``SshRunner.connect`` hands it back: every call on it rides that connection.

    A connection that dropped is reopened on the next call (at ``endpoint``, else along the instance's other
    endpoints); once the last ``connect`` block on it has ended it is closed, and a call raises ``RemoteError``.
    """

    def __init__(self, runner: SshRunner, endpoint: tuple[str, int], *, route: Sequence[tuple[str, int]],
                 conn: asyncssh.SSHClientConnection) -> None:
        self.endpoint = endpoint
        self.where = f"{endpoint[0]}:{endpoint[1]}"
        self.users = 0                   # the ``connect`` blocks open on it
        self._runner = runner
        self._route = list(route)        # the way back after a drop: the endpoint first, then its siblings
        self._conn: asyncssh.SSHClientConnection | None = conn
        self._closed = False

    @property
    def python(self) -> str:
        return self._runner.python

    @property
    def remote_dir(self) -> str:
        return self._runner.remote_dir

    @property
    def reconnect_deadline_s(self) -> float:
        return self._runner.reconnect_deadline_s

    @property
    def is_live(self) -> bool:
        """Open, and its SSH connection not known to be lost."""
        return not self._closed and self._conn is not None

    @property
    def is_closed(self) -> bool:
        return self._closed

    def adopt(self, conn: asyncssh.SSHClientConnection) -> None:
        """Ride ``conn`` from now on (a ``connect`` opened it while this one's was lost)."""
        self._conn = conn

    async def current(self) -> asyncssh.SSHClientConnection:
        """The SSH connection, reopened (one try along the route) when it dropped."""
        self._check_open()
        if self._conn is None or self._conn.is_closed():
            self._conn = await self._reopen()
        return self._conn

    async def _reopen(self) -> asyncssh.SSHClientConnection:
        """One try along the route (the endpoint, then its instance's other endpoints); the endpoint's own error
        when none accepts."""
        errors: list[RemoteError] = []
        for host, port in self._route:
            try:
                return await self._runner.open_connection(host, port, siblings=self._route)
            except HostKeyMismatch:
                raise
            except RemoteError as exc:
                errors.append(exc)
        raise errors[0]

    async def reconnect(self) -> asyncssh.SSHClientConnection:
        """After a drop: the connection another channel has reopened meanwhile, or a new one along the route,
        retried within the runner's ``reconnect_deadline_s``."""
        self._check_open()
        if self._conn is not None and not self._conn.is_closed():
            return self._conn              # another channel has reconnected already
        conn, _endpoint = await self._runner.open_first(self._route, deadline_s=self.reconnect_deadline_s)
        if self._closed:                   # the last block ended meanwhile: nothing may ride it now
            conn.close()
            self._check_open()
        self._conn = conn
        return conn

    def lost(self, conn: asyncssh.SSHClientConnection) -> None:
        """A channel on ``conn`` failed at the SSH level: drop it so the next use reconnects."""
        if self._conn is conn:
            self._conn = None
        conn.abort()

    def _check_open(self) -> None:
        if self._closed:
            raise RemoteError(f"{self.where}: the connection was closed (its connect block has ended)",
                              title="SSH closed")

    async def close(self) -> None:
        """Close the SSH connection; later calls raise ``RemoteError``."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(*_SSH_ERRORS):
                await conn.wait_closed()

    async def run_command(self, argv: Sequence[str], *, timeout_s: float | None = None) -> CommandResult:
        """Run one command to completion (argv joined with ``shlex.join``)."""
        conn = await self.current()
        try:
            result = await conn.run(shlex.join(argv), check=False, timeout=timeout_s)
        except TimeoutError as exc:       # the command was slow; the connection is fine
            raise _translate(exc, self.where) from exc
        except _SSH_ERRORS as exc:
            self.lost(conn)
            raise _translate(exc, self.where) from exc
        return CommandResult(exit_status=result.exit_status, stdout=_text(result.stdout),
                             stderr=_text(result.stderr))

    async def put_chunks(self, *, open_chunks: Callable[[], Iterable[bytes]], remote_path: str) -> None:
        """Stream the chunks ``open_chunks()`` yields to ``remote_path`` over SFTP, one chunk in memory at a time.

        The write is atomic (a temporary name, then a rename), so a connection cut meanwhile is reconnected
        (within ``reconnect_deadline_s``) and the write done again from a fresh ``open_chunks()``, up to
        ``MAX_PUT_RECONNECTS`` times. An error the source raises (not an SSH one) ends the write at once, the
        temporary file removed, and is raised as it is."""
        conn = await self.current()
        cuts = 0
        while True:
            try:
                async with conn.start_sftp_client() as sftp:
                    await _sftp_write(sftp, remote_path, open_chunks())
                return
            except asyncssh.PermissionDenied as exc:
                raise _translate(exc, self.where) from exc
            except _SSH_ERRORS as exc:
                self.lost(conn)
                cuts += 1
                if cuts > MAX_PUT_RECONNECTS:
                    raise _translate(exc, self.where) from exc
                log.warning("lost %s while writing %s (%s); reconnecting", self.where, remote_path, exc)
                conn = await self.reconnect()

    async def stream_command(self, argv: Sequence[str], *, on_stdout: Callable[[str], None],
                             on_stderr: Callable[[str], None]) -> int | None:
        """Run one command, handing its output to the callbacks as it comes; returns the exit status."""
        conn = await self.current()
        try:
            async with conn.create_process(shlex.join(argv)) as process:
                await asyncio.gather(_relay(process.stdout, on_stdout), _relay(process.stderr, on_stderr))
                await process.wait()
                return process.exit_status
        except _SSH_ERRORS as exc:
            self.lost(conn)
            raise _translate(exc, self.where) from exc

    def run_agent(self, argv: Sequence[str], *, interval_s: float = 1.0, output_file: str | None = None) -> AgentRun:
        """Upload the agent, start ``argv`` under it on the host, and stream its records.

        Use as ``async with conn.run_agent(...) as run: async for record in run: ...``; leaving the block
        before the result (an exception, a break, a cancel) stops the remote agent and its workload.
        """
        return AgentRun(self, list(argv), interval_s=interval_s, output_file=output_file)


async def _relay(stream: asyncssh.SSHReader[str], sink: Callable[[str], None]) -> None:
    while chunk := await stream.read(65536):
        sink(chunk)


