"""Bottleneck attribution: each rule with its evidence, the method's order, and missing readings."""

from __future__ import annotations

import math

import pytest

from vastui.bench.attribution import NEXT_MOVE, Bottleneck, Readings, attribute, scaling_efficiency, startup_share


@pytest.mark.parametrize(("readings", "bottleneck", "metrics"), [
    # docs/method.md's rule: data-wait > 5 % with GPU activity < 50 % -> input path first
    (Readings(gpu_activity_pct=35.0, data_wait_share=0.30), Bottleneck.INPUT_BOUND,
     ("data-wait share of step time", "GPU activity")),
    # busy GPU with data-wait: not input-bound unless PCIe is saturated
    (Readings(gpu_activity_pct=70.0, data_wait_share=0.08, pcie_rx_gbps=14.0, pcie_link_gbps=16.0),
     Bottleneck.INPUT_BOUND, ("data-wait share of step time", "GPU activity", "PCIe rx")),
    (Readings(gpu_activity_pct=97.0, data_wait_share=0.01), Bottleneck.COMPUTE_BOUND,
     ("GPU activity", "data-wait share of step time")),
    (Readings(gpu_activity_pct=97.0, data_wait_share=0.01, memory_used_share=0.95), Bottleneck.MEMORY_BOUND,
     ("VRAM used",)),
    (Readings(gpu_activity_pct=90.0, memory_bandwidth_busy_pct=85.0), Bottleneck.MEMORY_BOUND,
     ("memory controller busy",)),
    (Readings(gpu_activity_pct=90.0, num_gpus=4, scaling_efficiency=0.55), Bottleneck.MULTI_GPU_SCALING_LOSS,
     ("scaling efficiency on 4 GPUs",)),
    (Readings(gpu_activity_pct=90.0, startup_share=0.6), Bottleneck.STARTUP_DOMINATED,
     ("startup share of paid time",)),
    (Readings(gpu_activity_pct=90.0, throttled_share=0.4), Bottleneck.THROTTLED, ("throttled samples",)),
    (Readings(gpu_activity_pct=65.0, data_wait_share=0.02), Bottleneck.UNDETERMINED,
     ("GPU activity", "data-wait share of step time")),
    # NVML reads a starved GPU busy: a step waiting for input a fifth of its time or more is input-bound anyway
    # (the simulator's input-bound workload at one loader: 34 % data-wait, 67 % utilisation)
    (Readings(gpu_activity_pct=67.0, data_wait_share=0.34), Bottleneck.INPUT_BOUND,
     ("data-wait share of step time", "GPU activity", "data-wait share, however busy NVML reads")),
    (Readings(gpu_activity_pct=67.0, data_wait_share=0.15), Bottleneck.UNDETERMINED,
     ("GPU activity", "data-wait share of step time")),
    (Readings(data_wait_share=0.2), Bottleneck.INPUT_BOUND, ("data-wait share of step time",)),
])
def test_each_bottleneck_with_its_evidence(readings: Readings, bottleneck: Bottleneck,
                                           metrics: tuple[str, ...]) -> None:
    result = attribute(readings)
    assert result.bottleneck is bottleneck
    assert result.next_move == NEXT_MOVE[bottleneck]
    assert tuple(e.metric for e in result.evidence) == metrics
    assert result.summary.startswith(bottleneck.value)


def test_evidence_carries_the_numbers_and_thresholds() -> None:
    result = attribute(Readings(gpu_activity_pct=35.0, data_wait_share=0.30))
    wait, util = result.evidence
    assert wait.value == pytest.approx(30.0) and wait.threshold == pytest.approx(5.0) and wait.unit == "%"
    assert (util.value, util.threshold) == (35.0, 50.0)
    assert "30%" in str(wait) and "threshold 5%" in str(wait)
    assert "before buying a faster GPU" in result.next_move


def test_the_method_order_decides_and_the_rest_is_listed() -> None:
    everything = Readings(gpu_activity_pct=30.0, data_wait_share=0.4, startup_share=0.5, throttled_share=0.5,
                          memory_used_share=0.99, num_gpus=2, scaling_efficiency=0.5)
    result = attribute(everything)
    assert result.bottleneck is Bottleneck.THROTTLED
    assert result.also == (Bottleneck.STARTUP_DOMINATED, Bottleneck.INPUT_BOUND, Bottleneck.MULTI_GPU_SCALING_LOSS,
                           Bottleneck.MEMORY_BOUND)


@pytest.mark.parametrize(("share", "expected"), [(0.05, Bottleneck.UNDETERMINED), (0.0501, Bottleneck.INPUT_BOUND)])
def test_data_wait_threshold_is_strictly_above_five_percent(share: float, expected: Bottleneck) -> None:
    assert attribute(Readings(gpu_activity_pct=40.0, data_wait_share=share)).bottleneck is expected


def test_no_readings_means_undetermined_not_zero() -> None:
    result = attribute(Readings())
    assert result.bottleneck is Bottleneck.UNDETERMINED and result.evidence == ()
    assert attribute(Readings(num_gpus=1, scaling_efficiency=0.3)).bottleneck is Bottleneck.UNDETERMINED


def test_helpers() -> None:
    # 600 s startup, 60 s warm-up, 20,000 units at 20/s = 1000 s: 600 / 1660
    assert startup_share(startup_s=600.0, warmup_s=60.0, units=20_000, throughput_units_per_s=20.0) == \
        pytest.approx(600 / 1660)
    assert startup_share(startup_s=600.0, warmup_s=0.0, units=1, throughput_units_per_s=0.0) == 0.0
    assert startup_share(startup_s=math.inf, warmup_s=0.0, units=1, throughput_units_per_s=1.0) == 1.0
    assert scaling_efficiency(throughput_units_per_s=300.0, single_gpu_units_per_s=100.0, num_gpus=4) == 0.75


@pytest.mark.parametrize(("readings", "knobs_by"), [
    # startup waste is paid whatever the profile: the next rule that fired orders the knobs
    (Readings(gpu_activity_pct=67.0, data_wait_share=0.34, startup_share=0.5), Bottleneck.INPUT_BOUND),
    (Readings(gpu_activity_pct=97.0, data_wait_share=0.01, startup_share=0.5), Bottleneck.COMPUTE_BOUND),
    (Readings(gpu_activity_pct=65.0, data_wait_share=0.02, startup_share=0.5), Bottleneck.UNDETERMINED),
    # anything else orders them itself; a throttling host is not tuned at all (its order is empty)
    (Readings(gpu_activity_pct=30.0, data_wait_share=0.4, throttled_share=0.5), Bottleneck.THROTTLED),
    (Readings(gpu_activity_pct=97.0, data_wait_share=0.01), Bottleneck.COMPUTE_BOUND),
])
def test_the_knobs_are_ordered_by_the_bottleneck_in_execution(readings: Readings, knobs_by: Bottleneck) -> None:
    assert attribute(readings).in_execution is knobs_by
