"""The workload manifest: defaults, validation that names file:line: field, and the identity digest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vastui.bench import manifest as m
from vastui.bench.manifest import load_manifest
from vastui.errors import ManifestError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "resnet.toml"
IMAGE = "vastui/sim-resnet@sha256:" + "ab" * 32
DIGEST = "sha256:" + "cd" * 32

MINIMAL = f"""\
[workload]
name = "w"
image = "{IMAGE}"
command = ["python3", "-m", "simworkload"]
inputs = ["data.bin"]
image_size_gb = 4

[correctness]
expected_digest = "{DIGEST}"

[production]
units = 1000

[budget]
max_usd = 3.5
"""


def write(tmp_path: Path, text: str, *, data: bytes = b"\x00\x01payload") -> Path:
    (tmp_path / "data.bin").write_bytes(data)
    path = tmp_path / "w.toml"
    path.write_text(text)
    return path


def test_minimal_manifest_takes_method_defaults(tmp_path: Path) -> None:
    manifest = load_manifest(write(tmp_path, MINIMAL))
    assert manifest.workload.command == ("python3", "-m", "simworkload")
    assert manifest.workload.inputs[0].size_bytes == 9
    assert manifest.warmup == m.WarmupRule(min_s=30.0, min_steps=20, cv_max=0.05, window=10, cap_s=180.0)
    assert (manifest.measure.block_s, manifest.measure.block_min_steps) == (30.0, 20)
    assert (manifest.measure.min_blocks, manifest.measure.winner_min_blocks) == (5, 10)
    assert manifest.shortlist.max_candidates == 8 and manifest.shortlist.min_hosts_per_model == 2
    assert manifest.shortlist.query == "" and manifest.shortlist.max_dph is None
    assert manifest.tuning.min_gain == 0.02 and manifest.tuning.min_pairs == 5 and manifest.tuning.batch_sizes == ()
    assert manifest.slo == m.Slo()
    assert manifest.production_units == 1000
    assert manifest.correctness.expected_digest == DIGEST
    assert manifest.correctness.fold_canary is False   # a workload must be known to honour VASTUI_CANARY_STEPS
    assert manifest.digest.startswith("sha256:") and len(manifest.digest) == 71


def test_the_canary_is_folded_into_the_first_run_only_when_the_manifest_says_so(tmp_path: Path) -> None:
    text = MINIMAL.replace(f'expected_digest = "{DIGEST}"', f'expected_digest = "{DIGEST}"\nfold_canary = true')
    assert load_manifest(write(tmp_path, text)).correctness.fold_canary is True
    assert load_manifest(EXAMPLE).correctness.fold_canary is False


@pytest.mark.parametrize(("predicted_pull_s", "deadline_s"), [(0.0, 600.0), (100.0, 600.0), (200.0, 600.0),
                                                                (300.0, 900.0), (1000.0, 3000.0)])
def test_readiness_deadline_is_max_of_ten_minutes_and_three_pulls(tmp_path: Path, predicted_pull_s: float,
                                                                  deadline_s: float) -> None:
    budget = load_manifest(write(tmp_path, MINIMAL)).budget
    assert budget.readiness_deadline_s(predicted_pull_s=predicted_pull_s) == deadline_s


def test_example_manifest_loads() -> None:
    manifest = load_manifest(EXAMPLE)
    assert manifest.workload.name == "sim-resnet"
    assert manifest.workload.command == ("python3", "-m", "simworkload", "--input", "resnet-canary.jsonl")
    assert manifest.slo.latency == m.LatencyCeiling(percentile=99.0, max_ms=2000.0)
    assert manifest.slo.throughput_min_units_per_s == 40.0
    assert manifest.tuning.precisions == ("fp32", "bf16")
    assert "gpu_ram>=16" in manifest.shortlist.query


def test_digest_changes_with_any_input_byte_and_not_with_budget(tmp_path: Path) -> None:
    base = load_manifest(write(tmp_path, MINIMAL, data=b"abcdef")).digest
    assert load_manifest(write(tmp_path, MINIMAL, data=b"abcdef")).digest == base
    assert load_manifest(write(tmp_path, MINIMAL, data=b"abcdeg")).digest != base  # one byte
    assert load_manifest(write(tmp_path, MINIMAL, data=b"abcdef\n")).digest != base  # one more byte
    assert load_manifest(write(tmp_path, MINIMAL.replace('"-m", ', ""), data=b"abcdef")).digest != base
    assert load_manifest(write(tmp_path, MINIMAL.replace("ab" * 32, "ac" * 32), data=b"abcdef")).digest != base
    # Budget, SLO and statistics settings judge the workload; they are not the workload.
    assert load_manifest(write(tmp_path, MINIMAL.replace("max_usd = 3.5", "max_usd = 9"), data=b"abcdef")
                         ).digest == base


def test_example_digest_changes_when_its_input_file_changes(tmp_path: Path) -> None:
    for name in ("resnet.toml", "resnet-canary.jsonl"):
        shutil.copy(EXAMPLE.parent / name, tmp_path / name)
    before = load_manifest(tmp_path / "resnet.toml").digest
    assert before == load_manifest(EXAMPLE).digest  # the digest does not depend on where the files lie
    data = bytearray((tmp_path / "resnet-canary.jsonl").read_bytes())
    data[len(data) // 2] ^= 0x01
    (tmp_path / "resnet-canary.jsonl").write_bytes(bytes(data))
    assert load_manifest(tmp_path / "resnet.toml").digest != before


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# (edit to MINIMAL, field named, the text whose line the error must point at, words of the reason)
BROKEN = [
    (("image = ", 'image = "vastui/sim-resnet:latest"\n#'), "workload.image", "image = ", "pinned by digest"),
    (("units = 1000", "units = 0"), "production.units", "units = 0", ">= 1"),
    (("units = 1000", 'units = "many"'), "production.units", "units = ", "integer"),
    (("max_usd = 3.5", "max_usd = -1"), "budget.max_usd", "max_usd", "> 0"),
    (("max_usd = 3.5", "max_usd = 3.5\nmax_instaces = 2"), "budget.max_instaces", "max_instaces",
     "did you mean 'max_instances'"),
    (('command = ["python3", "-m", "simworkload"]', "command = []"), "workload.command", "command = []",
     "non-empty"),
    (('inputs = ["data.bin"]', 'inputs = ["missing.bin"]'), "workload.inputs", "inputs = ", "missing.bin"),
    ((f'expected_digest = "{DIGEST}"', 'expected_digest = "abc"'), "correctness.expected_digest",
     "expected_digest", "64 hex"),
    ((f'expected_digest = "{DIGEST}"', "tolerance = 0.1"), "correctness", "[correctness]", "expected_digest"),
    ((f'expected_digest = "{DIGEST}"', f'expected_digest = "{DIGEST}"\nfold_canary = "yes"'),
     "correctness.fold_canary", "fold_canary", "true or false"),
    (("max_usd = 3.5", "max_usd = 3.5\n[slo]\nlatency_percentile = \"p98\"\nlatency_max_ms = 5"),
     "slo.latency_percentile", "latency_percentile", "p99"),
    (("max_usd = 3.5", "max_usd = 3.5\n[slo]\nlatency_max_ms = 5"), "slo.latency_percentile", "[slo]",
     "go together"),
    (("max_usd = 3.5", "max_usd = 3.5\n[measure]\nmin_blocks = 6\nwinner_min_blocks = 5"),
     "measure.winner_min_blocks", "winner_min_blocks", "at least min_blocks"),
    (("max_usd = 3.5", "max_usd = 3.5\n[tuning]\nprecisions = [\"fp17\"]"), "tuning.precisions", "precisions",
     "fp17"),
    (("max_usd = 3.5", "max_usd = 3.5\n[tuning]\nbatch_sizes = [64, 64]"), "tuning.batch_sizes", "batch_sizes",
     "twice"),
    (("max_usd = 3.5", "max_usd = 3.5\n[warmup]\ncv_max = true"), "warmup.cv_max", "cv_max", "boolean"),
    (("max_usd = 3.5", "max_usd = 3.5\n[warmup]\nmin_s = nan"), "warmup.min_s", "min_s", "finite"),
    (("[budget]", "[budgets]"), "budgets", "[budgets]", "did you mean 'budget'"),
    (("image_size_gb = 4", "image_size_gb = = 4"), "workload.image_size_gb", "image_size_gb", "not valid TOML"),
]


@pytest.mark.parametrize(("edit", "field", "needle", "words"), BROKEN, ids=[b[1] for b in BROKEN])
def test_broken_manifest_names_file_line_and_field(tmp_path: Path, edit: tuple[str, str], field: str,
                                                   needle: str, words: str) -> None:
    old, new = edit
    assert old in MINIMAL
    text = MINIMAL.replace(old, new, 1)
    path = write(tmp_path, text)
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    err = caught.value
    assert (err.path, err.field) == (str(path), field)
    assert err.line == line_of(text, needle)
    assert str(err).startswith(f"{path}:{err.line}: {field} — ")
    assert words in err.reason


def test_missing_sections_and_keys_point_at_something_useful(tmp_path: Path) -> None:
    text = MINIMAL.replace("[production]\nunits = 1000\n", "")
    with pytest.raises(ManifestError) as caught:
        load_manifest(write(tmp_path, text))
    assert (caught.value.field, caught.value.line) == ("production", 1)
    text = MINIMAL.replace("max_usd = 3.5\n", "max_instances = 2\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(write(tmp_path, text))
    assert (caught.value.field, caught.value.line) == ("budget.max_usd", line_of(text, "[budget]"))
    assert "required" in caught.value.reason


def test_unreadable_file_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path / "nope.toml")
    assert caught.value.field == "<file>" and "cannot read" in caught.value.reason


def test_dotted_keys_are_located_too(tmp_path: Path) -> None:
    # Top-level dotted keys (before any table header) are another way to write [budget].
    text = "budget.max_usd = 3.5\nbudget.max_instances = 0\n" + MINIMAL.replace("[budget]\nmax_usd = 3.5\n", "")
    with pytest.raises(ManifestError) as caught:
        load_manifest(write(tmp_path, text))
    assert caught.value.field == "budget.max_instances"
    assert caught.value.line == 2
