"""One candidate's life: rent, wait for loading and SSH, canary, warm-up, measurement blocks — and its failures.

Every duration comes from the marketplace (start_date) and the agent's records (``t``), never from the console's
own wall clock. Any failure before a measurement ends with the instance destroyed; the host is recorded as bad when
the failure is the host's, not the workload's (``blame.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import re
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from vastui.approval import Action, ApprovalRequest, Approver, offer_target
from vastui.bench.inputs import check_pinned, pinned_chunks
from vastui.bench.manifest import Manifest
from vastui.bench.tuning import Profile
from vastui.campaign.blame import Failure, FailureKind
from vastui.campaign.labels import build_label
from vastui.campaign.live import record_event
from vastui.campaign.measure import MeasuredBlock
from vastui.campaign.plan import CANARY_STEPS, DESTROY_MARGIN_S, Candidate, readiness_deadline_s
from vastui.campaign.ports import CampaignStore, HostConnection, HostExecutor, Marketplace, Record
from vastui.campaign.startup import RENTED_DISK_GIB, LoadingSplit, StartupParts, split_loading
from vastui.clock import Clock
from vastui.errors import (
    ApiError,
    AuthError,
    CreateFailed,
    CreateUncertain,
    InputChanged,
    RateLimited,
    RemoteError,
    VastuiError,
)
from vastui.events import CandidatePhaseChanged, EventBus, InstanceRented, InstanceStatusChanged
from vastui.remote.protocol import GpuSample, Phase, Progress, Result
from vastui.store.records import GpuSample as StoredSample
from vastui.store.records import ProgressRecord
from vastui.vast.models import Instance, InstanceStatus

POLL_S = 10.0
DEADLINE_CHECK_S = 30.0   # campaign-clock seconds between looks at the deadline while a phase emits nothing
DEAD_STATUSES = frozenset({InstanceStatus.EXITED, InstanceStatus.OFFLINE})
# ``unknown`` means "no recent heartbeat" and is often transient on the real service (the official self-test keeps
# waiting on it); an instance that reads unknown this long in a row while loading is taken for dead. Two minutes:
# several polls (POLL_S) of a lapse the simulator and the live service show for seconds, well inside any readiness
# deadline, so a dead host is not waited on for the whole of it.
UNKNOWN_GRACE_S = 120.0
# ``show instance`` may answer ``{"instances": null}`` right after a create, before the row exists; so many null
# answers in a row (before any row was seen) are waited out, a poll apart, before the instance counts as vanished.
NULL_SHOWS_AFTER_CREATE = 3
# Error words in ``status_msg`` while loading (pull and runtime errors: "OCI runtime create failed", "... failed"):
# the official self-test aborts on them, and such an instance never runs.
STATUS_MSG_ERROR = re.compile(r"\b(error|failed|failure|oci runtime)\b", re.IGNORECASE)
BAD_HOST_TTL_S = 7 * 24 * 3600.0
# A canary that runs this long (campaign clock) without finishing its steps is the workload's evidence (two of them
# halt the campaign); a shorter one was cut short by the instance's deadline and is the rental's bad luck.
CANARY_FAIR_S = 300.0


class CandidatePhase(enum.StrEnum):
    WAITING = "waiting"
    RENTING = "renting"
    LOADING = "loading"
    SSH = "ssh"
    CANARY = "canary"
    MEASURING = "measuring"
    TUNING = "tuning"
    DONE = "done"
    ELIMINATED = "eliminated"
    FAILED = "failed"
    SKIPPED = "skipped"
    ABORTED = "aborted"


class ScreeningPart(enum.StrEnum):
    """What a candidate done measuring does while the knobs are screened (the phase stays ``MEASURING``; its detail
    says it in words): the benchmark's spend breakdown reads this, not the words."""

    HELPING = "helping"    # playing the screening's A/B pairs on its own instance
    WAITING = "waiting"    # held for the screening's verdict


