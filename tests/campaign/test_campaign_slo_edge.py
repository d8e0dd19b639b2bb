"""A cheap machine at the SLO's edge is measured until its SLO is decided, not left to a dearer certified one
(docs/method.md, Stopping).

A hand-built market of two machines that the fast manifest shortlists: ``edge``, steady and 5 % over the
manifest's throughput floor of 40 units/s, at the base price; ``dear``, half again as fast and three times the
price. Two runs of a steady host leave the floor inside ``edge``'s interval (the between-run error a second run
cannot yet pin down), so at ``max_blocks`` its SLO is undecided and the decision, which chooses among certified
machines, would take ``dear`` at about twice the cost per unit. The race measures ``edge`` on, in further runs,
until its SLO is decided. Real simulator over HTTP and SSH, real campaign engine, real SQLite.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from tests.campaign.campaign_support import fast_manifest, market_of
from vastui.bench.manifest import load_manifest
from vastui.campaign.plan import build_plan
from vastui.events import Notice
from vastui.sim import demo
from vastui.sim.machine import Machine
from vastui.sim.offers import offer_row
from vastui.sim.physics import HostSpec, Precision, Variant, plan_step
from vastui.sim.realism import Realism
from vastui.sim.truth import Fault
from vastui.sim.world import generate_world
from vastui.vast.models import Offer

NOW = 1_800_000_000.0
FLOOR = 40.0
RACE_VARIANT = Variant(batch_size=64, precision=Precision.FP32, loaders=4, gpus=1)


def _machines(tmp_path: Path) -> tuple[Machine, Machine]:
    world = generate_world(7, n_machines=120, now=NOW)
    offers = [Offer.from_api(offer_row(m, now=NOW, rented=False), where="row") for m in world.machines]
    plan = build_plan(campaign_id="cedge", manifest=load_manifest(fast_manifest(tmp_path / "plain")), offers=offers,
                      knowledge=(), bad_hosts=())
    base = world.machine(plan.candidates[0].offer.machine_id)
    truth = dataclasses.replace(base.truth, data_units_per_s_per_loader=1e6, max_loaders=64, pcie_gb_per_s=64.0,
                                disk_mb_per_s=1e5, noise_cv=0.01, fault=Fault.NONE, fault_after_s=None,
                                readiness_s=30.0)
    speed = plan_step(HostSpec.from_machine(dataclasses.replace(base, truth=truth)), RACE_VARIANT).units_per_s
    edge_truth = dataclasses.replace(truth, compute_units_per_s=truth.compute_units_per_s * 1.05 * FLOOR / speed)
    edge = dataclasses.replace(base, rented=False, rentable=True, truth=edge_truth)
    dear_id = base.machine_id + 500_000
    dear = dataclasses.replace(
        edge, offer_id=base.offer_id + 500_000, machine_id=dear_id, host_id=base.host_id + 500_000,
        dph_base=3.0 * base.dph_base, min_bid=3.0 * base.min_bid,
        truth=dataclasses.replace(edge_truth, machine_id=dear_id,
                                  compute_units_per_s=edge_truth.compute_units_per_s * 1.5))
    return edge, dear


def _manifest(directory: Path) -> Path:
    """The fast manifest with a production run long enough that throughput, not startup, decides the cost."""
    path = fast_manifest(directory, max_lifetime_s=14400)   # room for further runs on a loaded machine
    text, count = re.subn(r"(?m)^units = 20000$", "units = 200000", path.read_text(encoding="utf-8"))
    assert count == 1
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
async def test_a_cheap_machine_at_the_slo_edge_gets_further_runs_and_is_chosen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    edge, dear = _machines(tmp_path)
    speed = {m.machine_id: plan_step(HostSpec.from_machine(m), RACE_VARIANT).units_per_s for m in (edge, dear)}
    assert speed[edge.machine_id] == pytest.approx(1.05 * FLOOR)
    monkeypatch.setattr(demo, "build_market_with_hosts", market_of([edge, dear]))
    notices: list[str] = []
    async with demo.open_demo(seed=7, time_scale=30.0, data_dir=tmp_path / "data", realism=Realism.kind(),
                              manifest_path=_manifest(tmp_path / "m")) as session:
        assert {c.offer.machine_id for c in session.plan.candidates} == {edge.machine_id, dear.machine_id}
        stop = session.services.bus.listen(lambda e: notices.append(e.text) if isinstance(e, Notice) else None)
        result = await session.start(plan_approved=True).result()
        stop()
        left = await session.instances_left()
    outcome = result.outcome
    runs = {r.candidate.offer.machine_id: r for r in outcome.runs}
    edge_run = runs[edge.machine_id]
    max_blocks = load_manifest(_manifest(tmp_path / "again")).measure.max_blocks
    # past the manifest's most blocks, in a third run at least: the event log says why
    assert len(edge_run.blocks) > max_blocks and edge_run.measured_runs >= 3, (
        len(edge_run.blocks), edge_run.measured_runs, outcome.race_reason)
    assert any(text.startswith(f"{edge_run.cid}: its SLO is still undecided at {max_blocks} blocks")
               for text in notices), notices
    chosen = result.receipt.decision
    assert chosen.chosen == edge_run.cid and chosen.slo_met, (chosen, outcome.race_reason, edge_run.detail)
    report = next(c for c in result.receipt.candidates if c.candidate_id == edge_run.cid)
    assert report.throughput is not None and report.throughput.low >= FLOOR   # certified: its interval clears it
    assert report.runs >= 3 and report.blocks == len(edge_run.blocks)
    assert left == 0 and result.receipt.teardown_passed
