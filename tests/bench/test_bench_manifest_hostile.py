"""Manifests written by a careless or hostile hand: inputs outside the manifest's folder, absurd numbers, deep
nesting, a bad shortlist query — each refused with one ManifestError that names file, line and field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vastui.bench.manifest import load_manifest
from vastui.cli import main
from vastui.errors import ManifestError

IMAGE = "vastui/sim-resnet@sha256:" + "ab" * 32
DIGEST = "sha256:" + "cd" * 32

TEMPLATE = """\
[workload]
name = "w"
image = "{image}"
command = ["python3", "-m", "simworkload"]
inputs = [{inputs}]
image_size_gb = 4

[correctness]
expected_digest = "{digest}"

[production]
units = 1000

[budget]
max_usd = {max_usd}
{extra}"""


def manifest_in(folder: Path, *, inputs: str = '"data.bin"', max_usd: str = "3.5", extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.bin").write_bytes(b"payload")
    path = folder / "w.toml"
    path.write_text(TEMPLATE.format(image=IMAGE, digest=DIGEST, inputs=inputs, max_usd=max_usd, extra=extra))
    return path


def line_of(path: Path, needle: str) -> int:
    return next(i for i, row in enumerate(path.read_text().splitlines(), 1) if needle in row)


@pytest.mark.parametrize("rel", ["../secret/vast_api_key", "/etc/hostname", "sub/../../secret/vast_api_key"])
def test_an_input_outside_the_manifest_folder_is_refused(tmp_path: Path, rel: str) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "vast_api_key").write_text("k" * 64)
    (tmp_path / "job" / "sub").mkdir(parents=True)
    path = manifest_in(tmp_path / "job", inputs=f'"data.bin", "{rel}"')
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    err = caught.value
    assert (err.field, err.line) == ("workload.inputs", line_of(path, "inputs = "))
    assert "outside the manifest's folder" in err.reason and rel in err.reason
    assert "\n" not in str(err)


def test_a_symlink_that_leads_outside_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "vast_api_key").write_text("k" * 64)
    job = tmp_path / "job"
    job.mkdir()
    os.symlink(secret / "vast_api_key", job / "innocent.bin")
    path = manifest_in(job, inputs='"innocent.bin"')
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert caught.value.field == "workload.inputs" and "outside the manifest's folder" in caught.value.reason


def test_inputs_inside_the_folder_still_load_through_subfolders_and_inner_symlinks(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "sub").mkdir(parents=True)
    (job / "sub" / "part.bin").write_bytes(b"abc")
    os.symlink(job / "sub" / "part.bin", job / "alias.bin")
    manifest = load_manifest(manifest_in(job, inputs='"data.bin", "sub/part.bin", "alias.bin"'))
    assert [i.size_bytes for i in manifest.workload.inputs] == [7, 3, 3]


def test_manifest_check_refuses_an_outside_input_in_one_line(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = manifest_in(tmp_path / "job", inputs='"/etc/hostname"')
    assert main(["manifest", "check", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}:{line_of(path, 'inputs = ')}: workload.inputs — ")


@pytest.mark.parametrize("value", ["1e308", "inf", "nan", "-inf", "1e6"])
def test_an_absurd_budget_is_refused(tmp_path: Path, value: str) -> None:
    path = manifest_in(tmp_path, max_usd=value)
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert (caught.value.field, caught.value.line) == ("budget.max_usd", line_of(path, "max_usd"))


def test_an_absurd_price_ceiling_is_refused(tmp_path: Path) -> None:
    path = manifest_in(tmp_path, extra="\n[shortlist]\nmax_dph = 1e308\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert caught.value.field == "shortlist.max_dph"


def test_a_sane_budget_still_loads(tmp_path: Path) -> None:
    assert load_manifest(manifest_in(tmp_path, max_usd="250")).budget.max_usd == 250.0


BAD_QUERY = '\n[shortlist]\nquery = "num_gpus=>2 gpu_name=RTX_4090"\n'


def test_manifest_check_validates_the_shortlist_query(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = manifest_in(tmp_path, extra=BAD_QUERY)
    assert main(["manifest", "check", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{path}:{line_of(path, 'query = ')}: shortlist.query — ")
    assert "=>" in err and "column 9" in err and len(err.splitlines()) == 1


def test_the_loader_checks_the_query_with_the_parser_it_is_given(tmp_path: Path) -> None:
    from vastui.vast.query import parse_query

    path = manifest_in(tmp_path, extra=BAD_QUERY)
    assert load_manifest(path).shortlist.query.startswith("num_gpus=>2")  # bench alone knows no query language
    with pytest.raises(ManifestError) as caught:
        load_manifest(path, check_query=parse_query)
    assert caught.value.field == "shortlist.query" and "column 9" in caught.value.reason
    good = manifest_in(tmp_path / "good", extra='\n[shortlist]\nquery = "num_gpus>=2"\n')
    assert load_manifest(good, check_query=parse_query).shortlist.query == "num_gpus>=2"


def test_campaign_plan_reports_a_bad_query_with_file_and_line(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = manifest_in(tmp_path, extra=BAD_QUERY)
    assert main(["campaign", "plan", str(path), "--url", "http://127.0.0.1:9", "--api-key", "k" * 16]) == 1
    assert f"{path}:{line_of(path, 'query = ')}: shortlist.query" in capsys.readouterr().err
