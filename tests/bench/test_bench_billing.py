"""The accrued cost of a listed instance (``bench.billing.accrued_usd``): its all-in $/h by the second since its
start date, nothing for a start after now."""

from __future__ import annotations

import pytest

from vastui.bench.billing import accrued_usd


@pytest.mark.parametrize(("dph_total", "start_at", "now", "expected"), [
    (0.36, 1_000.0, 1_000.0 + 3_600.0, 0.36),       # one hour at $0.36/h
    (0.36, 1_000.0, 1_000.0 + 10.0, 0.001),         # ten seconds of it
    (2.0, 5_000.0, 5_000.0 + 5_400.0, 3.0),         # an hour and a half at $2/h
    (0.36, 2_000.0, 1_000.0, 0.0),                  # a start in the future (clock skew) has cost nothing yet
    (0.0, 0.0, 86_400.0, 0.0),
])
def test_accrued_usd_is_the_rate_by_the_second(dph_total: float, start_at: float, now: float,
                                               expected: float) -> None:
    assert accrued_usd(dph_total=dph_total, start_at=start_at, now=now) == pytest.approx(expected)
