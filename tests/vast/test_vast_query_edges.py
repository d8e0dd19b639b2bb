"""Search inputs at their edges: ``--limit 0`` is refused (never "everything"), an empty order is refused, and a
field name with a non-ASCII letter is reported whole, with the column of that letter."""

from __future__ import annotations

import pytest

from tests.fakes import subcommand
from vastui.cli import build_parser, main
from vastui.errors import QueryError
from vastui.vast.query import build_search_body, parse_order, parse_query


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(QueryError) as caught:
        build_search_body("", limit=limit)
    assert "at least 1" in caught.value.reason


def test_a_limit_of_one_or_none_still_builds() -> None:
    assert build_search_body("", limit=1)["limit"] == 1
    assert "limit" not in build_search_body("", limit=None)


def test_the_offers_help_says_what_limit_takes() -> None:
    offers = subcommand(build_parser(["offers"]), "offers")
    assert "at least 1" in offers.format_help()


def test_offers_with_limit_zero_fails_before_any_connection(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offers", "--limit", "0", "--url", "http://127.0.0.1:9", "--api-key", "k" * 16]) == 1
    err = capsys.readouterr().err
    assert "limit must be at least 1" in err and "ConnectError" not in err


@pytest.mark.parametrize("order", ["", " ", ",", " , "])
def test_an_empty_order_is_refused(order: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse_order(order)
    assert "empty" in caught.value.reason


def test_offers_with_an_empty_order_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offers", "-o", "", "--url", "http://127.0.0.1:9", "--api-key", "k" * 16]) == 1
    assert "order" in capsys.readouterr().err


@pytest.mark.parametrize(("query", "word", "column"), [
    ("gpü_name=RTX_4090", "gpü_name", 3),
    ("num_gpus>=2 gpü_name=x", "gpü_name", 15),
    ("gpu_nämé=x", "gpu_nämé", 6),
    ("ü=3", "ü", 1),
    ("gpu_name=RTX_4090 réliability>0.9", "réliability", 20),
])
def test_a_non_ascii_field_name_is_reported_whole(query: str, word: str, column: int) -> None:
    with pytest.raises(QueryError) as caught:
        parse_query(query)
    assert repr(word) in caught.value.reason and "ASCII" in caught.value.reason
    assert caught.value.column == column


def test_non_ascii_values_are_still_values() -> None:
    assert parse_query('geolocation="São Paulo"') == {"geolocation": {"eq": "São Paulo"}}
