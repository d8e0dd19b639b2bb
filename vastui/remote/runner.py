"""The SSH edge: connect to a rented host, upload and drive the agent, stream its records; asyncssh stays here.

Host keys are trusted on first use and a changed key is refused (``known_hosts.py``). Every remote command is
built with ``shlex.join``. The agent runs detached on the host and appends its records to a file, so a dropped
connection loses nothing: the runner reconnects and resumes reading after the last ``seq`` it has. asyncssh and
OS errors are translated into ``RemoteError`` (``RemoteTimeout`` for deadlines, ``HostKeyMismatch`` for keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import posixpath
import shlex
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import asyncssh

from vastui.clock import Clock, WallClock
from vastui.errors import HostKeyMismatch, RemoteError, RemoteTimeout
from vastui.remote.agent import EXIT_AGENT_GONE
from vastui.remote.known_hosts import KnownHosts
from vastui.remote.protocol import Record, Result, parse_record

log = logging.getLogger(__name__)

AGENT_SOURCE = Path(__file__).with_name("agent.py")


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A finished one-shot command; ``exit_status`` is None when it ended by a signal."""

    exit_status: int | None
    stdout: str
    stderr: str


def _translate(exc: BaseException, where: str) -> RemoteError:
    if isinstance(exc, RemoteError):
        return exc
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return HostKeyMismatch(f"{where} presented a host key that differs from the one recorded on first "
                               f"contact; refusing to connect ({exc})", title="Host key changed")
    if isinstance(exc, asyncssh.PermissionDenied):
        return RemoteError(f"{where} refused our SSH key ({exc.reason})", title="SSH key refused")
    if isinstance(exc, TimeoutError):
        return RemoteTimeout(f"{where} did not answer in time", title="SSH timeout")
    if isinstance(exc, asyncssh.Error):
        return RemoteError(f"SSH to {where} failed: {exc.reason}", title="SSH failed")
    return RemoteError(f"cannot reach {where}: {exc}", title="SSH failed")


_SSH_ERRORS = (OSError, asyncssh.Error, TimeoutError)
MAX_IDLE_RECONNECTS = 10  # reconnects in a row that bring no new record before a run is given up


