"""``BlockMeter`` fed synthetic agent records (``Progress`` markers and ``GpuSample`` readings, stamped with the agent's
clock): when warm-up ends, how blocks are cut, and what each block says about throughput, data-wait and the GPU."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence

import pytest

from vastui.bench.manifest import MeasureRule, WarmupRule
from vastui.campaign.measure import BlockMeter, MeasuredBlock, steps_in
from vastui.remote.protocol import GpuSample, Phase, Progress

# Agent-clock epoch seconds far from the console's own clock (a simulator started long ago, or scaled).
T0 = 4_000_000_000.0
_seq = itertools.count(1)


def marker(t: float, *, units: int = 10, accepted: int | None = None, data_wait_s: float = 0.0,
           steps: int = 1, step_ms: float = 100.0) -> Progress:
    """A progress record covering ``steps`` workload steps (one latency sample each)."""
    done = units if accepted is None else accepted
    return Progress(seq=next(_seq), t=t, units=units, accepted=done, data_wait_s=data_wait_s,
                    compute_s=max(0.0, step_ms * steps / 1000.0 - data_wait_s),
                    latency_ms=tuple(step_ms for _ in range(steps)), units_total=0, accepted_total=0, phase=None)


def gpu(t: float, *, util_pct: float | None, index: int = 0, mem_used_mib: float | None = 1000.0,
        pcie_rx_kib_s: float | None = None, throttle: tuple[str, ...] | None = None) -> GpuSample:
    return GpuSample(seq=next(_seq), t=t, index=index, name="RTX 4090", uuid=f"GPU-{index}", util_pct=util_pct,
                     mem_util_pct=None, mem_used_mib=mem_used_mib, mem_total_mib=24564.0, power_w=300.0,
                     pcie_rx_kib_s=pcie_rx_kib_s, pcie_tx_kib_s=None, sm_clock_mhz=2500.0, temp_c=60.0,
                     throttle_reasons=throttle)


def steady(start: float, count: int, *, every_s: float = 1.0, steps: int = 1) -> list[Progress]:
    """``count`` markers of ``steps`` steps, one every ``every_s`` seconds from ``start`` (the first at ``start``)."""
    return [marker(start + i * every_s, steps=steps) for i in range(count)]


def feed(meter: BlockMeter, records: Iterable[Progress | GpuSample | Phase]) -> list[MeasuredBlock]:
    blocks = []
    for record in records:
        block = meter.add(record)
        if block is not None:
            blocks.append(block)
    return blocks


WARM = WarmupRule(min_s=10.0, min_steps=5, cv_max=0.05, window=5, cap_s=600.0)
BLOCKS = MeasureRule(block_s=10.0, block_min_steps=3)


def warm_meter(*, warmup: WarmupRule = WARM, measure: MeasureRule = BLOCKS) -> tuple[BlockMeter, float]:
    """A meter fed steady 1 s markers until warm; returns it and the time its measurement started."""
    meter = BlockMeter(warmup=warmup, measure=measure)
    t = T0
    meter.add(marker(t))
    while meter.warmup is None:
        t += 1.0
        meter.add(marker(t))
        assert t - T0 <= warmup.cap_s + 1.0, "steady markers never ended warm-up"
    return meter, t


# --- warm-up ----------------------------------------------------------------------------------------------------


def test_warmup_lasts_at_least_min_s() -> None:
    rule = WarmupRule(min_s=30.0, min_steps=5, cv_max=0.05, window=5, cap_s=600.0)
    meter = BlockMeter(warmup=rule, measure=BLOCKS)
    feed(meter, steady(T0, 30))  # 29 timed markers: 29 s, steady, plenty of steps
    assert meter.warmup is None
    meter.add(marker(T0 + 30.0))
    assert meter.warmup is not None and meter.warmup.is_steady and not meter.warmup.is_capped
    assert meter.warmup.warmup_s == pytest.approx(30.0) and meter.warmup.steps == 30
    assert meter.first_progress_t == T0


@pytest.mark.parametrize(("steps_per_marker", "markers_needed"), [(1, 60), (3, 20), (6, 10)])
def test_warmup_min_steps_counts_real_steps_one_per_latency_sample(steps_per_marker: int,
                                                                   markers_needed: int) -> None:
    rule = WarmupRule(min_s=5.0, min_steps=60, cv_max=0.05, window=5, cap_s=6000.0)
    meter = BlockMeter(warmup=rule, measure=BLOCKS)
    meter.add(marker(T0, steps=steps_per_marker))
    for i in range(1, markers_needed):
        meter.add(marker(T0 + i, steps=steps_per_marker))
    assert meter.warmup is None, f"warm after {(markers_needed - 1) * steps_per_marker} of 60 steps"
    meter.add(marker(T0 + markers_needed, steps=steps_per_marker))
    assert meter.warmup is not None and meter.warmup.is_steady
    assert meter.warmup.steps * steps_per_marker >= rule.min_steps
    assert steps_in(marker(T0, steps=steps_per_marker)) == steps_per_marker
    assert steps_in(marker(T0, steps=0)) == 1  # a marker without latency samples is one step


def test_a_noisy_start_delays_warmup_until_the_last_window_is_steady() -> None:
    calm = BlockMeter(warmup=WARM, measure=BLOCKS)
    feed(calm, steady(T0, 11))
    assert calm.warmup is not None and calm.warmup.steps == 10  # min_s (10 s) is what binds when it is calm

    noisy = BlockMeter(warmup=WARM, measure=BLOCKS)
    t = T0
    noisy.add(marker(t))
    for i in range(16):  # step times alternate 0.6 s / 1.4 s: CV ~0.4
        t += 0.6 if i % 2 else 1.4
        noisy.add(marker(t))
        assert noisy.warmup is None
    for i in range(WARM.window):  # then steady 1 s steps: only once the whole window is steady
        t += 1.0
        noisy.add(marker(t))
        assert (noisy.warmup is not None) is (i == WARM.window - 1)
    assert noisy.warmup is not None and noisy.warmup.is_steady
    assert noisy.warmup.cv is not None and noisy.warmup.cv <= WARM.cv_max
    assert noisy.warmup.steps == 16 + WARM.window and noisy.warmup.warmup_s == pytest.approx(t - T0)


def test_warmup_says_when_the_step_time_settled_apart_from_when_the_rule_ended_it() -> None:
    # Three slow steps (3, 2, 1.5 s), then 1 s steps: the rule's window and min_s end warm-up later, but the pace
    # had settled after step 3 (where a short tuning run may start timing).
    meter = BlockMeter(warmup=WARM, measure=BLOCKS)
    t = T0
    meter.add(marker(t))
    for step_s in (3.0, 2.0, 1.5, *([1.0] * 20)):
        t += step_s
        meter.add(marker(t))
        if meter.warmup is not None:
            break
    assert meter.warmup is not None and meter.warmup.is_steady
    assert meter.warmup.steps > 3 and meter.warmup.settled_steps == 3


def test_warmup_that_never_steadies_ends_at_the_cap_flagged() -> None:
    rule = WarmupRule(min_s=10.0, min_steps=5, cv_max=0.05, window=5, cap_s=40.0)
    meter = BlockMeter(warmup=rule, measure=BLOCKS)
    t = T0
    meter.add(marker(t))
    for i in itertools.count():
        if meter.warmup is not None:
            break
        t += 0.5 if i % 2 else 1.5
        meter.add(marker(t))
        assert t - T0 < 60.0
    assert meter.warmup is not None and meter.warmup.is_capped and not meter.warmup.is_steady
    assert meter.warmup.warmup_s >= rule.cap_s


# The rule end to end on one-step markers: a slow start, then steady steps (the warm-up of a compiling workload).
SLOW_START = WarmupRule(min_s=30.0, min_steps=20, cv_max=0.05, window=10, cap_s=180.0)


def warm_up(rule: WarmupRule, step_times_s: Sequence[float]) -> BlockMeter:
    """A meter fed one-step markers ``step_times_s`` apart, stopped at the marker that ended warm-up."""
    meter = BlockMeter(warmup=rule, measure=BLOCKS)
    t = T0
    meter.add(marker(t))
    for step_s in step_times_s:
        t += step_s
        meter.add(marker(t))
        if meter.warmup is not None:
            break
    return meter


def test_warmup_waits_for_time_steps_and_a_steady_window() -> None:
    # 10 slow steps of 3 s (compilation), then steady 1 s steps. After step 10: 30 s but only 10 steps.
    # The window of the last 10 step times is steady from step 20 on; min_steps is 20; elapsed at 20 is 40 s.
    warmup = warm_up(SLOW_START, [3.0] * 10 + [1.0] * 30).warmup
    assert warmup is not None and warmup.is_steady and not warmup.is_capped and warmup.is_done
    assert warmup.steps == 20 and warmup.warmup_s == pytest.approx(40.0) and warmup.cv == pytest.approx(0.0)


def test_warmup_needs_min_seconds_even_when_steady() -> None:
    warmup = warm_up(SLOW_START, [0.5] * 100).warmup  # steady from the start, but 20 steps are only 10 s
    assert warmup is not None and warmup.is_steady
    assert warmup.steps == 60 and warmup.warmup_s == pytest.approx(30.0)


def test_warmup_is_capped_at_cap_s_when_the_window_never_steadies() -> None:
    warmup = warm_up(SLOW_START, [1.0, 3.0] * 200).warmup  # CV ~ 0.5 forever
    assert warmup is not None and warmup.is_capped and not warmup.is_steady
    assert warmup.steps == 90 and warmup.warmup_s == pytest.approx(180.0)
    assert warmup.cv is not None and warmup.cv > 0.4


def test_warmup_is_not_over_before_the_rule_is_met() -> None:
    meter = warm_up(SLOW_START, [1.0] * 12)
    assert meter.warmup is None and meter.blocks == [] and meter.units_total == 130


def _slow_first_marker_of_ten_steps(rule: WarmupRule) -> BlockMeter:
    """A meter fed one slow marker of 10 steps (2 s a step), then four at 1 s a step."""
    meter = BlockMeter(warmup=rule, measure=BLOCKS)
    t = T0
    meter.add(marker(t, steps=1, step_ms=1000.0))
    for step_s in (20.0, 10.0, 10.0, 10.0, 10.0):   # 10 steps each: 2 s a step, then 1 s
        t += step_s
        meter.add(marker(t, steps=10, step_ms=step_s * 100.0))
    return meter


def test_a_capped_warmup_with_one_slow_marker_still_says_where_it_settled_and_what_it_cost() -> None:
    """Markers of 10 steps and a window of 25 steps (the last three markers): the first (a slow start, 2 s a step)
    is still in the window when the cap comes, so the window's CV is high and warm-up is capped. The pace had settled
    after that marker all the same: a short run may start timing there, and warm-up cost its extra 10 s (a mean
    pace, pulled up by the slow marker, said 0 s)."""
    rule = WarmupRule(min_s=10.0, min_steps=5, cv_max=0.05, window=25, cap_s=40.0)
    meter = _slow_first_marker_of_ten_steps(rule)
    assert meter.warmup is not None and meter.warmup.is_capped and not meter.warmup.is_steady
    assert meter.warmup.warmup_s == pytest.approx(40.0)
    assert meter.warmup.settled_steps == 10
    assert meter.warmup.lost_s == pytest.approx(10.0)


def test_a_warmup_the_cap_ends_at_its_second_marker_costs_the_first_markers_extra_time() -> None:
    """Two markers of 10 steps, the first slow (2 s a step), the cap at the second: with no window yet, the pace is
    the second marker's (a median of both, their mean, priced this warm-up at exactly 0 s instead of 10 s)."""
    rule = WarmupRule(min_s=10.0, min_steps=5, cv_max=0.05, window=5, cap_s=25.0)
    meter = BlockMeter(warmup=rule, measure=BLOCKS)
    meter.add(Phase(seq=next(_seq), t=T0, name="warmup", detail=None, agent_version=None, python=None, gpu_count=None,
                    driver_version=None))   # the workload's first word: the first marker is timed from it
    meter.add(marker(T0 + 20.0, steps=10, step_ms=2000.0))
    assert meter.warmup is None
    meter.add(marker(T0 + 30.0, steps=10, step_ms=1000.0))
    assert meter.warmup is not None and meter.warmup.is_capped and meter.warmup.steps == 20
    assert meter.warmup.warmup_s == pytest.approx(30.0)
    assert meter.warmup.lost_s == pytest.approx(10.0)


