"""A destroyed instance's host key is forgotten: the address goes back to the market, and the next instance rented
on it presents a key of its own. Remembering the old one would make that good host a HostKeyMismatch (and a bad
host for seven days)."""

from __future__ import annotations

from pathlib import Path

from tests.campaign.campaign_support import fast_manifest
from vastui.remote.known_hosts import KnownHosts
from vastui.sim.demo import open_demo

TIME_SCALE = 300.0


async def test_a_campaign_forgets_the_host_keys_of_the_instances_it_destroyed(tmp_path: Path) -> None:
    manifest_path = fast_manifest(tmp_path / "m", max_candidates=2)
    async with open_demo(seed=7, time_scale=TIME_SCALE, data_dir=tmp_path / "data",
                         manifest_path=manifest_path) as demo:
        known_hosts: KnownHosts = demo.services.executor.known_hosts  # type: ignore[attr-defined]
        handle = demo.start(plan_approved=True)
        result = await handle.result(abort_if_cancelled="the test was interrupted")
        assert await demo.instances_left() == 0
        endpoints = [run.instance.ssh_endpoint() for run in result.outcome.runs
                     if run.instance is not None and run.instance.ssh_endpoint() is not None]
        assert endpoints, "no candidate reached SSH: nothing to check"
        assert known_hosts.path.exists(), "the runner never recorded a host key (TOFU did not run)"
        remembered = {endpoint: known_hosts.lookup(*endpoint) for endpoint in endpoints}  # type: ignore[misc]
        assert all(keys == [] for keys in remembered.values()), remembered
