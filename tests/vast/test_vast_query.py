"""The offer query language: known answers from the captured CLI traffic, errors with columns, and properties
against a reference grammar and against the official vastai parser itself."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vastui.errors import QueryError
from vastui.vast.query import build_search_body, parse_order, parse_query
from vastui.vast.query_fields import (
    BOOL_FIELDS,
    DEFAULT_FILTERS,
    FIELD_ALIASES,
    FIELD_MULTIPLIERS,
    NUMERIC_FIELDS,
    STRING_FIELDS,
)


def _load_official() -> ModuleType:
    """vastai's ``api/query.py`` loaded on its own (the package's __init__ pulls in the whole SDK)."""
    spec = importlib.util.find_spec("vastai")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "api" / "query.py"
    module_spec = importlib.util.spec_from_file_location("_official_vastai_query", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


OFFICIAL = _load_official()


def official_parse(query: str, *, defaults: bool = False) -> dict[str, Any]:
    base = json.loads(json.dumps(DEFAULT_FILTERS)) if defaults else {}
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        result: dict[str, Any] = OFFICIAL.parse_query(query, base, OFFICIAL.offers_fields, OFFICIAL.offers_alias,
                                                      OFFICIAL.offers_mult)
    return result


def dumps(value: object) -> str:
    """JSON text, key order kept: what goes on the wire (and True != 1 here)."""
    return json.dumps(value, separators=(",", ":"))


# --- known answers (docs/api-notes.md §3.1 and §4, captured from the real CLI) ------------------------------------

CAPTURED_BODY = (
    '{"verified":{"eq":true},"external":{"eq":false},"rentable":{"eq":true},"gpu_name":{"eq":"RTX 4090"},'
    '"num_gpus":{"eq":"1"},"reliability":{"gt":"0.98"},"gpu_ram":{"gte":24000.0},"geolocation":{"in":["US","SE"]},'
    '"cuda_max_good":{"gte":"12.1"},"order":[["dlperf_per_dphtotal","desc"]],"type":"on-demand",'
    '"allocated_storage":5.0}'
)


def test_captured_search_body_matches_exactly() -> None:
    body = build_search_body(
        "gpu_name=RTX_4090 num_gpus=1 reliability>0.98 gpu_ram>=24 geolocation in [US,SE] cuda_vers>=12.1",
        order="dlperf_usd-",
    )
    assert dumps(body) == CAPTURED_BODY


def test_captured_type_limit_storage_tail() -> None:
    body = build_search_body("", order="num_gpus-,dph+,score", type_="bid", limit=3, storage_gib=50)
    assert dumps(body).endswith(
        '"order":[["num_gpus","desc"],["dph_total","asc"],["score","asc"]],"type":"bid","limit":3,'
        '"allocated_storage":50.0}'
    )


BIG_QUERY = (
    'gpu_name in ["RTX 4090", "RTX 3090"] geolocation notin [CN,VN] driver_version >= 535.86.05 duration>7 '
    "datacenter=True cpu_ram>64 disk_space>100 dph<1.5 compute_cap>=800 static_ip=true has_avx=1 gpu_total_ram<=80"
)
BIG_ANSWER = (
    '{"gpu_name":{"in":["RTX 4090","RTX 3090"]},"geolocation":{"notin":["CN","VN"]},'
    '"driver_version":{"gte":535086005},"duration":{"gt":604800.0},"datacenter":{"eq":true},'
    '"cpu_ram":{"gt":64000.0},"disk_space":{"gt":"100"},"dph_total":{"lt":"1.5"},"compute_cap":{"gte":"800"},'
    '"static_ip":{"eq":true},"has_avx":{"eq":"1"},"gpu_total_ram":{"lte":80000.0}}'
)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (BIG_QUERY, BIG_ANSWER),
        ('gpu_name="RTX 4090"', '{"gpu_name":{"eq":"RTX 4090"}}'),
        ("num_gpus>=2 num_gpus<=4", '{"num_gpus":{"gte":"2","lte":"4"}}'),
        ("num_gpus>=2 num_gpus>=3", '{"num_gpus":{"gte":"3"}}'),
        ("mobo_name=X99_Pro", '{"mobo_name":{"eq":"X99 Pro"}}'),
        ("verified in [true,false]", '{"verified":{"in":["true","false"]}}'),
        ("gpu_name=TRUE", '{"gpu_name":{"eq":"TRUE"}}'),
        ("gpu_name=null", '{"gpu_name":{"eq":null}}'),
        ("num_gpus gte 2 num_gpus lt 8", '{"num_gpus":{"gte":"2","lt":"8"}}'),
        ("num_gpus not eq 3 geolocation not in [US] gpu_name nin [A100]",
         '{"num_gpus":{"neq":"3"},"geolocation":{"notin":["US"]},"gpu_name":{"notin":["A100"]}}'),
        ("num_gpus noteq 3 geolocation notin US,SE", '{"num_gpus":{"neq":"3"},"geolocation":{"notin":["US","SE"]}}'),
        ("num_gpus == 2", '{"num_gpus":{"eq":"2"}}'),
        ("  num_gpus=2  ", '{"num_gpus":{"eq":"2"}}'),
        ("dph=any", "{}"),
        ("num_gpus=2 num_gpus=* num_gpus>1", '{"num_gpus":{"gt":"1"}}'),
        ("driver_version=550", '{"driver_version":{"eq":"550"}}'),
        ("display_active=false flops_usd>2", '{"gpu_display_active":{"eq":false},"flops_per_dphtotal":{"gt":"2"}}'),
        ("", "{}"),
    ],
)
def test_known_answers(query: str, expected: str) -> None:
    assert dumps(parse_query(query)) == expected
    assert dumps(official_parse(query)) == expected


def test_wildcards_remove_defaults() -> None:
    body = build_search_body("verified=any rentable=any external=?")
    assert list(body) == ["order", "type", "allocated_storage"]
    assert build_search_body("verified=false")["verified"] == {"eq": False}
    assert "verified" not in build_search_body("", no_default=True)


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("-dph,+num_gpus,flops_usd-,cuda_vers",
         [["dph_total", "desc"], ["num_gpus", "asc"], ["flops_per_dphtotal", "desc"], ["cuda_max_good", "asc"]]),
        ("score-", [["score", "desc"]]),
        ("dlperf_usd-", [["dlperf_per_dphtotal", "desc"]]),
        (" num_gpus- , ,dph+", [["num_gpus", "desc"], ["dph_total", "asc"]]),
    ],
)
def test_order(order: str, expected: list[list[str]]) -> None:
    assert parse_order(order) == expected
    assert OFFICIAL.parse_order(order) == expected


def test_interruptible_is_bid_and_no_limit_is_absent() -> None:
    body = build_search_body("", type_="interruptible", limit=None)
    assert body["type"] == "bid"
    assert "limit" not in body


# --- errors point at the offending token ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("query", "column", "words"),
    [
        ("gpu_name='RTX 4090'", 10, "single quotes"),
        ("gpu_name='RTX4090'", 10, "single quotes"),
        ("gpu_nam=RTX_4090", 1, "did you mean gpu_name"),
        ("num_gpus=2 relability>0.9", 12, "did you mean reliability"),
        ("num_gpus=>2", 9, "unknown operator"),
        ("num_gpus<>2", 9, "unknown operator"),
        ("num_gpus>=", 9, "blank"),
        ("num_gpus=[]", 10, "blank"),
        ('gpu_name=""', 10, "blank"),
        ("gpu_ram in [24,48]", 9, "cannot be used with"),
        ("num_gpus>=two", 11, "takes a number"),
        ("num_gpus>= reliability>0.9", 12, "takes a number"),
        ("reliability>any", 13, "wildcard"),
        ("gpu_name in [A100,any]", 19, "wildcard"),
        (">5", 1, "field name"),
        ("num_gpus=2 >5", 12, "field name"),
        ('gpu_name="RTX 4090', 10, "unclosed"),
        ('gpu_name=RTX"4090', 13, "stray"),
        ("gpu_name=RTX 4090", 14, "double-quoted"),
        ("num_gpus", 1, "expected an operator"),
        ("gpu_name RTX", 10, "expected an operator"),
        ("driver_version>=535.86", 17, "driver version"),
        ("verified=yes", 10, "true or false"),
        ("gpu_ram>=lots", 10, "number of GB"),
        ("duration>nan", 10, "number of days"),
        ("geolocation in [US,,SE,'X']", 24, "single quotes"),
        ("num_gpus in [1, x]", 17, "takes numbers"),
    ],
)
def test_errors_name_the_column(query: str, column: int, words: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse_query(query)
    assert caught.value.column == column, str(caught.value)
    assert words in caught.value.reason
    # the caret line points under the column
    lines = str(caught.value).splitlines()
    assert lines[2].index("^") - 2 == column - 1


@pytest.mark.parametrize(
    ("order", "column"), [("dph+-", 1), ("num_gpus-,dphh", 11), ("score,-", 7)],
)
def test_order_errors_name_the_column(order: str, column: int) -> None:
    with pytest.raises(QueryError) as caught:
        parse_order(order)
    assert caught.value.column == column


def test_bad_type_and_storage_are_errors() -> None:
    with pytest.raises(QueryError):
        build_search_body("", type_="cheap")
    with pytest.raises(QueryError):
        build_search_body("", storage_gib=float("nan"))


# --- reference grammar ----------------------------------------------------------------------------------------------

SYMBOLIC = {"eq": ["=", "=="], "neq": ["!="], "gt": [">"], "gte": [">="], "lt": ["<"], "lte": ["<="]}
WORDS = {"eq": ["eq"], "neq": ["neq", "noteq", "not eq"], "gt": ["gt"], "gte": ["gte"], "lt": ["lt"],
         "lte": ["lte"], "in": ["in"], "notin": ["notin", "nin", "not in"]}
NAMES_BY_FIELD: dict[str, list[str]] = {}
for _alias, _field in FIELD_ALIASES.items():
    NAMES_BY_FIELD.setdefault(_field, []).append(_alias)

numbers = st.from_regex(r"\A[+-]?(?:[0-9]{1,4}(?:\.[0-9]{1,3})?|\.[0-9]{1,2})(?:[eE][+-]?[0-9])?\Z")
bool_words = st.sampled_from(["true", "True", "false", "False", "0", "1"])
words = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:/-]{0,8}\Z").filter(lambda w: w not in {"any"})
quoted = st.from_regex(r'\A"[A-Za-z0-9][A-Za-z0-9 _.]{0,8}[A-Za-z0-9]"\Z')
versions = st.tuples(st.integers(1, 999), st.integers(0, 999), st.integers(0, 999))

SCALAR_CONVERSIONS: dict[str, object] = {"true": True, "True": True, "false": False, "False": False,
                                         "null": None, "None": None}


@st.composite
def terms(draw: st.DrawFn) -> tuple[str, str, str, object]:
    """One valid term: (text, canonical field, op, expected value); expected value None+op '' means removal."""
    field = draw(st.sampled_from(sorted(NUMERIC_FIELDS | BOOL_FIELDS | STRING_FIELDS | {"driver_version"})))
    name = draw(st.sampled_from([field, *NAMES_BY_FIELD.get(field, [])]))
    ops = ["eq", "neq", "gt", "gte", "lt", "lte"]
    if field not in FIELD_MULTIPLIERS:
        ops += ["in", "notin"]
    op = draw(st.sampled_from(ops))
    if op in ("in", "notin"):
        spelling = " " * draw(st.integers(1, 2)) + draw(st.sampled_from(WORDS[op])) + " " * draw(st.integers(1, 2))
        text, expected = draw(list_values(field))
    else:
        if draw(st.booleans()):
            spelling = " " * draw(st.integers(0, 1)) + draw(st.sampled_from(SYMBOLIC[op]))
            spelling += " " * draw(st.integers(0, 1))
        else:
            spelling = " " + draw(st.sampled_from(WORDS[op])) + " " * draw(st.integers(1, 2))
        if op == "eq" and draw(st.integers(0, 9)) == 0:
            return name + spelling + draw(st.sampled_from(["any", "*", "?"])), field, "", None
        text, expected = draw(scalar_values(field))
    return name + spelling + text, field, op, expected


@st.composite
def scalar_values(draw: st.DrawFn, field: str) -> tuple[str, object]:
    if field == "driver_version":
        parts = draw(versions)
        pads = [draw(st.sampled_from([str(p), str(p).zfill(2), str(p).zfill(3)])) for p in parts]
        pads = [p if len(p) <= 3 else str(int(p)) for p in pads]
        return ".".join(pads), int("".join(str(int(p)).zfill(3) for p in pads))
    if field in FIELD_MULTIPLIERS:
        text = draw(numbers)
        return text, float(text) * FIELD_MULTIPLIERS[field]
    if field in NUMERIC_FIELDS:
        text = draw(numbers)
    elif field in BOOL_FIELDS:
        text = draw(bool_words)
    else:
        text = draw(st.one_of(words, quoted, bool_words))
    value = text.replace("_", " ").strip('"')
    return text, SCALAR_CONVERSIONS.get(value, value)


@st.composite
def list_values(draw: st.DrawFn, field: str) -> tuple[str, object]:
    if field == "driver_version":
        items = draw(st.lists(st.integers(0, 999999), min_size=1, max_size=3).map(lambda xs: [str(x) for x in xs]))
    elif field in NUMERIC_FIELDS:
        items = draw(st.lists(numbers, min_size=1, max_size=3))
    elif field in BOOL_FIELDS:
        items = draw(st.lists(bool_words, min_size=1, max_size=3))
    else:
        items = draw(st.lists(st.one_of(words, quoted), min_size=1, max_size=3))
    has_quotes = any('"' in item for item in items)
    separator = draw(st.sampled_from([",", ", "])) if has_quotes or draw(st.booleans()) else ","
    joined = separator.join(items)
    # a bare (unbracketed) list is one run of non-space characters and cannot start with a quote
    text = f"[{joined}]" if has_quotes or " " in joined or draw(st.booleans()) else joined
    return text, [item.replace("_", " ").strip('"') for item in items]


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, dict[str, dict[str, object]]]:
    """A valid query and the filters the reference semantics give it."""
    drawn = draw(st.lists(terms(), max_size=6))
    expected: dict[str, dict[str, object]] = {}
    for _, field, op, value in drawn:
        ops = expected.setdefault(field, {})
        if not op:
            del expected[field]
            continue
        ops[op] = value
    gaps = [" " * draw(st.integers(1, 2)) for _ in drawn]
    text = "".join(term[0] + gap for term, gap in zip(drawn, gaps, strict=False))
    return " " * draw(st.integers(0, 1)) + text, expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries())
def test_valid_queries_parse_as_the_grammar_says(case: tuple[str, dict[str, dict[str, object]]]) -> None:
    query, expected = case
    assert dumps(parse_query(query)) == dumps(expected)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries())
def test_valid_queries_parse_as_the_official_cli_does(case: tuple[str, dict[str, dict[str, object]]]) -> None:
    query, _ = case
    assume("driver_version in" not in query and "driver_version not" not in query
           and "driver_version nin" not in query)  # the official parser crashes on these
    assert dumps(parse_query(query, base=DEFAULT_FILTERS)) == dumps(official_parse(query, defaults=True))


JUNK = list("'\"=<>![],_*? a9.") + ["  ", " in ", "any", "\t"]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    query, _ = draw(queries())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(query)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "truncate"]))
        junk = draw(st.sampled_from(JUNK))
        if kind == "insert":
            query = query[:at] + junk + query[at:]
        elif kind == "delete":
            query = query[:at] + query[at + 1:]
        elif kind == "replace":
            query = query[:at] + junk + query[at + 1:]
        else:
            query = query[:at]
    return query


@settings(max_examples=int(os.environ.get("VASTUI_HYPOTHESIS_EXAMPLES", "400")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutations_either_parse_like_the_official_cli_or_name_a_column(query: str) -> None:
    try:
        ours = parse_query(query)
    except QueryError as exc:
        assert 1 <= exc.column <= len(query)
        assert exc.query == query
        return
    try:
        official = official_parse(query)
    except AttributeError:  # its one crash we accept on purpose: dotted driver versions in a list
        assert "driver_version" in query and "." in query
        return
    assert dumps(ours) == dumps(official)


def _both_paths(query: str) -> tuple[str, str]:
    """(plain path's answer or "not plain", careful path's answer or its error)."""
    from vastui.vast.query import _NotPlain, _parse_careful, _parse_plain

    try:
        plain = dumps(_parse_plain(query, DEFAULT_FILTERS))
    except _NotPlain:
        plain = "not plain"
    try:
        careful = dumps(_parse_careful(query, DEFAULT_FILTERS))
    except QueryError as exc:
        careful = f"error at {exc.column}"
    return plain, careful


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(queries().map(lambda case: case[0]), mutated()))
def test_the_fast_plain_path_answers_as_the_careful_one_or_defers(query: str) -> None:
    """The plain path exists for speed only: where it answers, the careful parser gives the same filters; anything
    the careful parser refuses, the plain path hands over (so errors always come with their column)."""
    plain, careful = _both_paths(query)
    assert plain in ("not plain", careful)


@pytest.mark.parametrize("query", [
    "gpu_name=RTX_4090 num_gpus=1 reliability>0.98 gpu_ram>=24 geolocation in [US,SE] cuda_vers>=12.1",
    'gpu_name in ["RTX 4090", "RTX 3090"] geolocation notin [CN,VN] driver_version >= 535.86.05 duration>7',
    "gpu_name=A100_PCIE num_gpus gte 2 dph lt 4 geolocation=US verified=any static_ip=null",
])
def test_everyday_queries_take_the_plain_path(query: str) -> None:
    plain, careful = _both_paths(query)
    assert plain == careful