class NotRented(enum.StrEnum):
    """Why a candidate was never rented (its phase is ``SKIPPED``): the engine and the tests read this; people read
    the phase's detail, which says it with the particulars."""

    STOPPED = "stopped"               # the operator's abort or the campaign's halt came before its turn
    RACE_DECIDED = "race decided"     # the race was decided before its turn
    PASSED_OVER = "passed over"       # its chance of beating the measured leader was below the miss probability
    OVER_BUDGET = "over budget"       # its worst case could exceed the budget (before asking, or once granted)
    NOT_APPROVED = "not approved"     # the operator (or the plan's rules) refused the rent
    RATE_LIMITED = "rate limited"     # the marketplace answered 429: nothing was rented, the offer is not blamed
    REFUSED = "refused"               # the marketplace refused the offer (and no reserve was left)
    NOT_SCHEDULED = "not scheduled"   # scheduling could not place it, asked twice (and no reserve was left)
    VANISHED = "vanished"             # the offer was gone (and no reserve was left)


class CandidateFailed(VastuiError):
    """The candidate failed a gate (readiness, SSH, canary); ``bad_host`` says whether the host is to blame when
    the workload is not (``blame.WorkloadJudge`` decides that); ``failure`` is the evidence compared between
    candidates (by default a host failure when the host is blamed, else another one)."""

    def __init__(self, message: str, *, bad_host: bool, failure: Failure | None = None,
                 evidence: Mapping[str, object] | None = None) -> None:
        super().__init__(message, title="Candidate failed")
        self.bad_host = bad_host
        self.failure = failure or Failure(FailureKind.HOST if bad_host else FailureKind.OTHER)
        self.evidence = dict(evidence or {})


@dataclass(slots=True)
class CandidateRun:
    """What one candidate has become so far (mutable: the engine and the receipt read it)."""

    candidate: Candidate
    phase: CandidatePhase = CandidatePhase.WAITING
    instance_id: int | None = None
    instance: Instance | None = None
    rented_at: float | None = None          # marketplace clock (start_date)
    ready_at: float | None = None           # agent clock, first record of the canary (the agent started)
    running_seen_at: float | None = None    # campaign clock: the first listing that showed ``running``
    loading: LoadingSplit | None = None     # pull / readiness from the instance's log
    workload_init_s: float | None = None    # agent clock: agent start -> the workload's first record
    startup_s: float | None = None          # what production pays before working: loading + workload init
    warmup_s: float | None = None
    warmup_lost_s: list[float] = field(default_factory=list)   # per run: warm-up's time beyond its steps' work
    warmup_steps: int = 0                   # steps its runs' start took to settle, the most of them (tuning skips them)
    passed_gate: bool | None = None
    failure: str | None = None
    failed_with: Failure | None = None      # the failure as evidence (its kind), when it failed
    not_rented: NotRented | None = None     # why it was never rented, while its phase is SKIPPED
    win_probability: float | None = None    # a later wave's candidate: its chance of beating the leader (waves.py)
    detail: str = ""
    blocks: list[MeasuredBlock] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    run_id: int | None = None
    units_total: int = 0
    accepted_total: int = 0
    driver_version: str | None = None
    deadline_at: float | None = None        # campaign clock: the instance's hard deadline, as approved
    canary_s: float | None = None           # campaign clock: how long the canary run took, session included
    uncertain_label: str | None = None      # set when the create's answer was lost: an instance may be billing
    ended_at: float | None = None           # campaign clock: its (answered) destroy was sent
    measured_runs: int = 0                  # independent agent runs (separate processes) that gave blocks
    race_profile: Profile | None = None     # the profile its race evidence is at (campaign/screening.py)
    earlier_blocks: int = 0                 # blocks at an earlier profile, out of the race (their records kept)
    # its short runs' times, shared by every trial played here (short_runs.RunTimes, typed Any: that module imports
    # this one; the screening's pairs price a later tuning of this instance); None until the first trial here
    short_run_times: Any = None

    @property
    def cid(self) -> str:
        return self.candidate.candidate_id

    @property
    def loading_s(self) -> float | None:
        """Pull + readiness: from the log when it split them, else creation to running (less the marketplace's
        scheduling wait when the log dated it: a queue drawn per rental, shown apart, never a host's cost)."""
        if self.loading is not None and self.loading.pull_s is not None and self.loading.readiness_s is not None:
            return self.loading.pull_s + self.loading.readiness_s
        if self.running_seen_at is not None and self.rented_at is not None:
            queued = self.loading.scheduling_s if self.loading is not None else None
            return max(0.0, self.running_seen_at - self.rented_at - (queued or 0.0))
        return None

    @property
    def running_at(self) -> float | None:
        if self.loading is not None and self.loading.running_at is not None:
            return self.loading.running_at
        return self.running_seen_at

    def startup_parts(self) -> StartupParts:
        overhead = (max(0.0, self.ready_at - self.running_at)
                    if self.ready_at is not None and self.running_at is not None else None)
        pull_s = self.loading.pull_s if self.loading else None
        readiness_s = self.loading.readiness_s if self.loading else None
        if readiness_s is None and pull_s is not None and self.loading_s is not None:
            readiness_s = max(0.0, self.loading_s - pull_s)    # the log said when the pull ended, not the start
        return StartupParts(pull_s=pull_s, readiness_s=readiness_s,
                            loading_s=self.loading_s, workload_init_s=self.workload_init_s,
                            console_overhead_s=overhead)

    def work_time_left_s(self, now: float) -> float:
        """Seconds of work left before the instance must be destroyed (its deadline less the destroy margin)."""
        if self.deadline_at is None:
            return float("inf")
        return self.deadline_at - DESTROY_MARGIN_S - now


