"""One campaign under a chaos mix, then the invariants that must hold whatever went wrong.

The simulated marketplace runs in this process (real HTTP on loopback, a real asyncssh server per instance); the
console is either in this process too, built as ``vastui campaign run`` builds it, or — for mixes that disturb it —
``vastui campaign run`` as its own process, disturbed after a number of output lines: killed with SIGKILL (then
``vastui campaign resume``), given two signals 0.1 s apart, left without a reader for its output, or left with its
store on a disk that fills up (a small tmpfs). A console that ends on its own after a disturbance must say in its
last line what it left alive, and that line's command must clean it up. Afterwards, with the chaos calmed and no
request still being answered:

- no instance is alive in the marketplace;
- no approval rented twice (one instance per create approval of an offer, one instance per create label);
- every mutating request in the simulator's request log has its approval and its call in the store's audit log;
- no measurement that reached the store went missing (row counts never go down, and resume keeps them all);
- no decision was made from a correctness failure (the chosen candidate's instance computed right outputs);
- a disturbed console wrote no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sqlite3
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.campaign.small_disk import fill_disk, small_disk
from tests.chaos.chaos_mix import BROKEN_PIPE, CLIENT_TIMEOUT_S, DOUBLE_SIGNAL, FULL_DISK, KILL, Mix
from vastui.approval import Action, Approval, ApprovalRequest, AuditKind, AuditRecord
from vastui.campaign.handle import start_campaign
from vastui.campaign.session import CampaignServices, new_campaign_id, plan_campaign
from vastui.clock import ScaledClock
from vastui.config import Redactor, Secret
from vastui.errors import VastuiError
from vastui.events import Event, EventBus
from vastui.remote.runner import SshRunner
from vastui.sim.chaos import Chaos
from vastui.sim.demo import operator_key
from vastui.sim.factory import build_market_with_hosts
from vastui.sim.market import Market
from vastui.sim.middleware import SEARCH_PATHS
from vastui.sim.server import SimServer
from vastui.sim.truth import Fault
from vastui.sim.turns import LifecycleOdds
from vastui.store import SqliteStore
from vastui.vast.client import HttpVastClient, ssh_key_target

KEY = "chaos-campaign-key"
TIME_SCALE = 300.0
VASTUI = [sys.executable, "-m", "vastui"]
MEASUREMENT_TABLES = ("runs", "progress", "gpu_samples")
# A console run or a resume that lasts longer than this (wall seconds) is stuck: the campaign is reported, not waited.
CONSOLE_LIMIT_S = 240.0
RESUME_ATTEMPTS = 3
SAMPLE_EVERY_S = 0.2

NO_LEAK = "no instance alive at the end"
NO_DOUBLE_RENT = "no approval rented twice"
ALL_APPROVED = "every mutating request approved and audited"
NOTHING_LOST = "every measurement kept"
NO_WRONG_CHOICE = "no decision from a correctness failure"
NO_TRACEBACK = "no traceback from a disturbed console"
INVARIANTS = (NO_LEAK, NO_DOUBLE_RENT, ALL_APPROVED, NOTHING_LOST, NO_WRONG_CHOICE, NO_TRACEBACK)


@dataclass(slots=True)
class CampaignReport:
    mix: Mix
    outcome: str = ""
    injected: Counter[str] = field(default_factory=Counter)
    held: dict[str, bool | None] = field(default_factory=dict)  # invariant -> held (None: nothing to judge)
    problems: list[str] = field(default_factory=list)
    failed_candidates: list[str] = field(default_factory=list)  # "cid: detail" of candidates that failed
    counts: dict[str, int] = field(default_factory=dict)       # leaks, double rents, unapproved calls, lost records

    @property
    def passed(self) -> bool:
        return all(v is not False for v in self.held.values())

    def line(self) -> str:
        verdict = "ok" if self.passed else "FAILED: " + "; ".join(self.problems)
        return f"{self.mix.describe()} -> {self.outcome}; {verdict}"


class MeasurementWatch:
    """Reads the store's measurement row counts while a campaign runs: they may only grow."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.highest: dict[str, int] = dict.fromkeys(MEASUREMENT_TABLES, 0)
        self.shrank: list[str] = []
        self._task: asyncio.Task[None] | None = None

    def counts(self) -> dict[str, int] | None:
        if not self.db.exists():
            return None
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)) as conn:
                return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in MEASUREMENT_TABLES}
        except sqlite3.OperationalError:
            return None  # not migrated yet, or locked for a moment: the next look counts

    def look(self) -> None:
        now = self.counts()
        if now is None:
            return
        for table, n in now.items():
            if n < self.highest[table]:
                self.shrank.append(f"{table}: {self.highest[table]} rows, then {n}")
            self.highest[table] = max(self.highest[table], n)

    async def _watch(self) -> None:
        while True:
            self.look()
            await asyncio.sleep(SAMPLE_EVERY_S)

    def __enter__(self) -> MeasurementWatch:
        self._task = asyncio.create_task(self._watch())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        self.look()


