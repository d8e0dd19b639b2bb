"""Rows and logs as the real Vast.ai hands them out, against the simulator with those rules on (``Realism`` group
"rows and logs"), each test citing its public source; docs/api-notes.md cites them too.

Listing rows carry stray whitespace and the client strips it, as the official CLI does; logs are the container's
own output, or the container daemon's with its own stamps, and the startup split still reads the pull's end.
"""

from __future__ import annotations

import httpx
import pytest

from tests.fakes import FakeClock
from vastui.campaign.startup import split_loading
from vastui.config import Secret
from vastui.sim.app import create_app
from vastui.sim.factory import build_market
from vastui.sim.images import image_size_mb
from vastui.sim.instance import CreateRequest
from vastui.sim.lifecycle import CONTAINER_FIRST_LINE
from vastui.sim.market import Market
from vastui.sim.realism import Realism
from vastui.vast.client import HttpVastClient

KEY = "rows-and-logs-key-0091"
IMAGE = "example/trainer:1.2"          # not a popular image: never cached, always pulled


def _market(clock: FakeClock, realism: Realism) -> Market:
    return build_market(33, clock=clock, api_key=KEY, n_machines=30, realism=realism)


def _client(market: Market, clock: FakeClock) -> HttpVastClient:
    return HttpVastClient(base_url="http://sim.test", api_key=Secret(KEY), clock=clock,
                          transport=httpx.ASGITransport(app=create_app(market)))


async def _rent_and_run(market: Market, clock: FakeClock) -> int:
    machine = next(m for m in market.world.machines if not market.is_rented(m) and m.disk_space_gb >= 10)
    body = {"image": IMAGE, "disk": 10, "label": f"vastui-crows-c1-{machine.offer_id}", "runtype": "ssh",
            "cancel_unavail": True}
    instance_id = (await market.create_instance(machine.offer_id, CreateRequest.from_body(body))).id
    clock.advance(3600.0)                # long past any pull and boot
    return instance_id


async def test_padded_row_strings_are_stripped_as_the_cli_strips_them() -> None:
    # docs (vast-ai/docs, show instances example) show "10.2.202.31 172.17.0.1 \n"; the official CLI strips every
    # string field of listing rows (vast.py, show__instances).
    clock = FakeClock()
    market = _market(clock, Realism(padded_strings=True))
    instance_id = await _rent_and_run(market, clock)
    raw = (await market.instance_rows())[0]
    assert raw["public_ipaddr"].endswith("\n") and raw["local_ipaddrs"].endswith(" \n")
    async with _client(market, clock) as client:
        listed = (await client.list_instances()).instances[0]
        shown = await client.show_instance(instance_id)
    assert shown is not None
    for row in (listed, shown):
        assert row.public_ipaddr == raw["public_ipaddr"].strip()
        assert row.image_uuid == IMAGE and row.status_msg == raw["status_msg"].strip()


async def test_logs_are_the_containers_own_output_without_the_simulators_wording() -> None:
    # vast-ai/docs request_logs: the result URL holds the container's output; daemon_logs the daemon's.
    clock = FakeClock()
    market = _market(clock, Realism(container_logs=True))
    instance_id = await _rent_and_run(market, clock)
    async with _client(market, clock) as client:
        own = await client.request_logs(instance_id)
        daemon = await client.request_logs(instance_id, daemon=True)
    assert own.splitlines() == [CONTAINER_FIRST_LINE]
    assert "Image pulled" not in own + daemon and "Container started" not in own + daemon
    assert f"Status: Downloaded newer image for {IMAGE}" in daemon
    assert "Pulling from example/trainer" in daemon


async def test_the_startup_split_reads_the_pull_end_from_the_daemons_log() -> None:
    # The daemon stamps its lines RFC 3339 with nanoseconds; it names the pull's end but not its size nor the
    # container's start: the pull is split off, readiness is left to the listing that showed running.
    clock = FakeClock()
    market = _market(clock, Realism(container_logs=True))
    instance_id = await _rent_and_run(market, clock)
    st = market._instances[instance_id]
    pull_truth_s = image_size_mb(IMAGE) / st.machine.truth.image_pull_mb_per_s
    async with _client(market, clock) as client:
        daemon = await client.request_logs(instance_id, daemon=True)
    split = split_loading(daemon, created_at=st.created_at)
    assert split.pull_s == pytest.approx(pull_truth_s, abs=1e-3)
    assert split.readiness_s is None and split.running_at is None and split.pulled_gb is None


def test_the_split_reads_both_wordings_and_any_stamp() -> None:
    created = 1_800_000_000.0
    platform = ("2027-01-15T08:00:10.500000Z Image pulled (3000 MB); starting container.\n"
                "2027-01-15T08:00:40Z Container started; ssh ready.\n")
    split = split_loading(platform, created_at=created)
    assert split.pull_s == pytest.approx(10.5) and split.readiness_s == pytest.approx(29.5)
    assert split.pulled_gb == pytest.approx(3.0)
    daemon = ("starting up, no stamp here\n"
              "2027-01-15T09:00:20.123456789+01:00 Digest: sha256:ab\n"
              "2027-01-15T09:00:20.123456789+01:00 Status: Downloaded newer image for x/y:1\n")
    split = split_loading(daemon, created_at=created)
    assert split.pull_s == pytest.approx(20.123456789, abs=1e-6) and split.readiness_s is None
    cached = "2027-01-15T08:00:02.000000001Z Status: Image is up to date for x/y:1\n"
    split = split_loading(cached, created_at=created)
    assert split.pull_s == 0.0 and split.scheduling_s == pytest.approx(2.0, abs=1e-6) and split.pulled_gb == 0.0
    assert split_loading("no stamps at all\n", created_at=created).pull_s is None
    queued = ("2027-01-15T08:00:12Z x/y:1: Pulling from x/y\n"
              "2027-01-15T08:01:12Z Status: Downloaded newer image for x/y:1\n")
    split = split_loading(queued, created_at=created)
    assert split.scheduling_s == pytest.approx(12.0) and split.pull_s == pytest.approx(60.0)


def test_the_running_moment_is_counted_back_from_the_rows_uptime() -> None:
    # uptime_mins is a documented instance field (docs/api-notes.md §6): the first poll that shows running knows
    # how long it has run, so readiness is not biased by the poll's interval.
    from dataclasses import replace

    from vastui.campaign.candidate import running_since
    from vastui.vast.models import Instance
    row = {"id": 1, "actual_status": "running", "start_date": 1000.0, "uptime_mins": 0.5, "extra_env": []}
    instance = Instance.from_api(row)
    assert running_since(instance, seen_at=1100.0, rented_at=1000.0) == pytest.approx(1070.0)
    assert running_since(replace(instance, uptime_mins=10.0), seen_at=1100.0, rented_at=1000.0) == 1000.0
    assert running_since(replace(instance, uptime_mins=None), seen_at=1100.0, rented_at=1000.0) == 1100.0
