"""The teardown's evidence has one writer (cleanup.record_teardown), used by the engine, resume and the leak
destroyer: each destroy sent and each instance proven gone goes to the store; a write the store refuses is either
raised or, for the engine, reported while the rest are still written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import FakeClock
from vastui.campaign.cleanup import GoneEvidence, TeardownReport, record_teardown
from vastui.errors import StoreError
from vastui.store import SqliteStore
from vastui.store.records import InstanceState


def _report() -> TeardownReport:
    # instance 8's evidence is one listing short: the store refuses to call it gone
    return TeardownReport(gone=[GoneEvidence(7, (110.0, 120.0)), GoneEvidence(8, (115.0,))],
                          destroy_sent_at={7: 100.0, 8: 101.0})


async def _states(store: SqliteStore, instance_id: int) -> list[tuple[str, float]]:
    return [(t.state, t.at) for t in await store.transitions(instance_id)]


async def test_a_refused_write_is_reported_and_the_rest_are_written(tmp_path: Path) -> None:
    clock = FakeClock(200.0)
    refused: list[tuple[str, str]] = []
    async with await SqliteStore.open(tmp_path / "v.db") as store:
        await record_teardown(store, _report(), clock=clock,
                              on_refused=lambda exc, what: refused.append((what, exc.message)))
        seven, eight = await _states(store, 7), await _states(store, 8)
    assert seven == [(InstanceState.DESTROY_REQUESTED, 100.0), (InstanceState.GONE, 200.0)]
    assert eight == [(InstanceState.DESTROY_REQUESTED, 101.0)]
    assert [what for what, _ in refused] == ["record an instance proven gone"]


async def test_without_a_listener_a_refused_write_is_raised(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "v.db") as store:
        with pytest.raises(StoreError):
            await record_teardown(store, _report(), clock=FakeClock(200.0))
        assert await _states(store, 7) == [(InstanceState.DESTROY_REQUESTED, 100.0), (InstanceState.GONE, 200.0)]