@contextlib.asynccontextmanager
async def chaos_world(mix: Mix, work: Path, *, lifecycle_odds: LifecycleOdds | None = None,
                      time_scale: float = TIME_SCALE) -> AsyncIterator[tuple[SimServer, ScaledClock, Chaos]]:
    """The mix's simulated market, served, its chaos calm until the mix is applied (``lifecycle_odds``: how often
    its rentals take the marketplace's turns, when not the simulator's own odds)."""
    clock = ScaledClock(scale=time_scale)
    chaos = Chaos()
    market, pool = build_market_with_hosts(mix.world_seed, clock=clock, hosts_dir=work / "hosts", api_key=KEY,
                                           chaos=chaos)
    if lifecycle_odds is not None:
        market.lifecycle_odds = lifecycle_odds
    try:
        async with SimServer(market) as server:
            yield server, clock, chaos
    finally:
        await market.aclose()
        await pool.close()


async def register_operator_key(url: str, key_path: Path, db: Path, clock: ScaledClock) -> None:
    """The operator's SSH key, registered with an approval the store records (as the demo does)."""
    public = key_path.with_name(key_path.name + ".pub").read_text(encoding="utf-8").strip()
    request = ApprovalRequest(action=Action.CREATE_SSH_KEY, target=ssh_key_target(public),
                              summary="register the operator's SSH public key")
    approval = Approval(request, granted_by="chaos runner", granted_at=clock.now())
    store = await SqliteStore.open(db)
    try:
        await store.record_audit(AuditRecord(at=clock.now(), kind=AuditKind.APPROVAL, action=request.action,
                                             target=request.target, approval_id=approval.approval_id,
                                             granted_by=approval.granted_by, outcome=request.summary))
        async with HttpVastClient(base_url=url, api_key=Secret(KEY), clock=clock, audit=store) as client:
            await client.create_ssh_key(public, approval=approval)
    finally:
        await store.close()


async def run_in_process(mix: Mix, manifest: Path, work: Path, server: SimServer, clock: ScaledClock,
                         report: CampaignReport, on_event: Callable[[Event], None] | None = None,
                         transport: httpx.AsyncBaseTransport | None = None) -> tuple[str | None, Path]:
    """The console in this process: plan, run approved as a whole, receipt. Returns (chosen candidate, db)."""
    from vastui.bench.manifest import load_manifest

    db = work / "store.sqlite3"
    key_path = operator_key(work)
    await register_operator_key(server.url, key_path, db, clock)
    mix.apply(server.market.chaos)
    store = await SqliteStore.open(db)
    chosen_instance: int | None = None
    try:
        async with HttpVastClient(base_url=server.url, api_key=Secret(KEY), clock=clock, audit=store,
                                  timeout_s=CLIENT_TIMEOUT_S, transport=transport) as client:
            runner = SshRunner(known_hosts=work / "known_hosts", client_keys=[key_path], use_agent=False,
                               clock=clock, retry_interval_s=5.0, reconnect_deadline_s=120.0)
            services = CampaignServices(market=client, executor=runner, store=store, clock=clock, bus=EventBus(),
                                redact=Redactor([Secret(KEY)]), poll_s=10.0, teardown_poll_s=5.0)
            if on_event is not None:
                services.bus.listen(on_event)
            manifest_obj = load_manifest(manifest)
            try:
                plan = await plan_campaign(services, manifest=manifest_obj, campaign_id=new_campaign_id())
            except VastuiError as exc:
                report.outcome = f"no plan ({exc.message[:80]})"
                return None, db
            with MeasurementWatch(db) as watch:
                handle = start_campaign(services, manifest=manifest_obj, plan=plan, plan_approved=True,
                                        plan_approved_by="chaos runner")
                try:
                    result = await handle.result(abort_if_cancelled="the chaos runner was interrupted")
                except VastuiError as exc:
                    report.outcome = f"campaign raised {type(exc).__name__}: {exc.message[:80]}"
                    report.problems.append(report.outcome)
                    return None, db
            lost = watch.shrank + _fewer(watch.highest, watch.counts())
            _judge(report, NOTHING_LOST, not lost, lost, "lost records", len(lost))
            chosen = result.receipt.decision.chosen
            report.failed_candidates = [f"{r.cid}: {r.detail}" for r in result.outcome.runs
                                        if str(r.phase) == "failed"]
            for run in result.outcome.runs:
                if run.cid == chosen:
                    chosen_instance = run.instance_id
            why = "" if chosen else f" ({result.receipt.decision.reason[:70]})"
            report.outcome = (f"chose {chosen}" if chosen else "no decision") + why + \
                f", teardown {'passed' if result.receipt.teardown_passed else 'FAILED'}"
    finally:
        await store.close()
    return (None if chosen_instance is None else str(chosen_instance)), db