def test_a_warmup_the_cap_ends_at_its_first_marker_is_priced_at_the_pace_its_blocks_measured() -> None:
    """One slow marker of 10 steps (2 s a step) outlasts the cap: warm-up has no settled pace of its own (its one
    marker is its pace: 0 s lost), so the blocks that follow (1 s a step) say what it cost: 10 s."""
    rule = WarmupRule(min_s=10.0, min_steps=5, cv_max=0.05, window=5, cap_s=15.0)
    meter = BlockMeter(warmup=rule, measure=BLOCKS)
    meter.add(Phase(seq=next(_seq), t=T0, name="warmup", detail=None, agent_version=None, python=None, gpu_count=None,
                    driver_version=None))
    meter.add(marker(T0 + 20.0, steps=10, step_ms=2000.0))
    assert meter.warmup is not None and meter.warmup.is_capped and meter.warmup.steps == 10
    assert meter.warmup.lost_s == pytest.approx(0.0) and meter.warmup_lost_s() == pytest.approx(0.0)
    blocks = feed(meter, [marker(T0 + 20.0 + 10.0 * i, steps=10, step_ms=1000.0) for i in range(1, 4)])
    assert len(blocks) == 3
    assert meter.warmup_lost_s() == pytest.approx(10.0)


def test_the_window_counts_steps_so_a_slow_first_marker_of_ten_steps_soon_leaves_it() -> None:
    """The window is the last ``window`` steps: with markers of 10 steps and a window of 10, the last three markers
    (the fewest a CV is judged on), not the last ten (100 steps, which kept the slow first marker in view until the
    cap and billed every run's warm-up to it). Steady 1 s steps after a slow first marker: warm-up ends at the
    fourth, 50 s in; the cap was 180 s."""
    rule = WarmupRule(min_s=10.0, min_steps=20, cv_max=0.05, window=10, cap_s=180.0)
    meter = _slow_first_marker_of_ten_steps(rule)
    assert meter.warmup is not None and meter.warmup.is_steady and not meter.warmup.is_capped
    assert meter.warmup.steps == 40 and meter.warmup.warmup_s == pytest.approx(50.0)
    assert meter.warmup.lost_s == pytest.approx(10.0)


