"""The canary folded into the first measuring run (``[correctness] fold_canary``), on the simulator's real hosts:
one agent start fewer per candidate, the same gate before any block counts, a wrong output still an infinite
cost and a prompt destroy, a workload that does not honour VASTUI_CANARY_STEPS stopped as a failing workload."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from tests.waiting import until
from vastui.bench.manifest import load_manifest
from vastui.campaign.blame import FailureKind
from vastui.campaign.candidate import first_profile
from vastui.campaign.folding import NO_OUTPUT_MARK
from vastui.campaign.plan import CANARY_STEPS
from vastui.events import (
    BlockMeasured,
    CandidatePhaseChanged,
    Event,
    InstanceDestroyed,
    InstanceRented,
    Notice,
)
from vastui.events_live import ProgressReported
from vastui.remote.protocol import Phase, Progress, Record, Result, parse_record
from vastui.sim.demo import DemoResult, open_demo, run_demo
from vastui.sim.hosts import SshHostPool
from vastui.sim.market import Market
from vastui.store import SqliteStore


def _manifest(directory: Path, *, fold: bool, command: str | None = None, screened: bool = False) -> Path:
    path = fast_manifest(directory, tune_precision=screened, max_candidates=8 if screened else 4)
    text = path.read_text(encoding="utf-8")
    if fold:   # (off is the default: the manifest says nothing)
        text, count = re.subn(r"(?m)^fold_canary = false$", "fold_canary = true", text)
        assert count == 1
    if command is not None:
        text, count = re.subn(r"(?m)^command = .*$", f"command = {command}", text)
        assert count == 1
    if screened:   # a first wave of two, and no offer passed over: later waves come, after the screening
        for key, value in (("first_wave", "2"), ("miss_probability", "0.0")):
            text, count = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
            assert count == 1
    path.write_text(text, encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One agent process on a host, read back from the records file it left there."""

    records: list[Record]

    @property
    def started_at(self) -> float:
        return self.records[0].t

    @property
    def ended_at(self) -> float:
        return self.records[-1].t

    @property
    def steps(self) -> int:
        return sum(max(1, len(r.latency_ms)) for r in self.records if isinstance(r, Progress))

    @property
    def output_marks(self) -> list[Phase]:
        return [r for r in self.records if isinstance(r, Phase) and r.is_output_end]

    @property
    def is_separate_canary(self) -> bool:
        """A run of its own that did the canary's steps and ended by itself."""
        result = self.records[-1]
        return isinstance(result, Result) and result.exit_status == 0 and self.steps <= CANARY_STEPS



