"""Fuzzing the manifest loader: any file a careless or hostile hand writes is a manifest or one ``ManifestError``
that names the file (and the line and dotted field where it can), in one bounded line — never a traceback.

Mutations start from the example manifest (every key, every section) so that most cases get past TOML and into
the field checks; raw bytes and TOML fragments cover the reader itself.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
import shutil
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.fuzz_support import assert_one_line
from vastui.bench.manifest import load_manifest
from vastui.errors import ManifestError
from vastui.vast.query import parse_query

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "resnet.toml"
BASE = EXAMPLE.read_text(encoding="utf-8")
ASSIGNMENT = re.compile(r"(?m)^(\w+) = (.*)$")
KEYS = [m.group(1) for m in ASSIGNMENT.finditer(BASE)]


def toml_value(value: object) -> str:
    """A TOML literal for ``value`` (strings escaped as TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        escaped = "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" for c in value
                          if ord(c) < 0x10000 and not 0xD800 <= ord(c) <= 0xDFFF)
        return f'"{escaped}"'
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise AssertionError(value)


toml_scalars = st.one_of(
    st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.just(0), st.just(-1),
    st.floats(allow_nan=True, allow_infinity=True), st.just(1e308), st.just(5e-324),
    st.text(max_size=20), st.just(""), st.just("../secret/vast_api_key"), st.just("/etc/hostname"),
    st.just("x" * 3000), st.just("gpu_ram>=16 bogus<<"), st.sampled_from(["p99", "p50", "p100", "p0", "fp32", "bf16"]),
    st.dates(), st.datetimes(), st.times(),
)
toml_values = st.recursive(toml_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), inner, max_size=3)),
    max_leaves=8)


def _replace_with(line: str, _match: re.Match[str]) -> str:
    return line


def _append_line(line: str, match: re.Match[str]) -> str:
    return f"{match.group(0)}\n{line}"


@st.composite
def mutated_manifests(draw: st.DrawFn) -> str:
    text = BASE
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(KEYS))
        action = draw(st.sampled_from(["set", "set", "set", "drop", "duplicate", "add"]))
        pattern = re.compile(rf"(?m)^{key} = .*$")
        if action == "set":
            literal = toml_value(draw(toml_values))
            text = pattern.sub(functools.partial(_replace_with, f"{key} = {literal}"), text, count=1)
        elif action == "drop":
            text = pattern.sub("", text, count=1)
        elif action == "duplicate":
            text = pattern.sub(lambda m: f"{m.group(0)}\n{m.group(0)}", text, count=1)
        else:
            name = draw(st.from_regex(r"[a-z_]{1,10}", fullmatch=True))
            extra = f"{name} = {toml_value(draw(toml_scalars))}"
            text = pattern.sub(functools.partial(_append_line, extra), text, count=1)
    return text


def _load(folder: Path, data: bytes) -> None:
    shutil.copy(EXAMPLE.with_name("resnet-canary.jsonl"), folder / "resnet-canary.jsonl")
    path = folder / "fuzz.toml"
    path.write_bytes(data)
    try:
        load_manifest(path, check_query=parse_query)
    except ManifestError as exc:
        assert_one_line(exc, kind=ManifestError, where=str(path))
        assert exc.field.strip()


@given(mutated_manifests())
def test_any_mutated_manifest_loads_or_is_one_manifest_error(tmp_path_factory, text: str) -> None:  # type: ignore[no-untyped-def]
    _load(tmp_path_factory.mktemp("m"), text.encode("utf-8"))


@given(st.binary(max_size=300))
def test_any_bytes_load_or_are_one_manifest_error(tmp_path_factory, data: bytes) -> None:  # type: ignore[no-untyped-def]
    _load(tmp_path_factory.mktemp("m"), data)


@given(st.lists(st.sampled_from(["[workload]", "[budget]", "[[workload]]", "a = 1", "a.b = 2", "[a.b]", "=",
                                 "x = [", "]", "{", "}", '"', "'''", "x = {a = [1, {b = 2}]}", "\n", "# c",
                                 "max_usd = 1e400", "units = 99999999999999999999", "\x00", "\r", "\ufeff"]),
                max_size=10).map("\n".join))
def test_toml_fragments_load_or_are_one_manifest_error(tmp_path_factory, text: str) -> None:  # type: ignore[no-untyped-def]
    _load(tmp_path_factory.mktemp("m"), text.encode("utf-8"))


def test_the_unmutated_example_loads(tmp_path: Path) -> None:
    _load(tmp_path, BASE.encode("utf-8"))  # the mutations start from a manifest that is valid
    assert load_manifest(tmp_path / "fuzz.toml", check_query=parse_query).workload.name == "sim-resnet"
