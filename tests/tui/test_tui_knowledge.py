"""The offers table shows vastui's own measurements: $/1k units on hosts it has measured (median, range, runs,
age) and a mark on bad hosts with the reason and expiry."""

from __future__ import annotations

from pathlib import Path

from tests.tui.console_support import cells_of, sim_console, wait_for, with_settings
from vastui.store import RunStatus
from vastui.tui.knowledge import measured_cost
from vastui.tui.views.offers import OffersView

DIGEST = "w" * 16


async def test_measured_cost_and_bad_hosts_in_the_offers_table(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(live=False)) as sim:
        first, second = (await sim.client.search_offers("", order="dph+", limit=200))[:2]
        now = sim.clock.now()
        store = sim.store
        await store.save_manifest(digest=DIGEST, name="resnet", toml_text="x = 1", stored_at=now - 7200)
        await store.create_campaign(campaign_id="c1", manifest_digest=DIGEST, created_at=now - 7200, phase="done")
        for throughput in (100.0, 120.0, 110.0):
            run = await store.start_run(campaign_id="c1", instance_id=None, machine_id=first.machine_id,
                                        gpu_name=first.gpu_name, num_gpus=first.num_gpus, workload_digest=DIGEST,
                                        variant_json="{}", started_at=now - 3700)
            await store.finish_run(run_id=run.run_id, status=RunStatus.OK, at=now - 3600,
                                   throughput_units_per_s=throughput)
        await store.record_bad_host(machine_id=second.machine_id, reason="wrong outputs", evidence_json="{}",
                                    recorded_at=now, expires_at=now + 86400)
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            view = app.query_one(OffersView)
            await wait_for(pilot, lambda: str(second.id) in view.table.keys_in_order, what="the offers")
            measured = str(cells_of(view.table, str(first.id))[15])  # type: ignore[index]
            expected = first.dph_total * 1000 / (110.0 * 3600)
            low, high = first.dph_total * 1000 / (120.0 * 3600), first.dph_total * 1000 / (100.0 * 3600)
            assert measured.startswith(f"{expected:.4f} [{low:.4f}–{high:.4f}] n=3 ")
            assert measured.endswith("h"), "an hour old"
            bad = str(cells_of(view.table, str(second.id))[16])  # type: ignore[index]
            assert bad.startswith("BAD wrong outputs until")
            assert str(cells_of(view.table, str(second.id))[15]) == "-"  # type: ignore[index]
            knowledge = app.state.offers.knowledge  # type: ignore[union-attr]
            cost = measured_cost(knowledge[(first.machine_id, first.gpu_name, first.num_gpus)],
                                 dph_total=first.dph_total, now=now)
            assert cost is not None and cost.runs == 3
