"""No instance outlives its reason: the operator's ordinary habits cannot stop a campaign's teardown.

Each case runs `vastui campaign run --headless --approve-plan` as its own process against a `vastui sim` process
(which outlives it, as Vast.ai would) and disturbs it mid-race or mid-teardown: two SIGTERMs 0.1 s apart, Ctrl-C
twice, SIGHUP, the reader of its output exiting (`| head`, `| tee` and Ctrl-C), the terminal going away under it
(a pty whose master closes: EIO on every write), and its store's filesystem filling up. Afterwards the marketplace
lists none of its instances — or the process's last line names every one left alive and `vastui campaign resume`
removes them — and nothing it wrote to stderr is a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import shlex
import signal
import sqlite3
import struct
import subprocess
import termios
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.campaign.sim_process import VASTUI, alive, operator_key, register_key, sim_process
from tests.campaign.small_disk import CannotMount, fill_disk, small_disk
from vastui.approval import Action, AuditKind
from vastui.store import SqliteStore

KEY = "interrupts-test-key"
TIME_SCALE = "300"
RACE = ": measuring"                   # a candidate is measuring: instances are rented and working
TEARDOWN = "teardown: destroying"       # the campaign's teardown has begun
GUARD_S = 180                           # a hang guard, never a speed check


@pytest.fixture
async def market(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    async with sim_process(key=KEY, seed=11, time_scale=TIME_SCALE) as url:
        key = operator_key(tmp_path)
        await register_key(url, KEY, key)
        yield url, key


def _command(url: str, key: Path, db: Path, manifest: Path) -> list[str]:
    return [*VASTUI, "campaign", "run", str(manifest), "--approve-plan", "--headless", "--url", url,
            "--api-key", KEY, "--db", str(db), "--ssh-key", str(key), "--time-scale", TIME_SCALE]


@dataclass(slots=True)
class Lines:
    """Output lines read so far from a child, by a reader thread; ``wait_for`` blocks until one contains text."""

    seen: list[str] = field(default_factory=list)
    ended: bool = False
    cond: threading.Condition = field(default_factory=threading.Condition)

    def feed(self, line: str) -> None:
        with self.cond:
            self.seen.append(line)
            self.cond.notify_all()

    def end(self) -> None:
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def wait_for(self, text: str) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: self.ended or any(text in line for line in self.seen), timeout=GUARD_S)
        assert ok and any(text in line for line in self.seen), (
            f"never saw {text!r}:\n" + "".join(self.seen[-30:]))


@dataclass(slots=True)
class Run:
    process: subprocess.Popen[bytes]
    lines: Lines
    stop_reading: Callable[[], None]   # the reader goes away (pipe closed / pty master closed)


@contextlib.contextmanager
def _start(command: list[str], *, output: str, stderr_file: Path) -> Iterator[Run]:
    """Start the campaign with its stdout on a pipe (``output="pipe"``) or a pty (``"pty"``); stderr to a file
    (``"pipe"``/``"pty"``) or merged into the pipe (``"merged"``)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    lines = Lines()
    if output == "pty":
        master, slave = pty.openpty()
        read_fd = master
        with stderr_file.open("wb") as err:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=slave, stderr=err, env=env)
        os.close(slave)
    else:
        read_fd, write_fd = os.pipe()
        with stderr_file.open("wb") as err:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=write_fd,
                                       stderr=write_fd if output == "merged" else err, env=env)
        os.close(write_fd)
    reader = os.fdopen(read_fd, "rb", buffering=0)
    closed = threading.Event()

    def read() -> None:
        buffer = b""
        try:
            while not closed.is_set():
                chunk = reader.read(4096)
                if not chunk:
                    break
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    lines.feed(line.decode(errors="replace") + "\n")
        except OSError:   # EIO once the pty's child side is gone, or our own close
            pass
        lines.end()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()

    def stop_reading() -> None:
        closed.set()
        with contextlib.suppress(OSError):
            reader.close()

    try:
        yield Run(process, lines, stop_reading)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        # The child's last lines may still be in the pipe when it has exited: read on to the end (EOF, or EIO on a
        # pty) before closing, or on a busy machine the line a test judges is lost and an earlier one read as last.
        thread.join(timeout=GUARD_S)
        stop_reading()