def first_profile(candidate: Candidate, manifest: Manifest) -> Profile:
    """The manifest's first profile (each tuning list's first value) on the candidate's GPUs: what the race runs."""
    return Profile.first(manifest.tuning, gpu_count=candidate.gpu_count)


def workload_env(profile: Profile) -> dict[str, str]:
    """The documented way a workload learns its profile: VASTUI_* environment variables."""
    env = {"VASTUI_GPUS": str(profile.gpu_count or 1)}
    if profile.batch_size is not None:
        env["VASTUI_BATCH_SIZE"] = str(profile.batch_size)
    if profile.precision is not None:
        env["VASTUI_PRECISION"] = profile.precision
    if profile.loaders is not None:
        env["VASTUI_LOADERS"] = str(profile.loaders)
    return env


@dataclass(slots=True)
class CandidateContext:
    """What a candidate needs from the campaign around it."""

    campaign_id: str
    manifest: Manifest
    market: Marketplace
    executor: HostExecutor
    store: CampaignStore
    approver: Approver
    clock: Clock
    bus: EventBus
    on_owned: Callable[[int], None]
    poll_s: float = POLL_S

    def label(self, candidate: Candidate) -> str:
        return build_label(campaign_id=self.campaign_id, candidate_id=candidate.candidate_id,
                           offer_id=candidate.offer.id)

    def phase(self, run: CandidateRun, phase: CandidatePhase, detail: str = "", *,
              screening: ScreeningPart | None = None) -> None:
        run.phase = phase
        run.detail = detail
        run.not_rented = None
        self.bus.publish(CandidatePhaseChanged(at=self.clock.now(), campaign_id=self.campaign_id,
                                               candidate=run.cid, phase=str(phase), detail=detail,
                                               screening=None if screening is None else str(screening)))

    def skip(self, run: CandidateRun, why: NotRented, detail: str) -> None:
        """The candidate is not rented (for now: a reserve may yet take its place), for ``why``."""
        self.phase(run, CandidatePhase.SKIPPED, detail)
        run.not_rented = why


def workload_argv(manifest: Manifest, *, variant: Profile, steps: int, seconds: float,
                  canary_steps: int = 0) -> list[str]:
    """The workload's command under ``env``: its profile, its steps and seconds, and, for a run whose first phase is
    the canary (``canary_steps``), when to write its output and mark it complete."""
    env = workload_env(variant) | {"VASTUI_STEPS": str(steps), "VASTUI_SECONDS": f"{seconds:.0f}"}
    if canary_steps > 0:
        env["VASTUI_CANARY_STEPS"] = str(canary_steps)
    return ["env", *(f"{k}={v}" for k, v in sorted(env.items())), *manifest.workload.command]


# A rent the marketplace refused with 429 even after the wire's paced retries: skipped, no reserve takes its place
# (the reserve would meet the same limit), and the offer is not taken for gone.
RATE_LIMITED = "rate limited"


class RentOutcome(enum.StrEnum):
    """How a rent ended: the engine decides on this, never on the phase's text."""

    RENTED = "rented"
    NOT_APPROVED = "not approved"      # the operator (or the plan's rules) refused it
    OVER_BUDGET = "over budget"        # granted, but the budget could no longer hold its worst case
    RATE_LIMITED = "rate limited"      # the marketplace did nothing; the offer is not to blame
    REFUSED = "refused"                # the marketplace refused this offer (gone, wrong bid, no disk, ...)
    NOT_SCHEDULED = "not scheduled"    # scheduling could not place it *now*: the machine's resources were busy


