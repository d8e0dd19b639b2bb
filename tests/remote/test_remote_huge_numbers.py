"""Numbers no real workload reports: a marker with ``units`` = 10**19 or 10**4000 (past SQLite's 64-bit integers,
past a float) never reaches the store or the statistics. The agent turns it into a ``bad_marker`` error and the run
goes on; a record that carries one anyway (a hostile host writes its own lines) is one ``RemoteError``."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path

import pytest

from vastui.errors import RemoteError
from vastui.remote import agent
from vastui.remote.protocol import AgentError, Progress, Result, parse_record

HUGE = [10**19, 2**63, 10**4000, 2**53 + 1]


def _records(tmp_path: Path, body: str) -> list[object]:
    script = tmp_path / "workload.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    out = io.StringIO()
    assert agent.main(["--no-nvml", "--", sys.executable, str(script)], stream=out, nvml=None,
                      handle_signals=False) == 0
    return [parse_record(line) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize("field", ["units", "accepted"])
@pytest.mark.parametrize("value", HUGE)
def test_a_marker_with_a_huge_count_is_a_bad_marker_and_the_run_goes_on(tmp_path: Path, value: int,
                                                                        field: str) -> None:
    marker = {"units": value, "accepted": 1} if field == "units" else {"units": value, "accepted": value}
    records = _records(tmp_path, f"""
        import sys
        sys.set_int_max_str_digits(0)
        print('VASTUI {{"units": 8}}')
        print('VASTUI ' + {json.dumps(json.dumps(marker))})
        print('VASTUI {{"units": 4}}')
    """)
    errors = [r for r in records if isinstance(r, AgentError) and r.what == "bad_marker"]
    assert len(errors) == 1 and "too large" in errors[0].message and len(errors[0].message) < 400
    assert [r.units for r in records if isinstance(r, Progress)] == [8, 4]
    result = records[-1]
    assert isinstance(result, Result) and result.units_total == 12 and result.accepted_total == 12


def test_running_totals_past_the_bound_are_refused_too(tmp_path: Path) -> None:
    step = agent.MAX_UNITS // 2 + 1
    records = _records(tmp_path, f"""
        print('VASTUI {{"units": {step}}}')
        print('VASTUI {{"units": {step}}}')
    """)
    assert [r.units for r in records if isinstance(r, Progress)] == [step]
    assert sum(isinstance(r, AgentError) and r.what == "bad_marker" for r in records) == 1


def _progress_line(**overrides: object) -> str:
    record: dict[str, object] = {"kind": "progress", "seq": 3, "t": 10.0, "units": 8, "accepted": 8,
                                 "data_wait_s": 0.0, "compute_s": 1.0, "latency_ms": [], "units_total": 8,
                                 "accepted_total": 8, "phase": None}
    record.update(overrides)
    return json.dumps(record)


@pytest.mark.parametrize("field", ["units", "accepted", "units_total", "accepted_total", "seq"])
@pytest.mark.parametrize("value", [*HUGE, -(10**19)])
def test_a_record_with_a_huge_integer_is_one_remote_error(field: str, value: int) -> None:
    with pytest.raises(RemoteError) as caught:
        parse_record(_progress_line(**{field: value}), where="127.0.0.1:2222")
    text = str(caught.value)
    assert "127.0.0.1:2222" in text and repr(field) in text and "\n" not in text and len(text) < 400


def test_an_integer_too_long_to_read_is_one_remote_error() -> None:
    line = _progress_line().replace('"units": 8', '"units": ' + "9" * 5000)
    with pytest.raises(RemoteError) as caught:
        parse_record(line, where="h:1")
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_the_largest_count_still_parses() -> None:
    record = parse_record(_progress_line(units=agent.MAX_UNITS, accepted=agent.MAX_UNITS,
                                         units_total=agent.MAX_UNITS, accepted_total=agent.MAX_UNITS))
    assert isinstance(record, Progress) and record.units == agent.MAX_UNITS


def test_a_record_nested_100k_deep_is_one_remote_error() -> None:
    with pytest.raises(RemoteError) as caught:
        parse_record('{"kind": "progress", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", where="h:1")
    assert "nested too deeply" in str(caught.value) and len(str(caught.value)) < 400
