"""The line protocol parser: every kind parses into its dataclass; garbage raises RemoteError saying what and where."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vastui.errors import RemoteError
from vastui.remote.protocol import AgentError, GpuSample, Phase, Progress, RecordKind, Result, parse_record

GPU = {"kind": "gpu", "seq": 2, "t": 10.5, "index": 1, "name": "NVIDIA H100", "uuid": "GPU-1", "util_pct": 97,
       "mem_util_pct": 40.0, "mem_used_mib": 70000.5, "mem_total_mib": 81559.0, "power_w": 650.2,
       "pcie_rx_kib_s": 1200.0, "pcie_tx_kib_s": 30.0, "sm_clock_mhz": 1980.0, "temp_c": 71.0,
       "throttle_reasons": ["sw_power_cap"]}
PROGRESS = {"kind": "progress", "seq": 3, "t": 11.0, "units": 64, "accepted": 60, "data_wait_s": 0.25,
            "compute_s": 1.5, "latency_ms": [10, 11.5], "units_total": 128, "accepted_total": 120, "phase": "measure"}
PHASE = {"kind": "phase", "seq": 1, "t": 9.0, "name": "ready", "detail": None, "agent_version": "1",
         "python": "3.8.18", "gpu_count": 8, "driver_version": "550.54.14"}
RESULT = {"kind": "result", "seq": 9, "t": 20.0, "exit_status": 0, "signal": None, "output_digest": "sha256:ab",
          "output_bytes": 12, "units_total": 128, "accepted_total": 120, "elapsed_s": 11.0, "stderr_tail": ""}
ERROR = {"kind": "error", "seq": 4, "t": 12.0, "what": "gpu_lost", "message": "GPU 1 fell off the bus", "gpu": 1}


def test_every_kind_parses_into_its_dataclass() -> None:
    gpu = parse_record(json.dumps(GPU))
    assert isinstance(gpu, GpuSample) and gpu.util_pct == 97.0 and gpu.throttle_reasons == ("sw_power_cap",)
    assert gpu.is_throttled
    progress = parse_record(json.dumps(PROGRESS))
    assert isinstance(progress, Progress) and progress.latency_ms == (10.0, 11.5) and progress.phase == "measure"
    phase = parse_record(json.dumps(PHASE))
    assert isinstance(phase, Phase) and phase.gpu_count == 8 and phase.detail is None
    result = parse_record(json.dumps(RESULT))
    assert isinstance(result, Result) and result.exit_status == 0 and result.output_digest == "sha256:ab"
    error = parse_record(json.dumps(ERROR))
    assert error == AgentError(seq=4, t=12.0, what="gpu_lost", message="GPU 1 fell off the bus", gpu=1)
    assert {kind.value for kind in RecordKind} == {"gpu", "progress", "phase", "result", "error"}


def test_missing_optional_metrics_are_none_and_idle_reasons_are_not_throttling() -> None:
    sample = parse_record(json.dumps({"kind": "gpu", "seq": 1, "t": 1.0, "index": 0,
                                      "throttle_reasons": ["gpu_idle"]}))
    assert isinstance(sample, GpuSample)
    assert sample.util_pct is None and sample.power_w is None and not sample.is_throttled


@pytest.mark.parametrize(("line", "what"), [
    ("", "not JSON"),
    ("{\"kind\": \"gpu\"", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({**GPU, "kind": "telemetry"}), "unknown kind 'telemetry'"),
    (json.dumps({k: v for k, v in GPU.items() if k != "seq"}), "'seq' is missing"),
    (json.dumps({**GPU, "seq": 0}), "seq must be positive"),
    (json.dumps({**GPU, "seq": True}), "'seq' must be an integer"),
    (json.dumps({**GPU, "t": "noon"}), "'t' must be a finite number"),
    (json.dumps({**GPU, "util_pct": "high"}), "'util_pct' must be a finite number"),
    ('{"kind": "gpu", "seq": 1, "t": NaN, "index": 0}', "'t' must be a finite number"),
    (json.dumps({**GPU, "throttle_reasons": [1]}), "'throttle_reasons' must be a list of strings"),
    (json.dumps({**PROGRESS, "latency_ms": "fast"}), "'latency_ms' must be a list of numbers"),
    (json.dumps({**PROGRESS, "latency_ms": [1, None]}), "'latency_ms' must be a finite number"),
    (json.dumps({k: v for k, v in PROGRESS.items() if k != "units"}), "'units' is missing"),
    (json.dumps({**PHASE, "name": 3}), "'name' must be a string"),
    (json.dumps({**RESULT, "output_bytes": 1.5}), "'output_bytes' must be an integer"),
])
def test_garbage_raises_remote_error_with_what_and_where(line: str, what: str) -> None:
    with pytest.raises(RemoteError) as caught:
        parse_record(line, where="127.0.0.1:2222")
    message = str(caught.value)
    assert message.startswith("127.0.0.1:2222: bad agent record (") and what in message


@given(st.text(max_size=200))
def test_any_text_is_a_record_or_a_remote_error(line: str) -> None:
    try:
        record = parse_record(line)
    except RemoteError:
        return
    assert record.seq >= 1


@given(st.dictionaries(st.sampled_from(sorted(set(GPU) | set(PROGRESS) | set(RESULT))),
                       st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=5),
                                 st.lists(st.integers(), max_size=3)), max_size=12),
       st.sampled_from([kind.value for kind in RecordKind]))
def test_any_object_is_a_record_or_a_remote_error(fields: dict[str, object], kind: str) -> None:
    try:
        record = parse_record(json.dumps({**fields, "kind": kind}))
    except RemoteError:
        return
    assert record.seq >= 1