SCHEDULING_FAILED = "scheduling_failed"   # the error code of a create scheduling could not place


def scheduling_refused(exc: ApiError) -> bool:
    """A create refused because scheduling could not place the rental (docs/api-notes.md, cancel_unavail): the
    machine's resources were not free at that moment, which says nothing lasting about the offer."""
    return exc.code == SCHEDULING_FAILED


async def rent(ctx: CandidateContext, run: CandidateRun, *, reserve: Callable[[], bool],
               again: bool = False) -> RentOutcome:
    """Approve, write the intent, create. Anything but ``RENTED``: nothing was spent (the phase says why).
    ``reserve`` holds the candidate's worst case against the budget once the rent is granted (False: no room
    left). ``again``: the marketplace refused this offer's last create outright (``NOT_SCHEDULED``), and the
    request says so."""
    c = run.candidate
    ctx.phase(run, CandidatePhase.RENTING)
    for item in ctx.manifest.workload.inputs:   # an input swapped since the load stops the campaign before a rent
        try:
            check_pinned(item)
        except InputChanged as exc:
            raise CandidateFailed(str(exc), bad_host=False, failure=Failure(FailureKind.INPUT_CHANGED)) from exc
    request = ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(c.offer.id),
                              summary=f"rent offer {c.offer.id} ({c.profile_name}) at ${c.offer.dph_total:.3f}/h "
                                      f"for at most {c.time_cap_s / 60:.0f} min"
                                      + (" (asked again: scheduling could not place it, nothing was rented)"
                                         if again else ""), asked_again=again,
                              cost_cap_usd=c.max_spend_usd, campaign_id=ctx.campaign_id,
                              gpu_name=c.offer.gpu_name, num_gpus=c.gpu_count, dph_usd=c.offer.dph_total,
                              deadline_at=ctx.clock.now() + c.time_cap_s)
    approval = await ctx.approver.request(request)
    if approval is None:
        ctx.skip(run, NotRented.NOT_APPROVED, "rent not approved")
        return RentOutcome.NOT_APPROVED
    if not reserve():   # spend is reserved when the rent is granted, not while it waits for an answer
        ctx.skip(run, NotRented.OVER_BUDGET, f"budget: granted, but ${c.max_spend_usd:.2f} more could now "
                                               f"exceed the budget")
        return RentOutcome.OVER_BUDGET
    label = ctx.label(c)
    now = ctx.clock.now()
    run.deadline_at = now + c.time_cap_s
    intent = await ctx.store.record_intent(campaign_id=ctx.campaign_id, offer_id=c.offer.id, label=label, at=now,
                                           machine_id=c.offer.machine_id, dph_usd=c.offer.dph_total,
                                           deadline_at=run.deadline_at)
    try:
        created = await ctx.market.create_instance(offer_id=c.offer.id, image=ctx.manifest.workload.image,
                                                   disk_gib=RENTED_DISK_GIB, label=label, approval=approval)
    except CreateUncertain as exc:
        run.uncertain_label = label
        await ctx.store.fail_intent(intent_id=intent.intent_id, error=str(exc), at=ctx.clock.now())
        raise CandidateFailed(f"rent possibly happened (label {label}); teardown will look for it",
                              bad_host=False) from exc
    except RateLimited as exc:  # the marketplace did nothing (docs/api-notes.md §1.4): the offer is not to blame
        await ctx.store.rule_out_intent(intent_id=intent.intent_id, at=ctx.clock.now(), reason=str(exc))
        ctx.skip(run, NotRented.RATE_LIMITED, f"{RATE_LIMITED}: nothing was rented, offer {c.offer.id} is not "
                                               f"blamed: {exc}")
        return RentOutcome.RATE_LIMITED
    except (CreateFailed, ApiError) as exc:
        await ctx.store.rule_out_intent(intent_id=intent.intent_id, at=ctx.clock.now(), reason=str(exc))
        if isinstance(exc, AuthError):
            raise   # not this offer's fault: the campaign stops (engine)
        if scheduling_refused(exc):   # the engine may ask again: the candidate is still on its way
            ctx.phase(run, CandidatePhase.RENTING, f"offer {c.offer.id} could not be scheduled now: {exc}")
            return RentOutcome.NOT_SCHEDULED
        ctx.skip(run, NotRented.REFUSED, f"offer {c.offer.id} could not be rented: {exc}")
        return RentOutcome.REFUSED
    # Ours from this moment: teardown must be able to destroy it even if recording it fails below.
    run.instance_id = created.instance_id
    ctx.on_owned(created.instance_id)
    await ctx.store.bind_intent(intent_id=intent.intent_id, instance_id=created.instance_id, at=ctx.clock.now())
    await ctx.store.record_transition(instance_id=created.instance_id, state="created", at=ctx.clock.now())
    ctx.bus.publish(InstanceRented(at=ctx.clock.now(), campaign_id=ctx.campaign_id, candidate=run.cid,
                                   offer_id=c.offer.id, instance_id=created.instance_id, dph_total=c.offer.dph_total,
                                   deadline_at=run.deadline_at))
    return RentOutcome.RENTED


