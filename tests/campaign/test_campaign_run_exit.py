"""``campaign run`` exit status: a campaign that chose nothing (``chosen: none``) is not a success for a script."""

from __future__ import annotations

import pytest

from tests.fakes import subcommand
from vastui.cli import build_parser
from vastui.cli.campaign import NOTHING_CHOSEN, SLO_NOT_MET, run_exit_status


@pytest.mark.parametrize(("teardown_passed", "chosen", "slo_met", "status"), [
    (True, "rtx4090@host7", True, 0), (True, None, False, NOTHING_CHOSEN), (False, "rtx4090@host7", True, 1),
    (False, None, False, 1), (True, "rtx4090@host7", False, SLO_NOT_MET), (False, "rtx4090@host7", False, 1)])
def test_chosen_none_or_slo_not_met_exits_non_zero(teardown_passed: bool, chosen: str | None, slo_met: bool,
                                                    status: int) -> None:
    assert run_exit_status(teardown_passed=teardown_passed, chosen=chosen, slo_met=slo_met) == status
    assert len({0, 1, 2, 3, NOTHING_CHOSEN, SLO_NOT_MET}) == 6  # each outcome its own status


def test_the_run_help_documents_the_exit_statuses() -> None:
    parser = build_parser(["campaign", "run"])
    run = subcommand(parser, "campaign", "run")
    text = run.format_help()
    assert "exit status" in text and "chosen: none" in text and str(NOTHING_CHOSEN) in text
    assert "SLO met: no" in text and str(SLO_NOT_MET) in text
