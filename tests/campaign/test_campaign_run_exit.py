"""``campaign run`` exit status: a campaign that chose nothing (``chosen: none``) is not a success for a script."""

from __future__ import annotations

import pytest

from vastui.cli import build_parser
from vastui.cli_campaign import NOTHING_CHOSEN, run_exit_status


@pytest.mark.parametrize(("teardown_passed", "chosen", "status"), [
    (True, "rtx4090@host7", 0), (True, None, NOTHING_CHOSEN), (False, "rtx4090@host7", 1), (False, None, 1)])
def test_chosen_none_exits_non_zero(teardown_passed: bool, chosen: str | None, status: int) -> None:
    assert run_exit_status(teardown_passed=teardown_passed, chosen=chosen) == status
    assert NOTHING_CHOSEN not in (0, 1, 2)


def test_the_run_help_documents_the_exit_statuses() -> None:
    parser = build_parser(["campaign", "run"])
    campaign = parser._subparsers._group_actions[0].choices["campaign"]  # type: ignore[union-attr]
    run = campaign._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    text = run.format_help()
    assert "exit status" in text and "chosen: none" in text and str(NOTHING_CHOSEN) in text