async def wait_running(ctx: CandidateContext, run: CandidateRun) -> Instance:
    """Poll until ``running``. Transient turns are waited out (a null first answer, ``scheduling``, ``unknown``
    within ``UNKNOWN_GRACE_S``); exited/offline, a rental created ``stopped`` (scheduling could not place it), a
    runtime error in ``status_msg``, or a missed readiness deadline fail the candidate at once (docs/api-notes.md,
    "Keys and the instance lifecycle")."""
    assert run.instance_id is not None
    ctx.phase(run, CandidatePhase.LOADING)
    deadline_s = readiness_deadline_s(ctx.manifest, predicted_pull=run.candidate.predicted_pull_s)
    started = ctx.clock.now()
    last_status: InstanceStatus | None = None
    nulls = 0
    unknown_since: float | None = None
    while True:
        try:
            instance = await ctx.market.show_instance(run.instance_id)
        except ApiError as exc:  # a poll lost to a storm or an outage says nothing about the instance: poll again
            if isinstance(exc, AuthError) or ctx.clock.now() - started > deadline_s:
                raise
            await ctx.clock.sleep(ctx.poll_s)
            continue
        if instance is None:
            nulls += 1
            if run.instance is not None or nulls > NULL_SHOWS_AFTER_CREATE:
                raise CandidateFailed(f"instance {run.instance_id} vanished while loading", bad_host=True)
            await ctx.clock.sleep(ctx.poll_s)   # not readable yet right after the create: ask again
            continue
        run.instance = instance
        run.rented_at = instance.start_date
        if instance.actual_status != last_status:
            last_status = instance.actual_status
            await ctx.store.record_transition(instance_id=run.instance_id, state=str(last_status or "created"),
                                              at=ctx.clock.now())
            ctx.bus.publish(InstanceStatusChanged(at=ctx.clock.now(), campaign_id=ctx.campaign_id,
                                                  instance_id=run.instance_id, status=str(last_status)))
        if instance.actual_status is InstanceStatus.RUNNING and run.running_seen_at is None:
            run.running_seen_at = running_since(instance, seen_at=ctx.clock.now(), rented_at=run.rented_at)
        if instance.actual_status is InstanceStatus.RUNNING and instance.ssh_endpoints():
            return instance
        unknown_since = (unknown_since or ctx.clock.now()) if instance.actual_status is InstanceStatus.UNKNOWN else None
        _judge_loading(run.instance_id, instance, unknown_s=0.0 if unknown_since is None
                       else ctx.clock.now() - unknown_since)
        waited = ctx.clock.now() - started
        if waited > deadline_s:
            raise CandidateFailed(f"not running after {waited / 60:.1f} min (deadline {deadline_s / 60:.1f} min)",
                                  bad_host=True, evidence={"waited_s": round(waited), "deadline_s": deadline_s,
                                                           "status": str(instance.actual_status)})
        await ctx.clock.sleep(ctx.poll_s)


