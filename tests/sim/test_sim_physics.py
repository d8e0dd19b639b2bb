"""Workload physics of simulated hosts: limits, knobs, memory, noise, and the NVML view of a step."""

from __future__ import annotations

import dataclasses
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vastui.sim.physics import (
    REF_BATCH,
    THROTTLE_COMPUTE_FACTOR,
    THROTTLE_MASK,
    GpuState,
    HostSpec,
    Precision,
    Variant,
    batch_efficiency,
    busy_state,
    expected_units_per_s,
    idle_state,
    noisy_step,
    plan_step,
    run_factor,
)
from vastui.sim.truth import Fault, MachineTruth

TRUTH = MachineTruth(
    machine_id=1, compute_units_per_s=80.0, half_precision_speedup=1.5, multi_gpu_efficiency=0.7,
    data_units_per_s_per_loader=40.0, max_loaders=16, pcie_gb_per_s=24.0, disk_mb_per_s=3000.0,
    image_pull_mb_per_s=50.0, readiness_s=40.0, image_cached=False, noise_cv=0.04, fault=Fault.NONE,
    fault_after_s=None, vram_mib=24576,
)
SPEC = HostSpec(gpu_name="RTX 4090", num_gpus=4, tdp_w=450.0, driver_version="550.54.14", truth=TRUTH)


def _spec(**truth: object) -> HostSpec:
    return dataclasses.replace(SPEC, truth=dataclasses.replace(TRUTH, **truth))  # type: ignore[arg-type]


def test_the_reference_variant_runs_at_the_truth_rate_with_no_data_wait() -> None:
    plan = plan_step(SPEC, Variant(batch_size=REF_BATCH, loaders=8))
    assert plan.units_per_s == pytest.approx(80.0)
    assert plan.limit == "compute" and plan.data_wait_s == 0.0 and plan.gpu_busy == 1.0


def test_too_few_loaders_make_the_host_data_bound() -> None:
    plan = plan_step(SPEC, Variant(loaders=1))
    assert plan.limit == "loaders" and plan.units_per_s == pytest.approx(40.0)
    assert plan.gpu_busy == pytest.approx(0.5) and plan.data_wait_s == pytest.approx(plan.compute_s)
    capped = plan_step(_spec(max_loaders=1), Variant(loaders=16))  # a loader per core at most
    assert capped.limit == "loaders" and capped.units_per_s == pytest.approx(40.0)


def test_pcie_and_disk_can_be_the_bottleneck() -> None:
    riser = plan_step(_spec(pcie_gb_per_s=0.19), Variant(loaders=16))  # a mining-rig x1 riser
    assert riser.limit == "pcie" and riser.units_per_s == pytest.approx(0.19e9 / 4e6)
    sata = plan_step(_spec(disk_mb_per_s=100.0), Variant(loaders=16))
    assert sata.limit == "disk" and sata.units_per_s == pytest.approx(50.0)


def test_half_precision_batch_and_gpus_change_compute_as_the_truth_says() -> None:
    fp32 = expected_units_per_s(SPEC, Variant(loaders=16))
    assert expected_units_per_s(SPEC, Variant(precision=Precision.BF16, loaders=16)) == pytest.approx(1.5 * fp32)
    big = expected_units_per_s(SPEC, Variant(batch_size=128, loaders=16))
    assert big == pytest.approx(fp32 * batch_efficiency(128)) and 1.1 < batch_efficiency(128) < 1.25
    assert batch_efficiency(8) < 0.7
    two = expected_units_per_s(SPEC, Variant(gpus=2, loaders=16))
    assert two == pytest.approx(fp32 * 1.7)  # imperfect scaling: 1 + 0.7
    assert plan_step(SPEC, Variant(gpus=9)).gpus == 4  # never more GPUs than the machine has


def test_memory_grows_with_the_batch_and_a_batch_past_vram_does_not_fit() -> None:
    small, large = plan_step(SPEC, Variant(batch_size=32)), plan_step(SPEC, Variant(batch_size=512))
    assert small.fits and small.mem_used_mib < large.mem_used_mib and not large.fits
    assert plan_step(SPEC, Variant(batch_size=256, precision=Precision.BF16)).fits


def test_throttling_cuts_compute_and_shows_in_nvml() -> None:
    normal, throttled = plan_step(SPEC, Variant(loaders=16)), plan_step(SPEC, Variant(loaders=16), throttled=True)
    assert throttled.units_per_s == pytest.approx(THROTTLE_COMPUTE_FACTOR * normal.units_per_s)
    state = busy_state(SPEC, busy=1.0, units_per_s_per_gpu=throttled.units_per_s, mem_used_mib=5000.0,
                       throttled=True)
    assert state.throttle_mask == THROTTLE_MASK and state.sm_clock_mhz < SPEC.boost_mhz
    assert state.power_w <= 0.6 * SPEC.tdp_w


def test_nvml_view_idle_versus_busy() -> None:
    idle = idle_state(SPEC)
    busy = busy_state(SPEC, busy=0.95, units_per_s_per_gpu=80.0, mem_used_mib=5000.0, throttled=False)
    assert isinstance(idle, GpuState) and idle.util_pct == 0.0 and busy.util_pct == 95.0
    assert idle.power_w < busy.power_w <= SPEC.tdp_w
    assert busy.pcie_rx_kib_s == pytest.approx(80.0 * 4e6 / 1024) and idle.pcie_rx_kib_s == 0.0
    assert idle.mem_total_mib == busy.mem_total_mib == TRUTH.vram_mib


def test_noise_has_the_truths_coefficient_of_variation_and_is_bounded() -> None:
    rng = random.Random(3)
    factors = [run_factor(rng, TRUTH) for _ in range(4000)]
    assert statistics.mean(factors) == pytest.approx(1.0, abs=0.005)
    assert statistics.stdev(factors) == pytest.approx(TRUTH.noise_cv, rel=0.1)
    assert all(abs(f - 1.0) <= 4 * TRUTH.noise_cv + 1e-9 for f in factors)
    plan = plan_step(SPEC, Variant(loaders=16))
    steps = [noisy_step(plan, rng, cv=TRUTH.noise_cv, factor=1.1)[0] for _ in range(2000)]
    assert statistics.mean(steps) == pytest.approx(1.1 * plan.compute_s, rel=0.01)


def test_the_host_spec_travels_as_json() -> None:
    spec = _spec(fault=Fault.DIES_MID_RUN, fault_after_s=120.0)
    assert HostSpec.from_json(spec.to_json()) == spec


@given(batch=st.integers(1, 1024), loaders=st.integers(1, 64), gpus=st.integers(1, 8),
       precision=st.sampled_from(list(Precision)))
def test_any_variant_gives_a_consistent_step(batch: int, loaders: int, gpus: int, precision: Precision) -> None:
    plan = plan_step(SPEC, Variant(batch_size=batch, precision=precision, loaders=loaders, gpus=gpus))
    assert plan.step_s > 0 and plan.units == batch * plan.gpus
    assert plan.step_s == pytest.approx(plan.compute_s + plan.data_wait_s)
    assert 0.0 < plan.gpu_busy <= 1.0
