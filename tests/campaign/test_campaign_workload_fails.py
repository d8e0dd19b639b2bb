"""Failure is cheap: a workload whose first two canaries fail the same way stops the campaign ("the workload itself
fails: ..."), rents no more than the first wave, destroys everything and marks no host bad; an input changed after
the manifest was loaded stops it the same way, with nothing uploaded from outside the manifest's folder."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest
from vastui.bench.manifest import load_manifest
from vastui.campaign.blame import FailureKind
from vastui.events import Event, InstanceRented
from vastui.sim.demo import DemoResult, run_demo
from vastui.sim.hosts import SshHostPool
from vastui.sim.market import Market
from vastui.store import SqliteStore

SECRET = b"operator's private key: never leaves this machine\n"


def _with_command(path: Path, command: str) -> Path:
    text, count = re.subn(r"(?m)^command = .*$", f"command = {command}", path.read_text(encoding="utf-8"))
    assert count == 1
    path.write_text(text, encoding="utf-8")
    return path


async def _bad_hosts(result: DemoResult) -> list[str]:
    store = await SqliteStore.open(result.db_path)
    try:
        return [f"{b.machine_id}: {b.reason}" for b in await store.bad_hosts(now=0.0)]
    finally:
        await store.close()


def _assert_stopped_cleanly(result: DemoResult, *, why: str, max_rented: int) -> None:
    runs = result.outcome.runs
    rented = [r for r in runs if r.instance_id is not None]
    assert rented, "the campaign rented nothing to test"
    assert len(rented) <= max_rented < len(runs), [(r.cid, r.phase, r.detail) for r in runs]
    assert result.receipt.decision.chosen is None
    assert why in result.receipt.decision.reason
    assert any(why in note for note in result.receipt.notes), result.receipt.notes
    assert result.outcome.halt is not None
    assert all(r.phase in ("failed", "aborted", "skipped") for r in runs), [(r.cid, r.phase) for r in runs]
    assert result.instances_left == 0 and result.receipt.teardown_passed


@pytest.mark.slow
@pytest.mark.parametrize(("name", "command", "kind", "exit_status"), [
    ("not found", '["no-such-workload-binary", "--steps"]', FailureKind.CANARY_EXIT, "127"),
    ("exits 1", '["sh", "-c", "echo \'ValueError: no such flag --inputt\' >&2; exit 1"]', FailureKind.CANARY_EXIT, "1"),
    # ignores VASTUI_STEPS and never ends: both time out at their deadline, the rest are never rented
    ("never ends", '["sh", "-c", "echo ok; exec sleep 100000"]', FailureKind.CANARY_TIMEOUT, None),
    ("wrong output", '["sh", "-c", "echo not-the-expected-output"]', FailureKind.WRONG_OUTPUT, None),
])
async def test_a_workload_that_fails_its_first_two_canaries_the_same_way_stops_the_campaign(
        tmp_path: Path, name: str, command: str, kind: FailureKind, exit_status: str | None) -> None:
    manifest_path = _with_command(fast_manifest(tmp_path / "m", max_candidates=8, max_lifetime_s=1800), command)
    first_wave = load_manifest(manifest_path).budget.max_instances
    rents: list[InstanceRented] = []

    def on_event(event: Event) -> None:
        if isinstance(event, InstanceRented):
            rents.append(event)

    # (a guard, not a speed check)
    result = await asyncio.wait_for(run_demo(seed=3, time_scale=300.0, data_dir=tmp_path / "data",
                                             manifest_path=manifest_path, on_event=on_event), timeout=600)
    _assert_stopped_cleanly(result, why="the workload itself fails", max_rented=first_wave)
    assert len(rents) <= first_wave
    failed = [r for r in result.outcome.runs if r.phase == "failed"]
    assert len(failed) >= 2 and all(r.failed_with is not None and r.failed_with.kind is kind for r in failed), [
        r.detail for r in failed]
    if exit_status is not None:   # the exit status is part of what the failures showed alike
        assert all(r.failed_with is not None and r.failed_with.signature[0] == exit_status for r in failed)
    assert await _bad_hosts(result) == []


@pytest.mark.slow
@pytest.mark.parametrize("change", ["symlink", "bytes"])
async def test_an_input_changed_after_loading_stops_the_campaign_and_blames_no_host(
        tmp_path: Path, change: str) -> None:
    manifest_path = fast_manifest(tmp_path / "m", max_candidates=8)
    first_wave = load_manifest(manifest_path).budget.max_instances
    (tmp_path / "secret.txt").write_bytes(SECRET)
    canary_input = tmp_path / "m" / "resnet-canary.jsonl"
    secrets_seen: list[str] = []

    def on_event(event: Event) -> None:   # loaded and planned long ago: swap the input as the first rent is made
        if isinstance(event, InstanceRented) and not canary_input.is_symlink() and change == "symlink":
            canary_input.unlink()
            canary_input.symlink_to("../secret.txt")
        elif isinstance(event, InstanceRented) and change == "bytes":
            canary_input.write_bytes(canary_input.read_bytes() + b'{"id": "one record more"}\n')

    async def look_at_hosts(market: Market) -> None:
        assert isinstance(market.host_provider, SshHostPool)
        base = Path(market.host_provider._base)
        secrets_seen.extend(str(p) for p in base.rglob("*") if p.is_file() and SECRET in p.read_bytes())

    result = await asyncio.wait_for(run_demo(seed=3, time_scale=300.0, data_dir=tmp_path / "data",
                                             manifest_path=manifest_path, on_event=on_event,
                                             on_market=look_at_hosts), timeout=600)
    why = "input 'resnet-canary.jsonl' changed since the manifest was loaded"
    _assert_stopped_cleanly(result, why=why, max_rented=first_wave)
    failed = [r for r in result.outcome.runs if r.phase == "failed"]
    assert failed and all(r.failed_with is not None and r.failed_with.kind is FailureKind.INPUT_CHANGED
                          for r in failed), [r.detail for r in failed]
    assert secrets_seen == []
    assert await _bad_hosts(result) == []


@pytest.mark.slow
async def test_a_wrong_output_host_is_still_marked_bad_once_another_canary_passes(tmp_path: Path) -> None:
    # seed 17: the first candidate's host gives a wrong output, the others pass: the held mark is the host's after all
    result = await asyncio.wait_for(run_demo(seed=17, time_scale=300.0, data_dir=tmp_path / "data",
                                             manifest_path=fast_manifest(tmp_path / "m")), timeout=600)
    wrong = [r for r in result.outcome.runs
             if r.failed_with is not None and r.failed_with.kind is FailureKind.WRONG_OUTPUT]
    assert wrong, "seed 17 no longer rents a wrong-output host: pick another seed"
    assert result.outcome.halt is None and result.receipt.decision.chosen is not None
    bad = await _bad_hosts(result)
    assert sorted(b.split(":")[0] for b in bad) == sorted(str(r.candidate.offer.machine_id) for r in wrong), bad


@pytest.mark.slow
@pytest.mark.parametrize("change", ["symlink", "bytes"])
async def test_an_input_swapped_before_the_first_rent_rents_nothing(tmp_path: Path, change: str) -> None:
    """Swapped after the manifest loaded and the plan was printed, before any rent: the look before each rent
    (``bench.inputs.check_pinned``) stops the campaign with no money spent."""
    manifest_path = fast_manifest(tmp_path / "m", max_candidates=8)
    (tmp_path / "secret.txt").write_bytes(SECRET)
    canary_input = tmp_path / "m" / "resnet-canary.jsonl"

    def swap(_plan_text: str) -> None:
        if change == "symlink":
            canary_input.unlink()
            canary_input.symlink_to("../secret.txt")
        else:
            canary_input.write_bytes(canary_input.read_bytes() + b'{"id": "one record more"}\n')

    result = await asyncio.wait_for(run_demo(seed=3, time_scale=300.0, data_dir=tmp_path / "data",
                                             manifest_path=manifest_path, on_plan=swap), timeout=600)
    why = "input 'resnet-canary.jsonl' changed since the manifest was loaded"
    assert all(r.instance_id is None for r in result.outcome.runs), [(r.cid, r.phase) for r in result.outcome.runs]
    assert result.outcome.halt is not None and why in result.receipt.decision.reason
    assert result.receipt.decision.chosen is None and result.instances_left == 0
    assert await _bad_hosts(result) == []