def _judge_loading(instance_id: int, instance: Instance, *, unknown_s: float) -> None:
    """Raise CandidateFailed when a loading instance's row says it will not run; return when it may still."""
    status, msg = instance.actual_status, (instance.status_msg or "").strip()
    evidence = {"status": str(status), "status_msg": instance.status_msg}
    if status is InstanceStatus.STOPPED:
        raise CandidateFailed(f"instance {instance_id} came up stopped: scheduling could not place the rental "
                              f"({msg or 'no status message'}); destroyed at once, not billed to the readiness "
                              f"deadline", bad_host=False, evidence=evidence)
    if status in DEAD_STATUSES or (status is InstanceStatus.UNKNOWN and unknown_s > UNKNOWN_GRACE_S):
        lapse = f" for {unknown_s:.0f} s" if status is InstanceStatus.UNKNOWN else ""
        raise CandidateFailed(f"instance {instance_id} went {status}{lapse} while loading"
                              + (f": {msg}" if msg else ""), bad_host=True, evidence=evidence)
    if status is not InstanceStatus.RUNNING and STATUS_MSG_ERROR.search(msg):
        raise CandidateFailed(f"instance {instance_id} cannot start: {msg[:300]}", bad_host=True, evidence=evidence)


def running_since(instance: Instance, *, seen_at: float, rented_at: float | None) -> float:
    """When a row first seen ``running`` at ``seen_at`` started running: its ``uptime_mins`` counted back (the
    marketplace's own count, so a poll's interval does not bias readiness), never before the rental existed."""
    if instance.uptime_mins is None or instance.uptime_mins < 0:
        return seen_at
    since = seen_at - instance.uptime_mins * 60.0
    return max(since, rented_at) if rented_at is not None else since


async def read_loading(ctx: CandidateContext, run: CandidateRun) -> None:
    """Pull and readiness from the instance's log: the container daemon's first (it stamps the pull's end), then
    the instance's own; a log that cannot be had, or says nothing of either, leaves loading unsplit."""
    if run.instance_id is None or run.rented_at is None:
        return
    for daemon in (True, False):
        try:
            text = await ctx.market.request_logs(run.instance_id, daemon=daemon)
        except VastuiError:
            continue
        split = split_loading(text, created_at=run.rented_at)
        if split.running_at is not None or split.pull_s is not None:
            run.loading = split
            return


async def stage_inputs(ctx: CandidateContext, conn: HostConnection) -> None:
    """Upload each input as the very bytes digested at load, streamed in chunks (``bench.inputs.pinned_chunks``).

    An input that changed since (another file swapped in, a symlink, other bytes) fails the candidate with
    ``FailureKind.INPUT_CHANGED``: nothing of it is left on the host, and the campaign stops; no host is blamed."""
    for item in ctx.manifest.workload.inputs:
        try:
            await conn.put_chunks(open_chunks=functools.partial(pinned_chunks, item), remote_path=item.path)
        except InputChanged as exc:
            raise CandidateFailed(str(exc), bad_host=False, failure=Failure(FailureKind.INPUT_CHANGED)) from exc


async def save_records(ctx: CandidateContext, run: CandidateRun, records: list[Record]) -> None:
    """Batch the run's telemetry into the store (one transaction)."""
    if run.run_id is None or not records:
        return
    progress = [ProgressRecord(run_id=run.run_id, at=r.t, units_done=r.units, units_accepted=r.accepted,
                               data_wait_s=r.data_wait_s, compute_s=r.compute_s,
                               latencies_s=tuple(v / 1000.0 for v in r.latency_ms))
                for r in records if isinstance(r, Progress)]
    samples = [StoredSample(run_id=run.run_id, at=r.t, gpu_index=r.index, util_pct=r.util_pct,
                            mem_used_mib=r.mem_used_mib, mem_total_mib=r.mem_total_mib, power_w=r.power_w,
                            pcie_rx_kib_s=r.pcie_rx_kib_s, pcie_tx_kib_s=r.pcie_tx_kib_s,
                            sm_clock_mhz=r.sm_clock_mhz)
               for r in records if isinstance(r, GpuSample)]
    await ctx.store.add_measurements(progress=progress, samples=samples)


def note_record(ctx: CandidateContext, run: CandidateRun, record: Record) -> None:
    event = record_event(record, campaign_id=ctx.campaign_id, candidate=run.cid, instance_id=run.instance_id,
                         phase=run.phase)
    if event is not None:
        ctx.bus.publish(event)
    if isinstance(record, Phase) and record.name == "ready":
        run.driver_version = record.driver_version


