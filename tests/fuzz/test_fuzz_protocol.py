"""Fuzzing the agent's line protocol from both ends.

The console reads the JSON lines the host agent prints (``parse_record``): any line a broken or hostile host could
send is a record or one ``RemoteError`` that names the host and says what is wrong, in one bounded line. The agent
reads the marker lines a workload prints (``MarkerReader.feed``): any bytes are output, a marker, or a
``bad_marker`` error record — never an exception that would kill the agent — and every record it writes is one the
console can parse.
"""

from __future__ import annotations

import io
import json

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.fuzz_support import assert_one_line, deep, dumps, json_values, odd_numbers, odd_text
from vastui.errors import RemoteError
from vastui.remote.agent import MARKER, AgentClock, Emitter, MarkerReader
from vastui.remote.protocol import RecordKind, parse_record

WHERE = "127.0.0.1:2222"
VALID = [
    {"kind": "gpu", "seq": 1, "t": 1.5, "gpu": 0, "util": 90.0, "mem_used_mib": 1000, "mem_total_mib": 24000},
    {"kind": "progress", "seq": 2, "t": 2.0, "units": 32, "accepted": 32, "data_wait_s": 0.1, "compute_s": 0.9,
     "latency_ms": [30.0, 31.5], "units_total": 32, "accepted_total": 32},
    {"kind": "phase", "seq": 3, "t": 2.5, "name": "measure", "detail": None},
    {"kind": "result", "seq": 4, "t": 3.0, "exit_code": 0, "output_sha256": "ab" * 32, "output_bytes": 10},
    {"kind": "error", "seq": 5, "t": 3.5, "what": "bad_marker", "message": "m", "gpu": None},
]


def _check(line: str) -> None:
    try:
        record = parse_record(line, where=WHERE)
    except RemoteError as exc:
        assert_one_line(exc, kind=RemoteError, where=WHERE)
        return
    assert record.seq >= 1


@st.composite
def mutated_records(draw: st.DrawFn) -> str:
    """A valid record with fields replaced, dropped or added, given odd values."""
    record = dict(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted({*record, "kind", "seq", "t", "extra"})))
        action = draw(st.sampled_from(["replace", "drop"]))
        if action == "drop":
            record.pop(name, None)
        else:
            record[name] = draw(st.one_of(json_values, odd_numbers, odd_text))
    return dumps(record)


@given(st.text(max_size=300))
def test_any_text_is_a_record_or_a_one_line_remote_error(line: str) -> None:
    _check(line)


@given(mutated_records())
def test_any_mutated_record_is_a_record_or_a_one_line_remote_error(line: str) -> None:
    _check(line)


@given(json_values)
def test_any_json_value_is_a_record_or_a_one_line_remote_error(value: object) -> None:
    _check(dumps(value))


@given(st.sampled_from([deep(100_000), "[" * 5000, '{"kind": "gpu", "seq": ' + "9" * 5000 + "}",
                        '{"kind": "' + "k" * 100_000 + '", "seq": 1, "t": 1}', "\x00" * 1000,
                        '{"kind": "gpu", "seq": 1, "t": 1' + "0" * 400 + "}"]))
def test_hostile_extremes_are_one_line_remote_errors(line: str) -> None:
    _check(line)


class _Clock(AgentClock):
    def __init__(self) -> None:
        super().__init__()
        self.t = 1_800_000_000.0

    def now(self) -> float:
        self.t += 0.25
        return self.t


marker_bodies = st.one_of(
    st.dictionaries(st.sampled_from(["units", "accepted", "data_wait_s", "compute_s", "latency_ms", "phase",
                                     "detail", "t", "x"]),
                    st.one_of(json_values, odd_numbers, st.lists(odd_numbers, max_size=4)), max_size=6).map(dumps),
    json_values.map(dumps), st.text(max_size=60),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
)


@given(st.lists(st.one_of(marker_bodies.map(lambda body: MARKER + body.encode("utf-8", "surrogatepass")),
                          st.binary(max_size=80)), max_size=6))
def test_any_workload_output_leaves_the_agent_writing_records_the_console_reads(lines: list[bytes]) -> None:
    out = io.StringIO()
    emitter = Emitter(_Clock(), out, None)
    reader = MarkerReader(emitter, _Clock())
    for chunk in lines:
        for line in chunk.split(b"\n"):  # the agent reads its workload's stdout line by line
            reader.feed(line + b"\n")
    for written in out.getvalue().splitlines():
        record = parse_record(written, where=WHERE)  # raises if the agent wrote what the console cannot read
        assert record.seq >= 1
        if json.loads(written)["kind"] == RecordKind.ERROR:
            assert "\n" not in json.loads(written)["message"]


HOSTILE_MARKERS = [
    b"[" * 100_000, b'{"t": 1' + b"0" * 400 + b"}", b'{"units": 1, "latency_ms": [1' + b"0" * 400 + b"]}",
    b'{"units": 1, "data_wait_s": 1' + b"0" * 400 + b"}", b'{"units": 1' + b"0" * 5000 + b"}",
    b'{"phase": "x", "detail": NaN}', b'{"phase": "x", "detail": {"a": [1, 2]}}', b'{"t": NaN}',
    b'{"t": Infinity, "phase": "x"}', b'{"units": -1}', b'{"units": 5, "accepted": 6}', b"\xff\xfe{}",
    b'{"phase": "' + b"p" * 10_000 + b'"}', b"null", b'"text"', b"",
]


@given(st.lists(st.sampled_from(HOSTILE_MARKERS), min_size=1, max_size=4))
def test_hostile_markers_are_bad_marker_records_never_an_agent_crash(bodies: list[bytes]) -> None:
    out = io.StringIO()
    reader = MarkerReader(Emitter(_Clock(), out, None), _Clock())
    for body in bodies:
        reader.feed(MARKER + body + b"\n")
    written = out.getvalue().splitlines()
    assert written, "a marker produced no record at all"
    for line in written:
        record = parse_record(line, where=WHERE)
        assert record.seq >= 1
