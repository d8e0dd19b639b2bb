"""Timers and headers stop when what they time has ended: the campaign header drops the destroy countdown and the
money held for live rentals once the campaign finished; a candidate whose rent waits for an answer says so, with a
wait that moves on the operator's clock, instead of a frozen time in "renting"."""

from __future__ import annotations

from tests.tui.campaign_canned import NOW, finished_pictures, pending, racing_picture
from vastui.tui.views.campaign import headline, phase_cell


def test_the_header_drops_countdown_and_held_money_once_the_campaign_finished() -> None:
    running = headline(racing_picture(), None, now=NOW)
    assert "last destroy due in" in running and "held for live rentals $2.90" in running
    picture, end, _page = finished_pictures()
    finished = headline(picture, end, now=NOW + 3600.0)
    assert "finished (clean)" in finished
    assert "last destroy due" not in finished and "held for live rentals" not in finished
    assert "spent $0.31 of $5.00 budget" in finished


def test_a_candidate_waiting_for_its_rent_shows_a_ticking_wait_not_a_frozen_phase() -> None:
    snapshot = racing_picture().snapshot
    c3 = next(c for c in snapshot.candidates if c.candidate_id == "c3")
    request = next(p for p in pending() if p.offer_id == c3.offer_id)
    first = phase_cell(c3, running=True, now=NOW, awaiting=request, wall_now=NOW)
    later = phase_cell(c3, running=True, now=NOW, awaiting=request, wall_now=NOW + 30.0)
    assert str(first) == "awaiting approval 20s" and str(later) == "awaiting approval 50s"
    c1 = next(c for c in snapshot.candidates if c.candidate_id == "c1")
    assert str(phase_cell(c1, running=True, now=NOW + 120.0, awaiting=None, wall_now=NOW)) == "measuring 7m"
    assert str(phase_cell(c1, running=False, now=NOW + 120.0, awaiting=None, wall_now=NOW)) == "measuring 5m"