@dataclass(slots=True)
class ConsoleRun:
    campaign_id: str | None = None
    disturbed: bool = False
    status: int | None = None


async def run_disturbed(mix: Mix, manifest: Path, work: Path, server: SimServer, clock: ScaledClock,
                        report: CampaignReport, *, store_folder: Path) -> Path:
    """``vastui campaign run`` in its own process, disturbed as the mix says; then cleaned up as its operator is
    told to (``campaign resume``: after a kill always, else when the last line names instances left alive)."""
    db = store_folder / "store.sqlite3"
    key_path = operator_key(work)
    await register_operator_key(server.url, key_path, db, clock)
    mix.apply(server.market.chaos)
    env = {**os.environ, "VAST_API_KEY": KEY, "PYTHONUNBUFFERED": "1", "VASTUI_DATA_DIR": str(work / "data"),
           "VASTUI_CONFIG_DIR": str(work / "config"), "VASTAI_NO_UPDATE_CHECK": "1"}
    common = ["--url", server.url, "--db", str(db), "--ssh-key", str(key_path), "--time-scale", f"{TIME_SCALE:g}"]
    stderr_path = work / "console-stderr.txt"
    with MeasurementWatch(db) as watch:
        console = await _run_and_disturb([*VASTUI, "campaign", "run", str(manifest), "--approve-plan", *common],
                                         env=env, mix=mix, market=server.market, store_folder=store_folder,
                                         stderr_path=stderr_path)
    assert mix.disturbance is not None
    if console.disturbed:
        report.injected[mix.disturbance] += 1
    before = watch.counts()
    if before is None and mix.disturbance == FULL_DISK:
        # On a full disk a reader may fail to open the file at all: no lost row, and no count of zero. Count with
        # space for a moment, then fill the disk again, so what follows (a resume) meets the same full disk.
        (store_folder / "filler").unlink(missing_ok=True)
        before = watch.counts()
        await asyncio.to_thread(fill_disk, store_folder)
    lost = watch.shrank + _fewer(watch.highest, before)
    if before is None and any(watch.highest.values()):
        lost.append("the store could not be read at the end")
        before = dict.fromkeys(MEASUREMENT_TABLES, 0)
    errors = stderr_path.read_text(encoding="utf-8", errors="replace")
    if mix.disturbance != KILL:
        tracebacks = ["a traceback on stderr"] if "Traceback" in errors else []
        _judge(report, NO_TRACEBACK, not tracebacks, tracebacks, "tracebacks", len(tracebacks))
    if console.campaign_id is None:
        report.outcome = "disturbed before the campaign had an id"
    elif not console.disturbed:
        report.outcome = f"campaign {console.campaign_id} ended before its {mix.disturbance}"
    elif mix.disturbance == KILL:
        outcome = await _resume(console.campaign_id, common, env)
        report.outcome = f"killed, {outcome}"
        if not outcome.startswith("resumed"):
            report.problems.append(f"resume failed: {outcome}")
    else:
        report.outcome = f"{mix.disturbance}, exit {console.status}" + await _after_disturbance(
            console.campaign_id, errors, server.market, report, common, env)
    after = watch.counts()
    if after is not None and before is not None and after != before and console.disturbed and mix.disturbance == KILL:
        lost.append(f"resume changed the measurements: {before} -> {after}")
    _judge(report, NOTHING_LOST, not lost, lost, "lost records", len(lost))
    return db