@contextlib.contextmanager
def _small_filesystem(folder: Path) -> Iterator[Path]:
    try:
        with small_disk(folder) as mounted:
            yield mounted
    except CannotMount as exc:   # the suite runs as root in CI; a machine without mount rights cannot do this case
        pytest.skip(f"cannot mount a small tmpfs here: {exc}")


# Each case: how output is connected, and what happens at the race and at the teardown (None: nothing).
Act = Callable[[Run, Path], None]


def _signal(signum: int, *, times: int = 1, apart_s: float = 0.1) -> Act:
    def act(run: Run, _folder: Path) -> None:
        for i in range(times):
            if i:
                threading.Event().wait(apart_s)
            run.process.send_signal(signum)
    return act


def _reader_exits(run: Run, _folder: Path) -> None:
    run.stop_reading()


def _reader_exits_then_ctrl_c(run: Run, _folder: Path) -> None:
    run.stop_reading()           # `| tee log`: Ctrl-C kills tee too, so the next write meets a broken pipe
    run.process.send_signal(signal.SIGINT)


def _disk_fills(_run: Run, folder: Path) -> None:
    fill_disk(folder)


async def _every_destroy_is_on_record(db: Path) -> None:
    """Each instance the campaign rented has its destroy in the audit log: written there (SQLite can still reuse
    the WAL's pages on a full disk), or kept in the fallback journal and folded in now."""
    async with await SqliteStore.open(db) as store:
        records = await store.audit_records()
    with sqlite3.connect(db) as conn:
        rented = {f"instance:{i}" for (i,) in conn.execute(
            "SELECT instance_id FROM intents WHERE instance_id IS NOT NULL")}
    destroyed = {r.target for r in records if r.action is Action.DESTROY_INSTANCE and r.kind is AuditKind.CALL}
    assert rented and rented <= destroyed, (rented, destroyed)


@dataclass(frozen=True, slots=True)
class Case:
    output: str                      # "merged" (stdout and stderr on one pipe we read), "pipe" or "pty" (stderr to a file)
    at_race: Act
    at_teardown: Act | None = None   # None: the teardown is left alone
    stopped_by: int | None = None    # the signal the exit status must name (128 + it)


def _nothing(_run: Run, _folder: Path) -> None:
    pass


