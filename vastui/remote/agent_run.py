"""One agent run on a host: upload the agent, start it detached, follow its records (resuming after a drop), stop it.

The agent appends its records to a file on the host, so a dropped connection loses nothing: the run reconnects
(through the connection it rides, which every other channel to the host shares) and resumes reading after the last
``seq`` it has. The run knows that connection only as an ``AgentLink`` (``runner.SshConnection`` is one), so this
module needs nothing of the runner's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import shlex
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Protocol

import asyncssh

from vastui.errors import RemoteError
from vastui.remote.agent import EXIT_AGENT_GONE
from vastui.remote.protocol import Record, Result, parse_record
from vastui.remote.sshio import SSH_ERRORS as _SSH_ERRORS
from vastui.remote.sshio import CommandResult
from vastui.remote.sshio import sftp_write as _sftp_write
from vastui.remote.sshio import text_of as _text
from vastui.remote.sshio import translate as _translate

log = logging.getLogger(__name__)

AGENT_SOURCE = Path(__file__).with_name("agent.py")
MAX_IDLE_RECONNECTS = 10  # reconnects in a row that bring no new record before a run is given up


MAX_START_RECONNECTS = 3  # connections cut while the agent is uploaded or started, before the run is given up


class AgentLink(Protocol):
    """What an agent run needs of the SSH connection it rides: the live connection, a reconnect after a drop, a
    way to report one lost, a one-shot command (the stop), and where the agent lives on the host."""

    @property
    def where(self) -> str: ...

    @property
    def python(self) -> str: ...

    @property
    def remote_dir(self) -> str: ...

    @property
    def reconnect_deadline_s(self) -> float: ...

    async def current(self) -> asyncssh.SSHClientConnection:
        """The live SSH connection (reopened when it dropped)."""
        ...

    async def reconnect(self) -> asyncssh.SSHClientConnection:
        """After a drop: a live connection, retried within ``reconnect_deadline_s``."""
        ...

    def lost(self, conn: asyncssh.SSHClientConnection) -> None:
        """A channel on ``conn`` failed at the SSH level: the next use reconnects."""
        ...

    async def run_command(self, argv: Sequence[str], *, timeout_s: float | None = None) -> CommandResult: ...


class _Cut(RemoteError):
    """The SSH connection went away while the agent was uploaded or started."""


class _Dropped(Exception):
    """The follower's channel ended without a result: reconnect and resume."""