async def _after_disturbance(campaign_id: str, errors: str, market: Market, report: CampaignReport,
                             common: list[str], env: dict[str, str]) -> str:
    """A console that ended on its own: what its campaign left alive must be named on its last line, and then
    removed by the resume that line gives (as an operator would run it)."""
    last = errors.strip().splitlines()[-1] if errors.strip() else ""
    await market.refresh()
    left = [i for i in market.instance_ids()
            if (st := market.instance_state(i)) is not None and (st.label or "").startswith(f"vastui-{campaign_id}-")]
    if not left:
        return ", nothing left alive"
    unnamed = [i for i in left if str(i) not in last]
    if unnamed or "campaign resume" not in last:
        report.problems.append(f"{NO_LEAK}: instances {unnamed or left} alive, not named by the last line {last!r}")
        report.held[NO_LEAK] = False
    outcome = await _resume(campaign_id, common, env)
    return f", {len(left)} named as left alive, {outcome}"


_KILL_PATHS = {"create": ("PUT", re.compile(r"^/api/v0/asks/\d+/$")),
               "destroy": ("DELETE", re.compile(r"^/api/v0/instances/\d+/$"))}


async def _run_and_disturb(args: list[str], *, env: dict[str, str], mix: Mix, market: Market, store_folder: Path,
                           stderr_path: Path) -> ConsoleRun:
    """Run the console (stdout on a pipe we read, stderr to a file); disturb it after the mix's number of lines,
    or (kill -9) the moment its first ``kill_at_request`` reaches the simulator (the request is still answered:
    the work is done, the console never hears of it)."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    with stderr_path.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(*args, stdout=write_fd, stderr=err,
                                                    stdin=asyncio.subprocess.DEVNULL, env=env)
    os.close(write_fd)
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                os.fdopen(read_fd, "rb", buffering=0))
    run = ConsoleRun()
    if mix.kill_at_request is not None:
        method, pattern = _KILL_PATHS[mix.kill_at_request]

        def kill_on(request_method: str, path: str) -> None:
            if not run.disturbed and request_method == method and pattern.match(path):
                proc.send_signal(signal.SIGKILL)
                run.disturbed = True
        market.on_request = kill_on
    seen = 0
    try:
        async with asyncio.timeout(CONSOLE_LIMIT_S):
            while line := (await reader.readline()).decode():
                if run.campaign_id is None and (m := re.match(r"campaign (c[0-9a-f]+) ", line)):
                    run.campaign_id = m.group(1)
                seen += 1
                if mix.kill_at_request is None and not run.disturbed and seen >= (mix.disturb_after_lines or 0):
                    run.disturbed = True
                    if await _disturb(mix, proc, transport, store_folder):
                        break
            run.status = await proc.wait()
    finally:
        market.on_request = None
        transport.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return run


async def _disturb(mix: Mix, proc: asyncio.subprocess.Process, transport: asyncio.ReadTransport,
                   store_folder: Path) -> bool:
    """Do the mix's disturbance; True when the runner stops reading the console's output."""
    if mix.disturbance == KILL:
        proc.send_signal(signal.SIGKILL)
        return True
    if mix.disturbance == DOUBLE_SIGNAL:
        signum = signal.SIGINT if mix.seed % 2 == 0 else signal.SIGTERM   # Ctrl-C twice, or a manager's SIGTERMs
        proc.send_signal(signum)
        await asyncio.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):   # it may have finished between the two
            proc.send_signal(signum)
        return False
    if mix.disturbance == BROKEN_PIPE:
        transport.close()   # `| head`: the reader is gone
        if mix.seed % 2 == 1:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)   # `| tee` and Ctrl-C: the reader dies with the signal
        return True
    if mix.disturbance == FULL_DISK:
        await asyncio.to_thread(fill_disk, store_folder)
        return False
    raise ValueError(f"unknown disturbance {mix.disturbance!r}")


async def _resume(campaign_id: str, common: list[str], env: dict[str, str]) -> str:
    """``vastui campaign resume``, again if the chaos made it fail (an operator would run it again)."""
    last = ""
    for attempt in range(1, RESUME_ATTEMPTS + 1):
        proc = await asyncio.create_subprocess_exec(
            *VASTUI, "campaign", "resume", campaign_id, "--approve-plan", *common, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        async with asyncio.timeout(CONSOLE_LIMIT_S):
            out, err = await proc.communicate()
        text = (out + err).decode(errors="replace")
        if proc.returncode == 0:
            return f"resumed ({attempt} attempt{'s' if attempt > 1 else ''})"
        if "no campaign" in text:
            return "resumed (no campaign was recorded: nothing to clean)"
        last = f"rc {proc.returncode}: {text.strip().splitlines()[-1] if text.strip() else ''}"
    return f"resume failed {RESUME_ATTEMPTS} times, last {last}"


def _fewer(highest: dict[str, int], now: dict[str, int] | None) -> list[str]:
    if now is None:
        return []
    return [f"{t}: {highest[t]} rows seen, {now[t]} at the end" for t in MEASUREMENT_TABLES if now[t] < highest[t]]


def _judge(report: CampaignReport, invariant: str, held: bool | None, problems: list[str], counter: str,
           n: int) -> None:
    report.held[invariant] = held
    report.counts[counter] = report.counts.get(counter, 0) + n
    report.problems.extend(f"{invariant}: {p}" for p in problems)


_CREATE = re.compile(r"^/api/v0/asks/(\d+)/$")
_ONE_INSTANCE = re.compile(r"^/api/v0/instances/(\d+)/$")


def _actions_of(method: str, path: str) -> tuple[set[Action], str | None] | None:
    """The approvable actions a mutating request may be, and its target (None: any); None when not a mutation."""
    if path in SEARCH_PATHS or path.startswith("/api/v0/instances/request_logs/"):
        return None  # reads sent as PUT/POST
    if method == "PUT" and (m := _CREATE.match(path)):
        return {Action.CREATE_INSTANCE}, f"offer:{m.group(1)}"
    if method == "DELETE" and (m := _ONE_INSTANCE.match(path)):
        return {Action.DESTROY_INSTANCE}, f"instance:{m.group(1)}"
    if method == "PUT" and (m := _ONE_INSTANCE.match(path)):
        return {Action.STOP_INSTANCE, Action.START_INSTANCE, Action.LABEL_INSTANCE}, f"instance:{m.group(1)}"
    if method == "POST" and path == "/api/v0/ssh/":
        return {Action.CREATE_SSH_KEY}, None
    return set(), path  # a mutation nothing in vastui should send


async def check_market(report: CampaignReport, market: Market, db: Path, chosen_instance: str | None) -> None:
    """The invariants judged from the marketplace's side (and the store's audit log)."""
    market.chaos.calm()
    async with asyncio.timeout(60):
        while market.requests_in_flight:  # a slow reply may still be about to apply its work
            await asyncio.sleep(0.05)
    await market.refresh()
    alive = market.instance_ids()
    unnamed = report.held.get(NO_LEAK) is False   # a console's last line hid what it left (see _after_disturbance)
    _judge(report, NO_LEAK, not alive and not unnamed, [f"instances {alive} still exist"] if alive else [], "leaks",
           len(alive))
    store = await SqliteStore.open(db)
    try:
        audit = await store.audit_records()
    finally:
        await store.close()
    approvals = Counter((r.action, r.target) for r in audit if r.kind is AuditKind.APPROVAL)
    calls = Counter((r.action, r.target) for r in audit if r.kind in (AuditKind.SENDING, AuditKind.CALL))
    created = market.every_instance()
    doubles = []
    per_offer = Counter(f"offer:{st.machine.offer_id}" for st in created)
    for target, n in per_offer.items():
        if n > approvals[(Action.CREATE_INSTANCE, target)]:
            doubles.append(f"{n} instances on {target} for {approvals[(Action.CREATE_INSTANCE, target)]} approval(s)")
    labels = Counter(st.label for st in created)
    doubles += [f"{n} instances labelled {label}" for label, n in labels.items() if n > 1]
    _judge(report, NO_DOUBLE_RENT, not doubles, doubles, "double rents", len(doubles))
    unapproved = []
    assert market.request_log.dropped == 0, "the request log dropped records the check needs"
    for record in market.request_log:
        if not record.is_mutating:
            continue
        what = _actions_of(record.method, record.path)
        if what is None:
            continue
        actions, aimed = what
        if not any(a == action and (aimed is None or t == aimed) for (a, t) in approvals for action in actions):
            unapproved.append(f"{record.method} {record.path} ({record.status}) has no approval")
        elif not any(a == action and (aimed is None or t == aimed) for (a, t) in calls for action in actions):
            unapproved.append(f"{record.method} {record.path} ({record.status}) has no audited call")
    _judge(report, ALL_APPROVED, not unapproved, unapproved, "unapproved calls", len(unapproved))
    if chosen_instance is None:
        report.held[NO_WRONG_CHOICE] = None
    else:
        st = market.instance_state(int(chosen_instance))
        wrong = st is not None and st.machine.truth.fault is Fault.WRONG_OUTPUT
        _judge(report, NO_WRONG_CHOICE, not wrong, [f"instance {chosen_instance} computes wrong outputs"] if wrong
               else [], "wrong choices", int(wrong))
    report.injected.update(market.chaos.injected)


async def run_chaos_campaign(mix: Mix, *, manifest: Path, work: Path,
                             on_event: Callable[[Event], None] | None = None,
                             transport: httpx.AsyncBaseTransport | None = None,
                             lifecycle_odds: LifecycleOdds | None = None,
                             time_scale: float = TIME_SCALE) -> CampaignReport:
    """One campaign of ``mix`` in ``work`` (a fresh folder), judged; ``on_event`` sees an in-process console's
    events. ``time_scale``: another clock for an in-process campaign only (a disturbed console's CLI runs at
    TIME_SCALE)."""
    if mix.disturbs_console and time_scale != TIME_SCALE:
        raise ValueError(f"a disturbed console runs at x{TIME_SCALE:g}, not x{time_scale:g}")
    report = CampaignReport(mix)
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        store_folder = stack.enter_context(small_disk(work / "disk")) if mix.disturbance == FULL_DISK else work
        async with chaos_world(mix, work, lifecycle_odds=lifecycle_odds, time_scale=time_scale) as (server, clock,
                                                                                                   _chaos):
            if mix.disturbs_console:
                db = await run_disturbed(mix, manifest, work, server, clock, report, store_folder=store_folder)
                chosen = None
                (store_folder / "filler").unlink(missing_ok=True)   # space again: the journal is folded in
            else:
                chosen, db = await run_in_process(mix, manifest, work, server, clock, report, on_event, transport)
            await check_market(report, server.market, db, chosen)
    report.held.setdefault(NOTHING_LOST, True)
    report.held.setdefault(NO_TRACEBACK, None)
    return report


_ENDED_ALONE = (DOUBLE_SIGNAL, BROKEN_PIPE, FULL_DISK)


def summary(reports: list[CampaignReport]) -> str:
    """Faults injected by kind, outcomes, and each invariant held (counts), for a run of campaigns."""
    injected: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for r in reports:
        injected.update(r.injected)
        totals.update(r.counts)
    seeds = [r.mix.seed for r in reports]
    disturbed = Counter(r.mix.disturbance for r in reports if r.mix.disturbs_console)
    lines = [f"chaos campaigns: {len(reports)} (seeds {min(seeds)}-{max(seeds)}), {sum(disturbed.values())} with the "
             "console disturbed in its own process (" + (", ".join(f"{k} {n}" for k, n in sorted(disturbed.items()))
                                                         or "none") + ")",
             "faults injected: " + (", ".join(f"{k} {n}" for k, n in sorted(injected.items())) or "none"),
             f"outcomes: {sum(r.outcome.startswith('chose') for r in reports)} chose a profile, "
             f"{sum(r.outcome.startswith('no decision') for r in reports)} no decision, "
             f"{sum(r.outcome.startswith('killed,') for r in reports)} killed and resumed, "
             f"{sum(r.outcome.startswith(_ENDED_ALONE) for r in reports)} disturbed and ended on their own, "
             f"{sum(r.outcome.startswith('no plan') for r in reports)} no plan, "
             f"{sum(not r.outcome.startswith(('chose', 'no decision', 'killed,', 'no plan', *_ENDED_ALONE)) for r in reports)} other",
             "invariants:"]
    for invariant in INVARIANTS:
        judged = [r.held.get(invariant) for r in reports]
        held = sum(v is True for v in judged)
        n_judged = sum(v is not None for v in judged)
        lines.append(f"  {invariant}: held in {held} of {n_judged} campaigns"
                     + (f" ({len(judged) - n_judged} with nothing to judge)" if n_judged < len(judged) else ""))
    lines.append(f"leaks {totals['leaks']}, double rents {totals['double rents']}, lost records "
                 f"{totals['lost records']}, unapproved calls {totals['unapproved calls']}, decisions from a "
                 f"correctness failure {totals['wrong choices']}, tracebacks {totals['tracebacks']}")
    failed = [r for r in reports if not r.passed]
    lines.append(f"campaigns failed: {len(failed)}" + "".join(f"\n  {r.line()}" for r in failed))
    return "\n".join(lines)