def test_warmup_accounting_is_contiguous_when_markers_cover_different_step_counts() -> None:
    """Warm-up is paid for, so ``warmup_s`` must cover all the time before the first block, and it must contain
    ``min_steps`` real steps. Here steps take 1 s throughout; 9 markers of 2 steps are followed by one of 12 steps.
    The average steps per marker rises, and the end of warm-up must not be moved back to a marker where only 14 of
    the 20 required steps had run, leaving the 16 s after it in neither warm-up nor measurement."""
    rule = WarmupRule(min_s=10.0, min_steps=20, cv_max=0.05, window=5, cap_s=600.0)
    meter = BlockMeter(warmup=rule, measure=MeasureRule(block_s=4.0, block_min_steps=2))
    sizes = [2] * 10 + [12]  # steps per marker; the first marker is not timed
    t = T0
    meter.add(marker(t, steps=sizes[0], step_ms=1000.0))
    for n in sizes[1:]:
        t += n
        meter.add(marker(t, steps=n, step_ms=1000.0))
    assert meter.warmup is not None, "30 steady 1 s steps over 30 s: warm"
    blocks = feed(meter, [marker(t + 2.0 * i, steps=2, step_ms=1000.0) for i in range(1, 4)])
    assert blocks and meter.first_progress_t == T0
    assert blocks[0].start_t - T0 == pytest.approx(meter.warmup.warmup_s), \
        f"warm-up says {meter.warmup.warmup_s:.0f} s, measurement starts {blocks[0].start_t - T0:.0f} s in"
    warm_steps = sum(sizes[1:1 + meter.warmup.steps])
    assert warm_steps >= rule.min_steps