class AgentRun:
    """One agent run on one host: started on enter, records on iteration, stopped on an early exit."""

    def __init__(self, link: AgentLink, argv: list[str], *, interval_s: float, output_file: str | None) -> None:
        self.where = link.where
        self.run_id = uuid.uuid4().hex[:12]
        self.last_seq = 0
        self.reconnects = 0
        self.result: Result | None = None
        self._link = link
        self._argv = argv
        self._interval_s = interval_s
        self._output_file = output_file
        self._conn: asyncssh.SSHClientConnection | None = None
        self._abandoned = False
        self._iterator: AsyncGenerator[Record, None] | None = None
        run_dir = f"{link.remote_dir}/runs/{self.run_id}"
        self.agent_path = f"{link.remote_dir}/agent-{_agent_digest()}.py"
        self.out_path = f"{run_dir}/records.jsonl"
        self.pid_path = f"{run_dir}/agent.pid"

    async def __aenter__(self) -> AgentRun:
        """Upload and start the agent. A connection cut meanwhile is reconnected (within the link's reconnect
        deadline) and the start picks up where it stopped: the upload is redone, and the agent is started again
        only when its pid file shows it never started (a second agent would write into the same records)."""
        cuts = 0
        self._conn = await self._link.current()
        while True:
            starting = False
            try:
                await self._upload(self._conn)
                starting = True
                if cuts == 0 or not await self._has_started(self._conn):
                    await self._start(self._conn)
                return self
            except _Cut as exc:
                self._let_go(failed=True)
                cuts += 1
                if cuts > MAX_START_RECONNECTS:
                    await self.stop()
                    raise RemoteError(f"{self.where}: the SSH connection was cut {cuts} times while run "
                                      f"{self.run_id} started ({exc})", title="SSH unstable") from exc
                log.warning("lost %s while starting run %s (%s); reconnecting", self.where, self.run_id, exc)
                self._conn = await self._link.reconnect()
            except BaseException as exc:
                self._let_go(failed=isinstance(exc, RemoteError))
                if starting:  # it may be running on the host already (a cancel mid-start): do not leave it there
                    await self.stop()
                raise

    async def _has_started(self, conn: asyncssh.SSHClientConnection) -> bool:
        """Whether an earlier start of this run got as far as the agent's pid file (written once it runs)."""
        try:
            async with conn.start_sftp_client() as sftp:
                return bool(await sftp.exists(self.pid_path))
        except _SSH_ERRORS as exc:
            raise _Cut(str(_translate(exc, self.where))) from exc

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._iterator is not None:
            await self._iterator.aclose()
        if self.result is None and not self._abandoned:
            await self.stop()
        self._let_go(failed=False)

    def abandon(self) -> None:
        """Leave without stopping the remote agent: its instance is destroyed next (a polite stop would spend the
        margin the destroy needs before the deadline)."""
        self._abandoned = True

    def _let_go(self, *, failed: bool) -> None:
        """Done with the connection (it stays open for the host's other channels); a failed one is dropped."""
        conn, self._conn = self._conn, None
        if conn is not None and failed:
            self._link.lost(conn)

    def __aiter__(self) -> AsyncIterator[Record]:
        self._iterator = self._records()
        return self._iterator

    async def _upload(self, conn: asyncssh.SSHClientConnection) -> None:
        try:
            async with conn.start_sftp_client() as sftp:
                if not await sftp.exists(self.agent_path):
                    await _sftp_write(sftp, self.agent_path, (AGENT_SOURCE.read_bytes(),))
        except asyncssh.PermissionDenied as exc:
            raise _translate(exc, self.where) from exc
        except _SSH_ERRORS as exc:
            raise _Cut(str(_translate(exc, self.where))) from exc

    def _agent_command(self, *args: str) -> str:
        return shlex.join([self._link.python, self.agent_path, *args])

    async def _start(self, conn: asyncssh.SSHClientConnection) -> None:
        options = ["--detach", "--out", self.out_path, "--pid-file", self.pid_path, "--interval",
                   repr(self._interval_s)]
        if self._output_file is not None:
            options += ["--output-file", self._output_file]
        try:
            started = await conn.run(self._agent_command(*options, "--", *self._argv), check=False,
                                     timeout=self._link.reconnect_deadline_s)
        except (asyncssh.PermissionDenied, TimeoutError) as exc:
            raise _translate(exc, self.where) from exc
        except _SSH_ERRORS as exc:
            raise _Cut(str(_translate(exc, self.where))) from exc
        if started.exit_status is None and started.exit_signal is None:  # the channel went without an answer
            raise _Cut(f"{self.where}: the connection closed before the agent's start answered")
        if started.exit_status != 0:
            raise RemoteError(f"the agent did not start on {self.where} (exit {started.exit_status}): "
                              f"{_text(started.stderr).strip()[-400:]}", title="Agent failed to start")
        log.info("agent run %s started on %s: %s", self.run_id, self.where, _text(started.stdout).strip())

    async def _records(self) -> AsyncGenerator[Record, None]:
        idle_reconnects = 0
        while self.result is None:
            if self._conn is None:
                self._conn = await self._link.reconnect()
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
                self._let_go(failed=True)
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
        argv = [self._link.python, self.agent_path, "--stop", "--pid-file", self.pid_path]
        try:
            await asyncio.wait_for(self._link.run_command(argv), timeout_s)
        except (RemoteError, TimeoutError) as exc:
            log.warning("could not stop agent run %s on %s: %s", self.run_id, self.where, exc)


def _agent_digest() -> str:
    return hashlib.sha256(AGENT_SOURCE.read_bytes()).hexdigest()[:12]