class Watch:
    """The campaign's events, and the agent runs each rented host kept (read before the world closes)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.instances: dict[str, int] = {}
        self.agent_runs: dict[int, list[AgentRun]] = {}

    def on_event(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, InstanceRented):
            self.instances[event.candidate] = event.instance_id

    async def on_market(self, market: Market) -> None:
        pool = market.host_provider
        assert isinstance(pool, SshHostPool)
        for instance_id in self.instances.values():
            files = pool.root_dir(instance_id=instance_id).rglob("records.jsonl")
            runs = [AgentRun([parse_record(line) for line in f.read_text(encoding="utf-8").splitlines() if line])
                    for f in files]
            self.agent_runs[instance_id] = sorted((r for r in runs if r.records), key=lambda r: r.started_at)

    def of(self, cid: str) -> list[Event]:
        return [e for e in self.events if getattr(e, "candidate", None) == cid]


async def _campaign(tmp_path: Path, *, seed: int, fold: bool, command: str | None = None,
                    screened: bool = False) -> tuple[DemoResult, Watch]:
    watch = Watch()
    manifest_path = _manifest(tmp_path / "m", fold=fold, command=command, screened=screened)
    result = await asyncio.wait_for(run_demo(seed=seed, time_scale=300.0, data_dir=tmp_path / "data",
                                             manifest_path=manifest_path,
                                             on_event=watch.on_event, on_market=watch.on_market), timeout=600)
    return result, watch


FINE_MARKERS = '["python3", "-m", "simworkload", "--input", "resnet-canary.jsonl", "--report-every", "1"]'


@pytest.mark.slow
@pytest.mark.parametrize(("fold", "command"), [(True, None), (True, FINE_MARKERS), (False, None)],
                         ids=["folded", "folded-blocks-within-the-canary", "separate"])
async def test_a_folded_canary_is_the_first_phase_of_the_first_measuring_run(tmp_path: Path, fold: bool,
                                                                             command: str | None) -> None:
    # with a marker per step, warm-up and the first blocks end within the canary's steps: they are held until the
    # output passed, then counted (with a marker per 10 steps, warm-up mostly outlasts the canary's 40)
    result, watch = await _campaign(tmp_path, seed=3, fold=fold, command=command)
    expected = load_manifest(tmp_path / "m" / "fast.toml").correctness.expected_digest
    assert result.receipt.decision.chosen is not None and result.instances_left == 0
    gated = [r for r in result.outcome.runs if r.passed_gate and r.blocks]
    assert len(gated) >= 2, [(r.cid, r.phase, r.detail) for r in result.outcome.runs]
    held = 0
    for run in gated:
        agent_runs = watch.agent_runs[watch.instances[run.cid]]
        first = agent_runs[0]
        if fold:
            # one process did the canary's steps, marked its output (checked), and measured: its blocks count
            assert [m.output_digest for m in first.output_marks] == [expected], run.cid
            assert any(first.started_at <= b.start_t and b.end_t <= first.ended_at for b in run.blocks), run.cid
            assert not any(a.is_separate_canary for a in agent_runs), run.cid
            held += sum(b.end_t <= first.output_marks[0].t for b in run.blocks)
        else:
            # today's way: a run of its own for the canary, then the measuring runs, each started and warmed anew
            assert first.is_separate_canary and not first.output_marks, run.cid
            assert sum(a.is_separate_canary for a in agent_runs) == 1
            assert not any(a.output_marks for a in agent_runs[1:])
        # the console showed the canary while it ran, and no block came before the gate passed
        events = watch.of(run.cid)
        phases = [(i, e.phase) for i, e in enumerate(events) if isinstance(e, CandidatePhaseChanged)]
        canary_at = next(i for i, phase in phases if phase == "canary")
        measuring_at = next(i for i, phase in phases if phase == "measuring")
        assert canary_at < measuring_at
        canary_steps = sum(e.steps for e in events[canary_at:measuring_at]
                           if isinstance(e, ProgressReported) and e.purpose == "canary")
        assert canary_steps >= CANARY_STEPS
        assert not any(isinstance(e, BlockMeasured) for e in events[:measuring_at])
        assert not any(isinstance(e, ProgressReported) and e.purpose != "canary"
                       for e in events[canary_at:measuring_at])
    if command == FINE_MARKERS:   # blocks done during the canary's steps were held, and counted only after it
        assert held > 0


async def _bad_hosts(result: DemoResult) -> list[int]:
    store = await SqliteStore.open(result.db_path)
    try:
        return [b.machine_id for b in await store.bad_hosts(now=0.0)]
    finally:
        await store.close()


@pytest.mark.slow
async def test_a_wrong_output_in_a_folded_canary_is_never_chosen_and_its_instance_is_destroyed(tmp_path: Path) -> None:
    # seed 17: the first candidate's host gives a wrong output (as in test_campaign_workload_fails), the others pass
    result, watch = await _campaign(tmp_path, seed=17, fold=True)
    wrong = [r for r in result.outcome.runs
             if r.failed_with is not None and r.failed_with.kind is FailureKind.WRONG_OUTPUT]
    assert wrong, "seed 17 no longer rents a wrong-output host: pick another seed"
    assert result.outcome.halt is None and result.receipt.decision.chosen is not None
    assert result.receipt.decision.chosen not in {r.cid for r in wrong}
    assert sorted(await _bad_hosts(result)) == sorted(r.candidate.offer.machine_id for r in wrong)
    for run in wrong:
        assert run.blocks == [] and run.passed_gate is False
        events = watch.of(run.cid)
        assert not any(isinstance(e, BlockMeasured) for e in events)
        assert [e.phase for e in events if isinstance(e, CandidatePhaseChanged)][-2:] == ["canary", "failed"]
        # the wrong digest came from the measuring run's own output mark, and the instance went right after
        agent_runs = watch.agent_runs[watch.instances[run.cid]]
        assert len(agent_runs) == 1 and len(agent_runs[0].output_marks) == 1
        failed_at = next(i for i, e in enumerate(watch.events)
                         if isinstance(e, CandidatePhaseChanged) and e.candidate == run.cid and e.phase == "failed")
        assert any(isinstance(e, InstanceDestroyed) and e.instance_id == run.instance_id
                   for e in watch.events[failed_at:])
    assert result.instances_left == 0 and result.receipt.teardown_passed


@pytest.mark.slow
async def test_a_workload_that_ignores_the_canary_steps_fails_its_folded_canaries_and_stops_the_campaign(
        tmp_path: Path) -> None:
    """Why the fold is off unless the manifest asks for it: a workload that never marks its output complete fails
    every folded canary alike, and the campaign stops as for any workload that fails (no host blamed)."""
    ignores = '["env", "VASTUI_CANARY_STEPS=0", "python3", "-m", "simworkload", "--input", "resnet-canary.jsonl"]'
    result, _watch = await _campaign(tmp_path, seed=3, fold=True, command=ignores)
    failed = [r for r in result.outcome.runs if r.phase == "failed"]
    assert len(failed) >= 2
    assert all(r.failed_with is not None and r.failed_with.kind is FailureKind.CANARY_EXIT
               and r.failed_with.signature[1] == NO_OUTPUT_MARK for r in failed), [r.detail for r in failed]
    assert result.outcome.halt is not None and "the workload itself fails" in result.receipt.decision.reason
    assert result.receipt.decision.chosen is None
    assert await _bad_hosts(result) == []
    assert result.instances_left == 0 and result.receipt.teardown_passed


@pytest.mark.slow
@pytest.mark.parametrize("seed", [5, 7])
async def test_a_candidate_raced_at_a_screened_profile_runs_its_canary_on_its_own(tmp_path: Path, seed: int) -> None:
    """The canary runs the first profile, which every candidate can hold: only a first run at that profile carries
    it. With fp32 and bf16 allowed (a compute-bound workload), a first wave of two measures at fp32 (folded); later
    waves wait for the screening (nothing is passed over here), and one rented once it kept bf16 is raced at bf16
    and runs a canary of its own first. (On a busy machine the screening may run out of time before bf16 is
    judged: then every first run is at fp32 and folded, which the same rule says.)"""
    result, watch = await _campaign(tmp_path, seed=seed, fold=True, screened=True)
    manifest = load_manifest(tmp_path / "m" / "fast.toml")
    assert result.receipt.decision.chosen is not None and result.instances_left == 0
    screening = result.outcome.screening
    screened_at = next((i for i, e in enumerate(watch.events)
                        if isinstance(e, Notice) and "knobs screened" in e.text), len(watch.events))
    rented_after = {e.candidate for e in watch.events[screened_at:]
                    if isinstance(e, CandidatePhaseChanged) and e.phase == "renting"}
    separate: list[str] = []
    for run in result.outcome.runs:
        if run.cid not in watch.instances or not run.passed_gate:
            continue
        first = watch.agent_runs[watch.instances[run.cid]][0]
        at_first = first_profile(run.candidate, manifest)
        if first.is_separate_canary:
            separate.append(run.cid)
            assert not first.output_marks and run.earlier_blocks == 0   # never measured at the first profile
            assert run.race_profile is not None and run.race_profile != at_first
        else:   # its first run was at the first profile: it carried the canary
            assert len(first.output_marks) == 1
            assert run.earlier_blocks > 0 or run.race_profile in (None, at_first), run.cid
    if screening is not None and screening.profile.precision == "bf16":
        # every candidate rented after the screening kept bf16 ran its canary on its own
        assert set(separate) == {cid for cid in rented_after if cid in watch.instances
                                 and next(r for r in result.outcome.runs if r.cid == cid).passed_gate}
        assert separate, [(r.cid, r.phase, r.detail) for r in result.outcome.runs]


@pytest.mark.slow
async def test_an_abort_during_a_folded_canary_closes_the_run_it_had_opened(tmp_path: Path) -> None:
    """A folded canary runs inside a stored measuring run: an abort that finds a candidate in it closes that run as
    interrupted, as one that finds it measuring does."""
    async with open_demo(seed=3, time_scale=300.0, data_dir=tmp_path / "data",
                         manifest_path=_manifest(tmp_path / "m", fold=True)) as demo:
        canary_seen = asyncio.Event()

        def on_event(event: Event) -> None:
            # The abort goes in on the loop's next turn after the first canary step is reported, not after a poll:
            # on a busy machine a poll's few wall milliseconds are minutes of scaled time, and the canary is over.
            if isinstance(event, ProgressReported) and event.purpose == "canary" and not canary_seen.is_set():
                canary_seen.set()
                asyncio.get_running_loop().call_soon(handle.abort, "operator pressed q")   # a listener must not publish

        demo.services.bus.listen(on_event)
        handle = demo.start(plan_approved=True)
        await until(canary_seen.is_set, "a folded canary under way")
        result = await handle.result()
        state = handle.snapshot()
        open_runs = await demo.services.store.open_runs(campaign_id=handle.campaign_id)
        runs = await demo.services.store.runs(campaign_id=handle.campaign_id)
    assert result.aborted == "operator pressed q" and result.receipt.teardown_passed
    assert any(c.phase == "aborted" and "stopped in canary" in c.detail for c in state.candidates), [
        (c.candidate_id, c.phase, c.detail) for c in state.candidates]
    assert open_runs == [] and any(r.status == "interrupted" for r in runs)