TERM, INT, HUP = signal.SIGTERM, signal.SIGINT, signal.SIGHUP
CASES = {
    "two SIGTERMs 0.1 s apart mid-race": Case("merged", _signal(TERM, times=2), stopped_by=TERM),
    "SIGTERM mid-race, SIGTERM mid-teardown": Case("merged", _signal(TERM), _signal(TERM), stopped_by=TERM),
    "Ctrl-C twice mid-race": Case("merged", _signal(INT, times=2), stopped_by=INT),
    "Ctrl-C mid-race, Ctrl-C mid-teardown": Case("merged", _signal(INT), _signal(INT), stopped_by=INT),
    # the third Ctrl-C comes within the force window of the answer to the second: the operator leaves at once
    "Ctrl-C three times mid-race: force-quit": Case("merged", _signal(INT, times=3, apart_s=0.05), stopped_by=INT),
    "SIGHUP mid-race": Case("merged", _signal(HUP), stopped_by=HUP),
    "Ctrl-C mid-race, SIGHUP mid-teardown": Case("merged", _signal(INT), _signal(HUP), stopped_by=INT),
    "| tee and Ctrl-C mid-race": Case("pipe", _reader_exits_then_ctrl_c, stopped_by=INT),
    "| head: the reader exits mid-race": Case("pipe", _reader_exits),
    "| head: the reader exits mid-teardown": Case("pipe", _nothing, _reader_exits),
    "the terminal goes away mid-race (EIO)": Case("pty", _reader_exits),
    "SIGTERM mid-race, the terminal goes away mid-teardown": Case("pty", _signal(TERM), _reader_exits,
                                                                   stopped_by=TERM),
    "the disk fills mid-race": Case("merged", _disk_fills),
    "SIGTERM mid-race, the disk fills mid-teardown": Case("merged", _signal(TERM), _disk_fills, stopped_by=TERM),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
async def test_the_teardown_outlives_the_operators_habits(case: str, market: tuple[str, Path],
                                                          tmp_path: Path) -> None:
    url, key = market
    this = CASES[case]
    output, at_race, at_teardown = this.output, this.at_race, this.at_teardown
    manifest = fast_manifest(tmp_path / "m")
    stderr_file = tmp_path / "stderr.txt"
    with contextlib.ExitStack() as stack:
        folder = (stack.enter_context(_small_filesystem(tmp_path / "small")) if _disk_fills in (at_race, at_teardown)
                  else tmp_path)
        db = folder / "store.sqlite3"
        run = stack.enter_context(_start(_command(url, key, db, manifest), output=output, stderr_file=stderr_file))

        def drive() -> int:
            run.lines.wait_for(RACE)
            at_race(run, folder)
            if at_teardown is not None:
                run.lines.wait_for(TEARDOWN)
                at_teardown(run, folder)
            return run.process.wait(timeout=GUARD_S)

        status = await asyncio.to_thread(drive)
        if folder is not tmp_path:   # the disk filled: free it, and the next open folds the journal into the log
            (folder / "filler").unlink()
            await _every_destroy_is_on_record(db)
        stack.close()
        seen = "".join(run.lines.seen) + stderr_file.read_text(errors="replace")
    assert "Traceback" not in seen, seen[-3000:]
    left = await alive(url, KEY)
    if left:
        # Then the last line must have said so, naming each one, with the command that removes them.
        last = seen.strip().splitlines()[-1]
        assert all(str(instance_id) in last for instance_id, _label in left), (left, last)
        command = shlex.split(last.split("run: ", 1)[1])
        assert command[:3] == ["vastui", "campaign", "resume"]
        resume = await asyncio.to_thread(
            subprocess.run, [*VASTUI, *command[1:], "--approve-plan", "--api-key", KEY, "--ssh-key", str(key)],
            capture_output=True, text=True, timeout=GUARD_S, stdin=subprocess.DEVNULL)
        assert resume.returncode == 0, resume.stdout + resume.stderr
        assert await alive(url, KEY) == []
    if this.stopped_by is not None:
        assert status == 128 + this.stopped_by, seen[-2000:]
    if output == "merged" and not left:
        last = seen.strip().splitlines()[-1]
        # A force-quit that lands after the destroys went out (a busy machine delays the signals) cannot know they
        # took: its last line names them as possibly billing, with the resume, though the marketplace lists none.
        forced = this.stopped_by is not None and "FORCE-QUIT" in last and "vastui campaign resume" in last
        assert re.search(r"campaign c\w+: every instance it rented \(\d+\) was destroyed and proven gone$",
                         last) or status == 0 or forced, seen[-2000:]


def _controlling_terminal() -> None:   # in the child, after setsid: its stdin (the pty) becomes its terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@pytest.mark.slow
async def test_closing_the_terminal_under_the_console_tears_the_campaign_down(market: tuple[str, Path],
                                                                              tmp_path: Path) -> None:
    """The console on a real pty that is the process's controlling terminal; the terminal closes mid-race (a
    closed window, `tmux kill-session`): the kernel's SIGHUP, then EIO on every write. The campaign is torn down
    and proven gone, its receipt written, before the process exits."""
    url, key = market
    db = tmp_path / "store.sqlite3"
    command = _command(url, key, db, fast_manifest(tmp_path / "m"))
    command.remove("--headless")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                               preexec_fn=_controlling_terminal, env={**os.environ, "TERM": "xterm-256color"})
    os.close(slave)

    def drive() -> int:
        screen = b""
        with contextlib.suppress(OSError):
            while b"measuring" not in screen:
                ready, _, _ = select.select([master], [], [], GUARD_S)
                assert ready, "the console never showed a candidate measuring"
                screen += os.read(master, 65536)
        os.close(master)   # the terminal goes away
        return process.wait(timeout=GUARD_S)

    try:
        status = await asyncio.to_thread(drive)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert status == 128 + signal.SIGHUP
    assert await alive(url, KEY) == []
    with sqlite3.connect(db) as conn:
        ((campaign_id, phase),) = conn.execute("SELECT campaign_id, phase FROM campaigns").fetchall()
        (receipt,) = conn.execute("SELECT json_text FROM receipts WHERE campaign_id = ?", (campaign_id,)).fetchone()
    assert phase == "finished"
    data = json.loads(receipt)
    assert data["teardown_passed"] is True and data["leaked_instance_ids"] == []