def test_steadiness_is_judged_on_step_times_not_marker_intervals() -> None:
    """docs/method.md: warm-up ends when "the CV of the last 10 step times" is small. A workload that prints a marker
    every second (the agent's marker format allows it) while its steps speed up from 0.2 s to 0.1 s is still
    warming up, although its markers are evenly spaced."""
    rule = WarmupRule(min_s=5.0, min_steps=10, cv_max=0.05, window=5, cap_s=600.0)
    meter = BlockMeter(warmup=rule, measure=BLOCKS)
    ramp = [5, 5, 6, 6, 7, 7, 8, 8, 9, 9]  # steps per one-second marker: step time 0.2 s -> 0.11 s
    feed(meter, [marker(T0 + i, steps=n, step_ms=1000.0 / n) for i, n in enumerate([5, *ramp])])
    assert meter.warmup is None, (f"warm-up declared over at {meter.warmup.warmup_s if meter.warmup else 0:.0f} s "
                               "while its step times are still falling")
    feed(meter, [marker(T0 + 11 + i, steps=10, step_ms=100.0) for i in range(10)])
    assert meter.warmup is not None


# --- blocks -----------------------------------------------------------------------------------------------------


def test_blocks_last_block_s_and_count_real_steps() -> None:
    meter, start = warm_meter()
    blocks = feed(meter, steady(start + 1.0, 25))  # 1 s markers, one step each
    assert [b.block.steps for b in blocks] == [10, 10]
    assert [b.block.duration_s for b in blocks] == [pytest.approx(10.0), pytest.approx(10.0)]
    assert blocks[0].start_t == start and blocks[0].end_t == start + 10.0
    assert blocks[1].start_t == blocks[0].end_t  # back to back: no step is lost between blocks
    assert meter.blocks == blocks


