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

from pathlib import Path

import pytest

from tests.campaign.campaign_support import (
    FIRST_PROFILE,
    edit_manifest,
    fast_manifest,
    market_of,
    steady_shortlisted,
    twin,
)
from vastui.bench.manifest import load_manifest
from vastui.events import Notice
from vastui.sim import demo
from vastui.sim.machine import Machine
from vastui.sim.physics import HostSpec, plan_step
from vastui.sim.realism import Realism

FLOOR = 40.0


def _machines(tmp_path: Path) -> tuple[Machine, Machine]:
    edge = steady_shortlisted(tmp_path, units_per_s=1.05 * FLOOR)
    return edge, twin(edge, speed=1.5, price=3.0)


def _manifest(directory: Path) -> Path:
    """The fast manifest with a production run long enough that throughput, not startup, decides the cost."""
    return edit_manifest(fast_manifest(directory, max_lifetime_s=14400),   # room for further runs under load
                         {r"(?m)^units = 20000$": "units = 200000"})


@pytest.mark.slow
async def test_a_cheap_machine_at_the_slo_edge_gets_further_runs_and_is_chosen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    edge, dear = _machines(tmp_path)
    speed = {m.machine_id: plan_step(HostSpec.from_machine(m), FIRST_PROFILE).units_per_s for m in (edge, dear)}
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
