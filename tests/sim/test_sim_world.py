"""The seeded world: enough offers and models, every §5 field, plausible values, hidden truth, determinism."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from vastui.sim.gpus import GPU_MODELS, gpu_model
from vastui.sim.offers import offer_row
from vastui.sim.truth import Fault, MachineTruth
from vastui.sim.world import World, generate_world

NOW = 1_800_000_000.0

# Every offer field of docs/api-notes.md §5.
SECTION_5_FIELDS = """
id ask_contract_id bundle_id bundled_results machine_id host_id num_gpus gpu_name gpu_ram gpu_total_ram gpu_frac
gpu_arch gpu_lanes gpu_mem_bw gpu_max_power gpu_max_temp gpu_display_active compute_cap cuda_max_good driver_version
driver_vers bw_nvlink cpu_name cpu_arch cpu_cores cpu_cores_effective cpu_ghz cpu_ram disk_space disk_bw disk_name
inet_up inet_down inet_up_cost inet_down_cost direct_port_count pci_gen pcie_bw mobo_name os_version has_avx dph_base
dph_total discounted_dph_total min_bid storage_cost storage_total_cost vram_costperhour credit_discount_max dlperf
dlperf_per_dphtotal total_flops flops_per_dphtotal score rentable rented is_bid external hosting_type hostname
public_ipaddr geolocation geolocode reliability reliability_mult expected_reliability verification vericode static_ip
vms_enabled is_vm_deverified start_date end_date duration logo webpage resource_type cluster_id avail_vol_ask_id
avail_vol_dph avail_vol_size nw_disk_min_bw nw_disk_max_bw nw_disk_avg_bw platform_fee
""".split()


@pytest.fixture(scope="module")
def world() -> World:
    return generate_world(7, now=NOW)


def test_world_is_big_and_varied(world: World) -> None:
    machines = world.machines
    assert len(machines) == 360
    assert len({m.gpu_name for m in machines}) >= 12
    assert {m.num_gpus for m in machines} >= {1, 2, 4, 8}
    assert all(1 <= m.num_gpus <= 8 for m in machines)
    consumer = [m for m in machines if not gpu_model(m.gpu_name).is_datacenter]
    datacenter = [m for m in machines if gpu_model(m.gpu_name).is_datacenter]
    assert len(consumer) > 100 and len(datacenter) > 30
    rented_share = sum(m.rented for m in machines) / len(machines)
    assert 0.35 < rented_share < 0.65
    assert all(m.rentable != m.rented for m in machines)
    assert {m.verification for m in machines} == {"verified", "unverified", "deverified"}


def test_ids_are_unique_and_in_distinct_ranges(world: World) -> None:
    offers = [m.offer_id for m in world.machines]
    machine_ids = [m.machine_id for m in world.machines]
    assert len(set(offers)) == len(offers) and len(set(machine_ids)) == len(machine_ids)
    assert max(machine_ids) < min(offers)
    assert not set(offers) & {m.host_id for m in world.machines}


def test_same_seed_same_world_other_seed_other_world() -> None:
    assert generate_world(11, now=NOW, n_machines=50) == generate_world(11, now=NOW, n_machines=50)
    assert generate_world(11, now=NOW, n_machines=50) != generate_world(12, now=NOW, n_machines=50)


def test_every_offer_row_has_every_section_5_field(world: World) -> None:
    for machine in world.machines:
        row = offer_row(machine, now=NOW, rented=machine.rented)
        missing = [name for name in SECTION_5_FIELDS if name not in row]
        assert not missing, f"offer {machine.offer_id} lacks {missing}"
        assert row["geolocation"][-4:-2] == ", " and row["geolocation"][-2:].isupper()
        assert row["gpu_total_ram"] == row["gpu_ram"] * row["num_gpus"]
        assert row["dph_total"] > row["dph_base"] > 0
        assert 0 < row["min_bid"] <= row["dph_base"]
        assert row["dlperf_per_dphtotal"] == pytest.approx(row["dlperf"] / row["dph_total"], rel=1e-3)
        assert row["duration"] == pytest.approx(row["end_date"] - NOW)
        assert isinstance(row["driver_vers"], int) and isinstance(row["compute_cap"], int)


def test_prices_follow_the_market_shape(world: World) -> None:
    for model in GPU_MODELS:
        per_gpu = [m.dph_base / m.num_gpus for m in world.machines if m.gpu_name == model.name]
        if len(per_gpu) < 5:
            continue
        median = statistics.median(per_gpu)
        assert model.price_p10 * 0.7 <= median <= model.price_p90 * 1.4, model.name
    h200 = statistics.median(m.dph_base / m.num_gpus for m in world.machines if m.gpu_name == "H200")
    r3060 = statistics.median(m.dph_base / m.num_gpus for m in world.machines if m.gpu_name == "RTX 3060")
    assert h200 > 10 * r3060


def test_field_distributions_are_plausible(world: World) -> None:
    machines = world.machines
    inet = sorted(m.inet_down for m in machines)
    assert inet[0] >= 90 and inet[-1] <= 10_000
    assert sum(1 for v in inet if v <= 1000) > len(inet) * 0.4  # bimodal: many ~1 Gb links
    assert sum(1 for v in inet if v >= 2000) > len(inet) * 0.2
    assert all(m.inet_up <= m.inet_down for m in machines)
    assert any(m.pcie_bw < 8 for m in machines) and any(m.pcie_bw > 40 for m in machines)
    assert sum(1 for m in machines if m.reliability >= 0.975) > len(machines) * 0.6
    assert all(0.5 <= m.reliability < 1 for m in machines)
    countries = {m.country_code for m in machines}
    assert {"US", "SE", "DE", "TW"} <= countries
    assert any(m.external for m in machines) and not all(m.external for m in machines)
    assert all(m.cpu_cores >= m.cpu_cores_effective for m in machines)


def test_truth_is_complete_and_not_just_dlperf(world: World) -> None:
    truths = [m.truth for m in world.machines]
    for machine in world.machines:
        truth = machine.truth
        assert isinstance(truth, MachineTruth) and truth.machine_id == machine.machine_id
        for f in dataclasses.fields(MachineTruth):
            if f.name != "fault_after_s":
                assert getattr(truth, f.name) is not None, f.name
        assert 0.3 * machine.inet_down / 8 - 1e-6 <= truth.image_pull_mb_per_s <= 0.6 * machine.inet_down / 8 + 1e-6
        assert truth.max_loaders == int(machine.cpu_cores_effective)
        assert truth.pcie_gb_per_s <= machine.pcie_bw
        assert (truth.fault_after_s is not None) == (truth.fault in (Fault.DIES_MID_RUN, Fault.THROTTLES))
        if machine.num_gpus == 1:
            assert truth.multi_gpu_efficiency == 1.0
        else:
            assert 0.5 <= truth.multi_gpu_efficiency <= 0.95
    faults = [t.fault for t in truths]
    for fault in Fault:
        assert fault in faults
    assert sum(f is not Fault.NONE for f in faults) < len(faults) * 0.15
    # Same GPU model, different hosts: real speed spreads by 5-35 %, and dlperf does not rank it exactly.
    rtx = [m for m in world.machines if m.gpu_name == "RTX 5090" and m.num_gpus == 1]
    speeds = [m.truth.compute_units_per_s for m in rtx]
    assert max(speeds) / min(speeds) > 1.15
    by_dlperf = sorted(rtx, key=lambda m: m.dlperf)
    by_speed = sorted(rtx, key=lambda m: m.truth.compute_units_per_s)
    assert by_dlperf != by_speed