@pytest.mark.parametrize(("steps_per_marker", "markers_per_block"), [(1, 5), (2, 3), (5, 3)])
def test_a_block_needs_block_min_steps_real_steps_too(steps_per_marker: int, markers_per_block: int) -> None:
    """4 s markers: block_s (10 s) is met after 3 markers, block_min_steps (5) after 5 one-step markers."""
    meter, start = warm_meter(measure=MeasureRule(block_s=10.0, block_min_steps=5))
    blocks = feed(meter, steady(start + 4.0, markers_per_block, every_s=4.0, steps=steps_per_marker))
    assert len(blocks) == 1
    block = blocks[0].block
    assert block.steps == markers_per_block * steps_per_marker >= 5
    assert block.duration_s == pytest.approx(4.0 * markers_per_block) and block.duration_s >= 10.0
    assert len(block.latencies_ms) == block.steps


def test_block_throughput_is_accepted_units_over_the_blocks_duration() -> None:
    meter, start = warm_meter()
    records = [marker(start + 2.0 * (i + 1), units=64, accepted=48) for i in range(5)]
    blocks = feed(meter, records)
    assert len(blocks) == 1
    block = blocks[0]
    assert block.block.units == 5 * 48 and block.block.duration_s == pytest.approx(10.0)
    assert block.throughput_units_per_s == pytest.approx(5 * 48 / 10.0)
    assert meter.units_total >= 5 * 64 and meter.accepted_total == meter.units_total - 5 * 16


def test_data_wait_and_gpu_use_are_averaged_over_the_blocks_window_only() -> None:
    meter = BlockMeter(warmup=WARM, measure=BLOCKS)
    t = T0
    meter.add(marker(t, data_wait_s=0.9))
    meter.add(gpu(t, util_pct=5.0, mem_used_mib=500.0))
    while meter.warmup is None:  # a starved warm-up: 90 % data-wait, GPU nearly idle
        t += 1.0
        meter.add(gpu(t - 0.5, util_pct=5.0, mem_used_mib=500.0))
        meter.add(marker(t, data_wait_s=0.9))
    start = t
    blocks: list[MeasuredBlock] = []
    for i in range(1, 21):
        first = i <= 10
        blocks += feed(meter, [
            gpu(start + i - 0.5, util_pct=80.0 if first else 40.0, mem_used_mib=9000.0 if first else 7000.0,
                pcie_rx_kib_s=2.0e6, throttle=("sw_power_cap",) if first and i <= 5 else ("gpu_idle",)),
            marker(start + i, data_wait_s=0.25 if first else 0.5),
        ])
    assert len(blocks) == 2
    one, two = blocks
    assert one.data_wait_share == pytest.approx(0.25) and two.data_wait_share == pytest.approx(0.5)
    assert one.gpu_util_pct == pytest.approx(80.0) and two.gpu_util_pct == pytest.approx(40.0)
    assert one.mem_used_mib == 9000.0 and two.mem_used_mib == 7000.0
    assert one.mem_total_mib == 24564.0
    assert one.pcie_rx_gbps == pytest.approx(2.0e6 * 1024 / 1e9)
    assert one.throttled_share == pytest.approx(0.5) and two.throttled_share == 0.0


def test_gpu_samples_belong_to_the_block_they_arrived_in_even_when_stamped_later() -> None:
    # A workload stamps its markers with its own clock, which may trail the agent's (the moments it was starved
    # of CPU): the samples that arrive between two markers describe that stretch, whatever their stamps say.
    meter, start = warm_meter()
    lag = 30.0
    blocks: list[MeasuredBlock] = []
    for i in range(1, 21):
        blocks += feed(meter, [gpu(start + i - 0.5 + lag, util_pct=90.0 if i <= 10 else 30.0),
                               marker(start + i)])
    assert len(blocks) == 2
    assert blocks[0].gpu_util_pct == pytest.approx(90.0) and blocks[1].gpu_util_pct == pytest.approx(30.0)