class _Dropped(Exception):
    """The follower's channel ended without a result: reconnect and resume."""


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

    async def connect(self, host: str, port: int) -> asyncssh.SSHClientConnection:
        """One SSH connection, with the recorded host key enforced (or recorded now, on first contact)."""
        where = f"{host}:{port}"
        # One first contact per address at a time (so a key is recorded once); other hosts are not held up.
        async with self._tofu_locks.setdefault((host, port), asyncio.Lock()):
            trusted = self.known_hosts.trusted(host, port)
            try:
                conn = await asyncssh.connect(
                    host, port, known_hosts=trusted, username=self._username, config=[],
                    client_keys=self._client_keys or (), agent_path=() if self._use_agent else None,
                    connect_timeout=self._connect_timeout_s, keepalive_interval=self._keepalive_interval_s,
                    keepalive_count_max=3)
            except _SSH_ERRORS as exc:
                raise _translate(exc, where) from exc
            if trusted is None:
                key = conn.get_server_host_key()
                if key is None:
                    conn.close()
                    raise RemoteError(f"{where} presented no host key")
                self.known_hosts.record(host, port, key)
                log.info("recorded the host key of %s on first contact", where)
        return conn

    def forget_host(self, host: str, port: int) -> int:
        """Forget the recorded key of ``host:port`` (call after its instance is destroyed; ports get reused)."""
        return self.known_hosts.forget(host, port)

    async def wait_ready(self, host: str, port: int, *, deadline_s: float) -> None:
        """Retry connecting until SSH accepts, for at most ``deadline_s`` seconds of the runner's clock.

        A changed host key is refused at once; refused keys are retried (keys reach new instances late).
        """
        conn = await self.connect_within(host, port, deadline_s=deadline_s)
        conn.close()
        await conn.wait_closed()

    async def connect_within(self, host: str, port: int, *, deadline_s: float) -> asyncssh.SSHClientConnection:
        """``connect``, retried every ``retry_interval_s`` until it works or ``deadline_s`` has passed."""
        deadline = self.clock.now() + deadline_s
        while True:
            try:
                return await self.connect(host, port)
            except HostKeyMismatch:
                raise
            except RemoteError as exc:
                if self.clock.now() + self._retry_interval_s > deadline:
                    raise RemoteTimeout(f"{host}:{port} did not accept SSH within {deadline_s:g} s: {exc}",
                                        title="SSH not ready") from exc
                log.debug("waiting for SSH on %s:%d: %s", host, port, exc)
            await self.clock.sleep(self._retry_interval_s)

    async def run_command(self, host: str, port: int, argv: Sequence[str], *,
                          timeout_s: float | None = None) -> CommandResult:
        """Run one command to completion (argv joined with ``shlex.join``)."""
        where = f"{host}:{port}"
        conn = await self.connect(host, port)
        try:
            result = await conn.run(shlex.join(argv), check=False, timeout=timeout_s)
        except _SSH_ERRORS as exc:
            raise _translate(exc, where) from exc
        finally:
            conn.close()
        return CommandResult(exit_status=result.exit_status, stdout=_text(result.stdout),
                             stderr=_text(result.stderr))

    async def put_file(self, host: str, port: int, *, data: bytes, remote_path: str) -> None:
        """Write ``data`` to ``remote_path`` (relative paths start in the login directory) over SFTP."""
        where = f"{host}:{port}"
        conn = await self.connect(host, port)
        try:
            async with conn.start_sftp_client() as sftp:
                await _sftp_write(sftp, remote_path, data)
        except _SSH_ERRORS as exc:
            raise _translate(exc, where) from exc
        finally:
            conn.close()

    async def stream_command(self, host: str, port: int, argv: Sequence[str], *,
                             on_stdout: Callable[[str], None], on_stderr: Callable[[str], None]) -> int | None:
        """Run one command, handing its output to the callbacks as it comes; returns the exit status."""
        where = f"{host}:{port}"
        conn = await self.connect(host, port)
        try:
            async with conn.create_process(shlex.join(argv)) as process:
                await asyncio.gather(_relay(process.stdout, on_stdout), _relay(process.stderr, on_stderr))
                await process.wait()
                return process.exit_status
        except _SSH_ERRORS as exc:
            raise _translate(exc, where) from exc
        finally:
            conn.close()

    def run_agent(self, host: str, port: int, argv: Sequence[str], *, interval_s: float = 1.0,
                  output_file: str | None = None) -> AgentRun:
        """Upload the agent, start ``argv`` under it on the host, and stream its records.

        Use as ``async with runner.run_agent(...) as run: async for record in run: ...``; leaving the block
        before the result (an exception, a break, a cancel) stops the remote agent and its workload.
        """
        return AgentRun(self, host, port, list(argv), interval_s=interval_s, output_file=output_file)


async def _sftp_write(sftp: asyncssh.SFTPClient, remote_path: str, data: bytes) -> None:
    """Write via a temporary name and rename, so a reader never sees half a file."""
    parent = posixpath.dirname(remote_path)
    if parent and not await sftp.exists(parent):
        await sftp.makedirs(parent)
    async with sftp.open(remote_path + ".part", "wb") as handle:
        await handle.write(data)
    await sftp.posix_rename(remote_path + ".part", remote_path)


async def _relay(stream: asyncssh.SSHReader[str], sink: Callable[[str], None]) -> None:
    while chunk := await stream.read(65536):
        sink(chunk)


