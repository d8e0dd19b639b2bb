"""The event bus numbers every event without gaps, never drops one for a listener, and tells a subscriber that
fell behind exactly how many it lost (and which), then goes on without a gap."""

from __future__ import annotations

import asyncio

import pytest

from vastui.events import Event, EventBus, EventsLost, Notice


def notice(i: int) -> Notice:
    return Notice(at=float(i), campaign_id="c1", level="info", text=f"n{i}")


def test_events_are_numbered_from_one_without_gaps_and_keep_their_fields() -> None:
    bus = EventBus()
    published = [bus.publish(notice(i)) for i in range(5)]
    assert [e.seq for e in published] == [1, 2, 3, 4, 5]
    assert bus.last_seq == 5
    assert all(isinstance(e, Notice) and e.text == f"n{i}" and e.at == i for i, e in enumerate(published))
    assert notice(0).seq == 0, "an event that was never published has no number"


def test_a_lagging_subscriber_learns_how_many_it_lost_then_reads_on_without_a_gap() -> None:
    bus = EventBus()
    slow = bus.subscribe(queue_size=3)
    fast = bus.subscribe()
    for i in range(10):
        bus.publish(notice(i))
    assert slow.lost_total == 7 and fast.lost_total == 0
    marker = slow.get_nowait()   # the marker, then the three kept
    assert isinstance(marker, EventsLost)
    assert (marker.count, marker.first_seq, marker.last_seq) == (7, 1, 7)
    assert [slow.get_nowait().seq for _ in range(3)] == [8, 9, 10]
    assert slow.empty()
    with pytest.raises(asyncio.QueueEmpty):
        slow.get_nowait()
    assert [fast.get_nowait().seq for _ in range(10)] == list(range(1, 11))
    # falling behind again gives a new marker for the new loss only
    for i in range(5):
        bus.publish(notice(i))
    again = slow.get_nowait()
    assert isinstance(again, EventsLost) and (again.count, again.first_seq, again.last_seq) == (2, 11, 12)
    assert slow.lost_total == 9


async def test_get_waits_for_the_next_event() -> None:
    bus = EventBus()
    subscription = bus.subscribe()
    waiter = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)
    assert not waiter.done()
    bus.publish(notice(1))
    got = await asyncio.wait_for(waiter, timeout=5)
    assert got.seq == 1


def test_listeners_see_every_event_in_order_and_a_failing_listener_harms_no_one(
        caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus(queue_size=1)
    seen: list[int] = []

    def broken(_event: Event) -> None:
        raise RuntimeError("a view's bug")

    bus.listen(broken)
    stop = bus.listen(lambda e: seen.append(e.seq))
    for i in range(100):
        bus.publish(notice(i))
    assert seen == list(range(1, 101))
    assert "event listener failed" in caplog.text
    stop()
    bus.publish(notice(0))
    assert seen[-1] == 100


def test_an_unsubscribed_queue_receives_nothing_more() -> None:
    bus = EventBus()
    subscription = bus.subscribe()
    bus.publish(notice(1))
    bus.unsubscribe(subscription)
    bus.publish(notice(2))
    assert subscription.get_nowait().seq == 1 and subscription.empty()