def test_clocks_the_operator_set_are_no_throttling() -> None:
    # NVML names "applications_clocks_setting" on GPUs whose owner set the application clocks: a setting, not a
    # slowdown (a power or thermal cap is). Only the named slowdowns count towards a block's throttled share.
    meter, start = warm_meter()
    blocks: list[MeasuredBlock] = []
    for i in range(1, 11):
        reasons = ("applications_clocks_setting",) if i % 2 else ("applications_clocks_setting", "hw_thermal_slowdown")
        blocks += feed(meter, [gpu(start + i - 0.5, util_pct=90.0, throttle=reasons), marker(start + i)])
    assert len(blocks) == 1
    assert blocks[0].throttled_share == pytest.approx(0.5)


def test_a_block_without_gpu_samples_says_none_not_zero() -> None:
    meter, start = warm_meter()
    blocks = feed(meter, steady(start + 1.0, 10))
    assert len(blocks) == 1
    block = blocks[0]
    assert block.gpu_util_pct is None and block.mem_used_mib is None and block.pcie_rx_gbps is None
    assert block.throttled_share is None


def test_a_marker_with_zero_units_is_ignored() -> None:
    def run(with_empty_markers: bool) -> tuple[BlockMeter, list[MeasuredBlock]]:
        meter = BlockMeter(warmup=WARM, measure=BLOCKS)
        records: list[Progress] = []
        for i in range(40):
            records.append(marker(T0 + i, data_wait_s=0.1))
            if with_empty_markers and i % 3 == 0:
                records.append(marker(T0 + i + 0.5, units=0, accepted=0, data_wait_s=0.5, steps=4))
        return meter, feed(meter, records)

    plain, plain_blocks = run(False)
    empty, empty_blocks = run(True)
    assert plain_blocks and len(empty_blocks) == len(plain_blocks)
    assert plain.warmup == empty.warmup
    for a, b in zip(plain_blocks, empty_blocks, strict=True):
        assert (a.block, a.start_t, a.end_t) == (b.block, b.start_t, b.end_t)
        assert a.data_wait_share == pytest.approx(b.data_wait_share)
    assert (empty.units_total, empty.accepted_total) == (plain.units_total, plain.accepted_total)


def test_other_records_do_not_move_the_meter() -> None:
    meter, start = warm_meter()
    before = (meter.units_total, len(meter.blocks))
    phase = Phase(seq=next(_seq), t=start + 100.0, name="measure", detail=None, agent_version=None, python=None,
                  gpu_count=None, driver_version=None)
    assert meter.add(phase) is None
    assert (meter.units_total, len(meter.blocks)) == before
    blocks = feed(meter, steady(start + 1.0, 10))
    assert blocks[0].end_t == start + 10.0  # the phase record's time did not count as a step


# --- clocks -----------------------------------------------------------------------------------------------------


def shape(blocks: Sequence[MeasuredBlock]) -> list[float]:
    """What a block measured, without where on the clock it happened."""
    return [value for b in blocks
            for value in (b.block.duration_s, b.throughput_units_per_s, b.block.units, b.block.steps)]


def test_time_comes_from_the_records_never_from_the_console_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Against a simulator whose clock runs 60x faster (or Vast.ai), durations are the records' own: the console's
    clock is not consulted, and the same records give the same blocks whenever and however fast they arrive."""
    def records(origin: float) -> list[Progress | GpuSample]:
        out: list[Progress | GpuSample] = []
        for i in range(60):
            out.append(gpu(origin + i - 0.5, util_pct=70.0))
            out.append(marker(origin + i * 1.0 + (0.2 if i % 7 == 0 and i < 12 else 0.0), units=32))
        return out

    def forbidden() -> float:
        raise AssertionError("BlockMeter read the console's clock")

    with monkeypatch.context() as patch:
        for name in ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns"):
            patch.setattr(time, name, forbidden)
        now_blocks = feed(BlockMeter(warmup=WARM, measure=BLOCKS), records(T0))
        past_blocks = feed(BlockMeter(warmup=WARM, measure=BLOCKS), records(1_000_000.0))
    assert now_blocks and len(now_blocks) == len(past_blocks)
    assert shape(now_blocks) == pytest.approx(shape(past_blocks), rel=1e-6)
    for block in now_blocks:
        assert block.block.duration_s == pytest.approx(block.end_t - block.start_t)
        assert block.throughput_units_per_s == pytest.approx(32 * block.block.steps / (block.end_t - block.start_t))
