"""INDEXED_ATTRIBUTES parsing and the check of a document's own attributes."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest

from shared_contract import ContractConfigError, ContractSettings, load_settings
from shared_contract.attributes import (
    MAX_ATTRIBUTE_CHARS,
    MAX_ATTRIBUTE_VALUES,
    MAX_ATTRIBUTES,
    AttributeType,
    check_attributes,
    parse_indexed_attributes,
)

DECLARED: dict[str, AttributeType] = {
    "dept": "keyword",
    "year": "integer",
    "score": "float",
    "published": "datetime",
}


def test_a_spec_declares_each_key_with_its_type_keyword_by_default() -> None:
    assert parse_indexed_attributes(" dept:keyword, year:INTEGER ,score: float,published:datetime,owner ,") == {
        "dept": "keyword",
        "year": "integer",
        "score": "float",
        "published": "datetime",
        "owner": "keyword",
    }
    assert parse_indexed_attributes("") == {}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("2fast:keyword", "attribute key '2fast' must match"),
        ("dept.name:keyword", "attribute key 'dept.name' must match"),
        (":integer", "attribute key '' must match"),
        ("year:int", "attribute 'year' has type 'int'; use one of keyword, integer, float, datetime"),
        ("flag:bool", "attribute 'flag' has type 'bool'"),
        ("year:integer,year:keyword", "attribute 'year' is declared twice"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_part(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_indexed_attributes(spec)


def test_settings_expose_the_declared_types_and_refuse_a_bad_spec() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", indexed_attributes="dept,year:integer")
    assert settings.attribute_types == {"dept": "keyword", "year": "integer"}
    assert load_settings(ContractSettings, qdrant_uri=":memory:").attribute_types == {}
    with pytest.raises(ContractConfigError, match="INDEXED_ATTRIBUTES"):
        load_settings(ContractSettings, qdrant_uri=":memory:", indexed_attributes="year:number")


def test_declared_attributes_are_stored_as_their_type() -> None:
    checked = check_attributes(
        {
            "dept": "sales",
            "year": 2024,
            "score": 1,
            "published": "2024-01-10T00:00:00Z",
            "tags_like": ["a", "b"],
            "free": True,
        },
        DECLARED,
    )
    assert checked == {
        "dept": "sales",
        "year": 2024,
        "score": 1.0,
        "published": "2024-01-10T00:00:00Z",
        "tags_like": ["a", "b"],
        "free": True,
    }
    assert isinstance(checked["score"], float)
    assert check_attributes({"year": [2023, 2024]}, DECLARED) == {"year": [2023, 2024]}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"year": "2024"}, "attribute 'year' must be a integer"),
        ({"year": True}, "attribute 'year' must be a integer"),  # the engine would store it as 1
        ({"year": 2024.5}, "attribute 'year' must be a integer"),
        ({"year": [2024, "x"]}, "attribute 'year' must be a integer"),
        ({"score": "high"}, "attribute 'score' must be a float"),
        ({"score": False}, "attribute 'score' must be a float"),
        ({"published": "last week"}, "attribute 'published' must be a datetime"),
        ({"published": 1_700_000_000}, "attribute 'published' must be a datetime"),
        ({"dept": 5}, "attribute 'dept' must be a keyword"),
        ({"dept": "x" * (MAX_ATTRIBUTE_CHARS + 1)}, "attribute 'dept' must be a keyword"),
        ({"free": "x" * (MAX_ATTRIBUTE_CHARS + 1)}, "attribute 'free' must be a string of at most"),
        ({"free": {"nested": 1}}, "attribute 'free' must be a string of at most"),
        ({"free": ["x"] * (MAX_ATTRIBUTE_VALUES + 1)}, f"attribute 'free' has more than {MAX_ATTRIBUTE_VALUES} values"),
        ({"bad key": 1}, "attribute key 'bad key' must match"),
        ({f"k{index}": index for index in range(MAX_ATTRIBUTES + 1)}, f"at most {MAX_ATTRIBUTES} attributes"),
    ],
)
def test_a_wrong_attribute_is_refused_naming_it(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_attributes(values, DECLARED)


@pytest.mark.parametrize("key", ["free", "year", "score"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 2**63, -(2**63) - 1, 2**70, 10**400, [1, math.nan]])
def test_a_number_the_engine_cannot_store_is_refused_naming_it(key: str, value: object) -> None:
    # NaN and infinities break the write; a wider integer would silently become a float (or overflow one).
    with pytest.raises(ValueError, match=f"attribute '{key}' must be a finite number, an integer within 64 bits"):
        check_attributes({key: value}, DECLARED)


def test_the_64_bit_and_float_extremes_are_kept() -> None:
    values = {"free": [2**63 - 1, -(2**63), sys.float_info.max], "year": 2**63 - 1}
    assert check_attributes(values, DECLARED) == values
