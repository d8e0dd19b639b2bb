"""No secret anywhere: a campaign on the simulator with a recognisable fake API key, then every place a secret could
end up is searched for that key and for the instance API keys the marketplace handed out — stdout and stderr, the
SQLite database with its WAL and SHM files (read while the campaign runs, before a checkpoint folds them away),
every file under the data folder, exception texts, log records, the command line (and environment) of every
process on the machine while the console runs, and the console's screen.

The key reaches the console the way an operator's does, from the official CLI's key file (mode 0600): never argv.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from vastui.approval import Action, Approval, ApprovalRequest
from vastui.config import Secret
from vastui.sim.demo import demo_world, open_demo, operator_key
from vastui.sim.market import Market
from vastui.vast.client import HttpVastClient, ssh_key_target

FAKE_KEY = "vastui-FAKE-KEY-3b9e1c7d5a2f4e60"     # recognisable anywhere it leaks
TIME_SCALE = 300.0
_DESTROY = re.compile(r"^/api/v0/instances/(\d+)/$")


def instance_keys(market: Market) -> list[str]:
    """The instance API keys the simulator handed out in its create answers (one per instance it rented)."""
    ids = {int(m.group(1)) for r in market.request_log if r.method == "DELETE" and (m := _DESTROY.match(r.path))}
    keys = [state.api_key for i in sorted(ids) if (state := market.instance_state(i)) is not None]
    assert keys and all(len(key) >= 32 for key in keys)
    return keys


class ProcessWatch:
    """Reads the command line and environment of every process it may read, over and over, while the console runs;
    remembers any that held a secret."""

    def __init__(self, secrets: list[bytes]) -> None:
        self.secrets = secrets
        self.hits: list[str] = []
        self.processes_seen: set[int] = set()

    def look(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            for part in ("cmdline", "environ"):
                try:
                    data = Path(entry.path, part).read_bytes()
                except OSError:
                    continue
                self.processes_seen.add(int(entry.name))
                for secret in self.secrets:
                    if secret in data:
                        self.hits.append(f"pid {entry.name} {part}: {data[:200]!r}")


async def _failing_calls(url: str) -> list[str]:
    """Exception texts (message, repr and the formatted traceback) of calls that fail while carrying the key: a key
    the marketplace refuses, a rent of an offer that does not exist, an address nothing listens on."""
    from tests.fakes import FakeClock
    from vastui.errors import VastuiError

    texts: list[str] = []
    wrong = HttpVastClient(base_url=url, api_key=Secret(FAKE_KEY + "x"), clock=FakeClock())
    right = HttpVastClient(base_url=url, api_key=Secret(FAKE_KEY), clock=FakeClock())
    nowhere = HttpVastClient(base_url="http://127.0.0.1:9", api_key=Secret(FAKE_KEY), clock=FakeClock(),
                             max_attempts=1)
    rent = Approval(ApprovalRequest(action=Action.CREATE_INSTANCE, target="offer:1", summary="t"), granted_by="t",
                    granted_at=0.0)
    for client, call in ((wrong, wrong.get_user()), (nowhere, nowhere.list_ssh_keys()),
                         (right, right.create_instance(offer_id=1, image="i", disk_gib=1, label="l",
                                                       approval=rent))):
        try:
            await call
        except VastuiError as exc:
            texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
        finally:
            await client.aclose()
    assert len(texts) == 9, texts
    return texts


def database_files(data_dir: Path) -> list[Path]:
    return [p for p in data_dir.rglob("*") if p.is_file()]


@pytest.mark.slow
async def test_a_campaign_leaves_the_api_key_nowhere(tmp_path: Path) -> None:
    home = tmp_path / "operator"
    key_file = home / ".config" / "vastai" / "vast_api_key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text(FAKE_KEY + "\n")
    key_file.chmod(0o600)
    data_dir, db = tmp_path / "data", tmp_path / "data" / "campaign.sqlite3"
    manifest = fast_manifest(tmp_path / "m", max_candidates=2)
    ssh_key = operator_key(tmp_path)
    env = {**os.environ, "HOME": str(home), "VASTUI_DATA_DIR": str(data_dir), "VASTUI_CONFIG_DIR": str(home / "c")}
    env.pop("VAST_API_KEY", None)
    watch = ProcessWatch([FAKE_KEY.encode()])
    seen_in_wal: list[str] = []
    wal_reads = 0

    async with demo_world(seed=7, time_scale=TIME_SCALE, work_dir=tmp_path / "world", api_key=FAKE_KEY) as (
            server, clock):
        public = Path(str(ssh_key) + ".pub").read_text().strip()
        async with HttpVastClient(base_url=server.url, api_key=Secret(FAKE_KEY), clock=clock) as setup:
            approval = Approval(ApprovalRequest(action=Action.CREATE_SSH_KEY, target=ssh_key_target(public),
                                                summary="the operator's key (test setup)"),
                                granted_by="test", granted_at=clock.now())
            await setup.create_ssh_key(public, approval=approval)
        argv = [sys.executable, "-m", "vastui", "campaign", "run", str(manifest), "--approve-plan", "--json",
                "--url", server.url, "--db", str(db), "--ssh-key", str(ssh_key), "--time-scale", str(TIME_SCALE)]
        process = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                       stderr=subprocess.PIPE, env=env)
        communicate = asyncio.ensure_future(process.communicate())
        async with asyncio.timeout(300):   # a guard against a hang, not a speed check
            while not communicate.done():
                watch.look()
                for path in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
                    with contextlib.suppress(OSError):
                        data = path.read_bytes()
                        wal_reads += bool(data)
                        if FAKE_KEY.encode() in data:
                            seen_in_wal.append(path.name)
                await asyncio.wait({communicate}, timeout=0.05)
            stdout, stderr = communicate.result()
        market = server.market
        keys = [FAKE_KEY, *instance_keys(market)]

    # A whole campaign ran: rented, SSH, canary, measuring, teardown proven, receipt. (Its scaled clock starts after
    # the simulator's, so it may judge its deadlines early and choose nothing — exit 5 — which is not under test.)
    assert process.returncode in (0, 5), stderr.decode()[-3000:]
    assert '"teardown_passed": true' in stdout.decode() and b": measuring" in stderr
    assert FAKE_KEY not in " ".join(argv)
    assert process.pid in watch.processes_seen and watch.hits == []
    assert wal_reads > 0 and seen_in_wal == []
    for name, text in (("stdout", stdout), ("stderr", stderr)):
        for key in keys:
            assert key.encode() not in text, f"a key in {name}"
    files = database_files(data_dir)
    assert db in files
    for path in files:                     # the database (and any WAL left), receipts stored in it, anything else
        data = path.read_bytes()
        for key in keys:
            assert key.encode() not in data, f"a key in {path}"


@pytest.mark.slow
async def test_the_console_screen_logs_and_errors_hold_no_key(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    from textual.pilot import Pilot

    from vastui.cli.campaign_console import console_settings
    from vastui.tui.app import VastuiApp
    from vastui.tui.services import ConsoleServices

    caplog.set_level(logging.DEBUG)
    screens: list[str] = []
    async with open_demo(seed=7, time_scale=TIME_SCALE, data_dir=tmp_path / "data", api_key=FAKE_KEY,
                         manifest_path=fast_manifest(tmp_path / "m", max_candidates=2)) as demo:
        handle = demo.start(plan_approved=True)
        services = ConsoleServices(market=demo.client, clock=demo.services.clock, bus=demo.services.bus,
                            store=demo.services.store, audit=demo.services.store)
        app = VastuiApp(services=services, settings=console_settings(time_scale=TIME_SCALE), campaign=handle)
        pilot: Pilot[None]
        async with app.run_test(size=(160, 50)) as pilot:
            async with asyncio.timeout(300):   # a guard against a hang, not a speed check
                while not handle.is_done:
                    screens.append(app.export_screenshot())
                    await pilot.pause(0.2)
            await pilot.pause()
            for view in ("campaign", "instances", "account", "receipt"):
                with contextlib.suppress(Exception):
                    await pilot.press(*view[:1])
                    await pilot.pause()
                screens.append(app.export_screenshot())
        result = await handle.result()
        keys = [FAKE_KEY, *instance_keys(demo.market)]
        errors = [run.failure or "" for run in result.outcome.runs]
        errors += await _failing_calls(demo.client.base_url)
    assert result.receipt.teardown_passed and len(screens) > 2
    texts = {"screen": "\n".join(screens), "logs": "\n".join(r.getMessage() for r in caplog.records),
             "errors": "\n".join([*errors, str(result.receipt.decision.reason)])}
    assert texts["logs"], "the client logs its requests at DEBUG: nothing was captured"
    for where, text in texts.items():
        for key in keys:
            assert key not in text, f"a key on the {where}"


def test_the_process_watch_finds_a_key_in_a_command_line() -> None:
    """The watch above can fail: a process that carries the key in argv is found."""
    process = subprocess.Popen([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()",
                                FAKE_KEY], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"  # it runs: argv is its own
        watch = ProcessWatch([FAKE_KEY.encode()])
        watch.look()
        assert any(f"pid {process.pid} cmdline" in hit for hit in watch.hits)
    finally:
        process.communicate(b"")
