"""``MarketClock``: the marketplace's time from its answers' stamps (each bounds the offset between the answer's
send and receipt), and the wire's reading of those stamps: the standard ``Date`` or the simulator's precise one."""

from __future__ import annotations

import math

import httpx
import pytest

from vastui.clock import SIM_CLOCK_HEADER, MarketClock, clock_scale
from vastui.vast.wire import market_time_of

HOUR = 3600.0


def offset_s(clock: MarketClock) -> float:
    """Marketplace time minus local time as the clock knows it: ``now()`` between two local readings, taken again
    until they are within a real millisecond of each other (a busy machine may pause the test between any two)."""
    for _ in range(1000):
        before, now, after = clock.local_now(), clock.now(), clock.local_now()
        if after - before < 0.001 * clock.scale:
            return now - (before + after) / 2.0
    raise AssertionError("the local clock never read twice within a millisecond")


def test_before_any_answer_it_reads_the_local_clock() -> None:
    clock = MarketClock(scale=120.0)
    assert offset_s(clock) == pytest.approx(0.0, abs=0.1) and clock_scale(clock) == 120.0


def test_an_answer_moves_it_onto_the_marketplaces_time_within_the_round_trip() -> None:
    clock = MarketClock()
    sent = clock.local_now()
    clock.observe(market_time=sent + 2 * HOUR + 0.3, resolution_s=0.0, sent_local=sent, received_local=sent + 0.2)
    # the stamp was made between sending and receiving: the offset lies in [2 h + 0.1, 2 h + 0.3], read as its middle
    assert offset_s(clock) == pytest.approx(2 * HOUR + 0.2, abs=0.01)


def test_successive_answers_narrow_the_offset_and_a_date_counts_its_whole_second() -> None:
    clock = MarketClock()
    base = 1_800_000_000.0
    # Date is truncated to the second: a stamp of "base" means base <= market time < base + 1
    clock.observe(market_time=base, resolution_s=1.0, sent_local=base - 100.0, received_local=base - 99.9)
    assert offset_s(clock) == pytest.approx(100.45, abs=0.01)   # the middle of [99.9, 101.0]
    clock.observe(market_time=base + 10.0, resolution_s=1.0, sent_local=base - 89.2, received_local=base - 89.1)
    # first: offset in [99.9, 101.0]; second: [99.1, 100.2]; together [99.9, 100.2]
    assert offset_s(clock) == pytest.approx(100.05, abs=0.01)


def test_an_answer_that_does_not_fit_replaces_the_bounds_and_nonsense_is_ignored() -> None:
    clock = MarketClock()
    clock.observe(market_time=1000.0, resolution_s=0.0, sent_local=10.0, received_local=11.0)
    clock.observe(market_time=9000.0, resolution_s=0.0, sent_local=20.0, received_local=21.0)  # the market jumped
    assert 8979.0 <= offset_s(clock) <= 8980.0
    for bad in ({"market_time": math.nan}, {"market_time": math.inf}, {"resolution_s": -1.0},
                {"sent_local": 30.0, "received_local": 29.0}):
        clock.observe(**{"market_time": 5.0, "resolution_s": 0.0, "sent_local": 25.0, "received_local": 26.0, **bad})
    assert 8979.0 <= offset_s(clock) <= 8980.0 and clock.answers_seen == 2


def test_the_wire_reads_the_precise_stamp_first_then_the_date() -> None:
    date = "Sun, 06 Nov 1994 08:49:37 GMT"
    assert market_time_of(httpx.Headers({"Date": date})) == (784111777.0, 1.0)
    assert market_time_of(httpx.Headers({"Date": date, SIM_CLOCK_HEADER: "784111777.625"})) == (784111777.625, 0.0)
    assert market_time_of(httpx.Headers({"Date": date, SIM_CLOCK_HEADER: "soon"})) == (784111777.0, 1.0)
    assert market_time_of(httpx.Headers({SIM_CLOCK_HEADER: "nan"})) is None
    assert market_time_of(httpx.Headers({"Date": "yesterday"})) is None
    assert market_time_of(httpx.Headers([("Date", date), ("Date", date)])) is None   # two Dates: two clocks?
    assert market_time_of(httpx.Headers({})) is None