async def canary(ctx: CandidateContext, run: CandidateRun, conn: HostConnection, variant: Profile) -> None:
    """Run the workload on the pinned inputs and check its output digest: the correctness gate."""
    ctx.phase(run, CandidatePhase.CANARY)
    argv = workload_argv(ctx.manifest, variant=variant, steps=CANARY_STEPS, seconds=0)
    result: Result | None = None
    started = ctx.clock.now()

    async def gate() -> None:
        nonlocal result
        async with conn.run_agent(argv) as session:
            sessions.append(session)
            async for record in session:
                note_record(ctx, run, record)
                note_start(run, record)
                if isinstance(record, Result):
                    result = record

    sessions: list[Any] = []
    try:
        finished = await within_work_time(ctx, run, gate(), on_deadline=lambda: [s.abandon() for s in sessions])
    except RemoteError as exc:
        raise CandidateFailed(f"canary could not run: {exc}", bad_host=True,
                              failure=Failure(FailureKind.CANARY_LOST)) from exc
    if not finished:
        ran_s = ctx.clock.now() - started
        # Only a canary that had a fair time says something about the workload; one cut short because loading
        # and readiness ate the instance's time (an outage, a slow host) says nothing beyond this rental.
        kind = FailureKind.CANARY_TIMEOUT if ran_s >= CANARY_FAIR_S else FailureKind.OTHER
        raise CandidateFailed(f"canary did not finish before the instance's deadline after {ran_s / 60:.1f} min "
                              f"({CANARY_STEPS} steps asked; a workload must stop at VASTUI_STEPS)", bad_host=False,
                              failure=Failure(kind))
    run.canary_s = ctx.clock.now() - started
    run.startup_s = run.startup_parts().production_startup_s
    check_exit(result)
    assert result is not None
    check_output(ctx, run, result.output_digest)


def note_start(run: CandidateRun, record: Record) -> None:
    """The canary's first records date the agent's start and the workload's first word (its set-up time)."""
    if run.ready_at is None:
        run.ready_at = record.t
    elif run.workload_init_s is None and isinstance(record, (Phase, Progress)):
        run.workload_init_s = max(0.0, record.t - run.ready_at)   # the workload's first word


def check_exit(result: Result | None) -> None:
    """A canary that ended without a result or non-zero failed (the workload's evidence, not the host's)."""
    if result is None or result.exit_status != 0:
        tail = result.stderr_tail[-300:] if result else "no result"
        status = str(result.exit_status if result else "?")
        raise CandidateFailed(f"canary failed (exit {status}): {tail}", bad_host=False,
                              failure=Failure(FailureKind.CANARY_EXIT, (status, _last_line(tail))),
                              evidence={"stderr_tail": tail})


def check_output(ctx: CandidateContext, run: CandidateRun, output_digest: str | None) -> None:
    """The correctness gate on a canary's output: a digest other than the expected one is a wrong output (an
    infinite cost, the host's); otherwise the candidate passed it."""
    expected = ctx.manifest.correctness.expected_digest
    if expected is not None and _digest(output_digest) != _digest(expected):
        run.passed_gate = False
        raise CandidateFailed(f"wrong output: digest {output_digest} != expected {expected}",
                              bad_host=True,
                              failure=Failure(FailureKind.WRONG_OUTPUT, (_digest(output_digest),)),
                              evidence={"digest": output_digest, "expected": expected})
    run.passed_gate = True


async def within_work_time(ctx: CandidateContext, run: CandidateRun, work: Coroutine[Any, Any, None], *,
                           on_deadline: Callable[[], object]) -> bool:
    """Run ``work`` until it ends or the instance's work time (its deadline less the destroy margin) runs out,
    on the campaign clock: True when it ended. At the deadline ``on_deadline`` runs (e.g. abandon the remote
    session: the destroy that follows ends it) and ``work`` is cancelled, even when no record ever comes."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            left = run.work_time_left_s(ctx.clock.now())
            if left <= 0:
                on_deadline()
                return False
            timer = asyncio.ensure_future(ctx.clock.sleep(min(left, DEADLINE_CHECK_S)))
            try:
                await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                timer.cancel()
        task.result()
        return True
    finally:
        if not task.done():   # the deadline, or this wait was cancelled (an abort): the work goes with it
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, VastuiError):
                await task


def _last_line(text: str) -> str:
    """The error a failing workload ended with: its stderr's last non-blank line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _digest(value: str | None) -> str:
    return (value or "").lower().removeprefix("sha256:")