def _text(value: object) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class AgentRun:
    """One agent run on one host: started on enter, records on iteration, stopped on an early exit."""

    def __init__(self, runner: SshRunner, host: str, port: int, argv: list[str], *, interval_s: float,
                 output_file: str | None) -> None:
        self.host = host
        self.port = port
        self.where = f"{host}:{port}"
        self.run_id = uuid.uuid4().hex[:12]
        self.last_seq = 0
        self.reconnects = 0
        self.result: Result | None = None
        self._runner = runner
        self._argv = argv
        self._interval_s = interval_s
        self._output_file = output_file
        self._conn: asyncssh.SSHClientConnection | None = None
        self._iterator: AsyncGenerator[Record, None] | None = None
        run_dir = f"{runner.remote_dir}/runs/{self.run_id}"
        self.agent_path = f"{runner.remote_dir}/agent-{_agent_digest()}.py"
        self.out_path = f"{run_dir}/records.jsonl"
        self.pid_path = f"{run_dir}/agent.pid"

    async def __aenter__(self) -> AgentRun:
        self._conn = await self._runner.connect(self.host, self.port)
        starting = False
        try:
            await self._upload(self._conn)
            starting = True
            await self._start(self._conn)
        except BaseException:
            self._conn.close()
            self._conn = None
            if starting:  # it may be running on the host already (a cancel mid-start): do not leave it there
                await self.stop()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._iterator is not None:
            await self._iterator.aclose()
        if self.result is None:
            await self.stop()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __aiter__(self) -> AsyncIterator[Record]:
        self._iterator = self._records()
        return self._iterator

    async def _upload(self, conn: asyncssh.SSHClientConnection) -> None:
        try:
            async with conn.start_sftp_client() as sftp:
                if not await sftp.exists(self.agent_path):
                    await _sftp_write(sftp, self.agent_path, AGENT_SOURCE.read_bytes())
        except _SSH_ERRORS as exc:
            raise _translate(exc, self.where) from exc

    def _agent_command(self, *args: str) -> str:
        return shlex.join([self._runner.python, self.agent_path, *args])

    async def _start(self, conn: asyncssh.SSHClientConnection) -> None:
        options = ["--detach", "--out", self.out_path, "--pid-file", self.pid_path, "--interval",
                   repr(self._interval_s)]
        if self._output_file is not None:
            options += ["--output-file", self._output_file]
        try:
            started = await conn.run(self._agent_command(*options, "--", *self._argv), check=False,
                                     timeout=self._runner.reconnect_deadline_s)
        except _SSH_ERRORS as exc:
            raise _translate(exc, self.where) from exc
        if started.exit_status != 0:
            raise RemoteError(f"the agent did not start on {self.where} (exit {started.exit_status}): "
                              f"{_text(started.stderr).strip()[-400:]}", title="Agent failed to start")
        log.info("agent run %s started on %s: %s", self.run_id, self.where, _text(started.stdout).strip())

    async def _records(self) -> AsyncGenerator[Record, None]:
        idle_reconnects = 0
        while self.result is None:
            if self._conn is None:
                self._conn = await self._runner.connect_within(self.host, self.port,
                                                               deadline_s=self._runner.reconnect_deadline_s)
            seq_before = self.last_seq
            try:
                async with contextlib.aclosing(self._follow(self._conn)) as records:
                    async for record in records:
                        yield record
            except (_Dropped, *_SSH_ERRORS) as exc:
                idle_reconnects = 0 if self.last_seq > seq_before else idle_reconnects + 1
                if idle_reconnects > MAX_IDLE_RECONNECTS:
                    raise RemoteError(f"{self.where}: run {self.run_id} keeps dropping without progress "
                                      f"(last record {self.last_seq})", title="SSH unstable") from exc
                log.warning("lost %s during run %s (%s); resuming after seq %d",
                            self.where, self.run_id, exc, self.last_seq)
                self._conn.abort()
                self._conn = None
                self.reconnects += 1

    async def _follow(self, conn: asyncssh.SSHClientConnection) -> AsyncGenerator[Record, None]:
        command = self._agent_command("--follow", self.out_path, "--from-seq", str(self.last_seq + 1),
                                      "--pid-file", self.pid_path)
        async with conn.create_process(command) as process:
            async for line in process.stdout:
                if not line.strip():
                    continue  # the follower's heartbeat
                record = parse_record(line, where=self.where)
                if record.seq <= self.last_seq:
                    continue
                if record.seq != self.last_seq + 1:
                    raise RemoteError(f"{self.where}: records {self.last_seq + 1}..{record.seq - 1} of run "
                                      f"{self.run_id} are missing", title="Records lost")
                self.last_seq = record.seq
                if isinstance(record, Result):
                    self.result = record
                yield record
                if self.result is not None:
                    return
            await process.wait()
        if process.exit_status == EXIT_AGENT_GONE:
            raise RemoteError(f"the agent of run {self.run_id} on {self.where} stopped without a result "
                              f"(last record {self.last_seq})", title="Agent died")
        raise _Dropped(f"follower ended with status {process.exit_status}")

    async def stop(self, *, timeout_s: float = 30.0) -> None:
        """Stop the remote agent (SIGTERM, then SIGKILL); a failure is logged, not raised (best effort)."""
        argv = [self._runner.python, self.agent_path, "--stop", "--pid-file", self.pid_path]
        try:
            await asyncio.wait_for(self._runner.run_command(self.host, self.port, argv), timeout_s)
        except (RemoteError, TimeoutError) as exc:
            log.warning("could not stop agent run %s on %s: %s", self.run_id, self.where, exc)


def _agent_digest() -> str:
    return hashlib.sha256(AGENT_SOURCE.read_bytes()).hexdigest()[:12]
