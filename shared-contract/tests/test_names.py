"""The one tenant-name rule both services apply."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from shared_contract import COLLECTION_NAME_PATTERN, CollectionName, check_collection_name

GOOD = [
    "file-3f2b9c1e-8a4d-4e0b-9c3a-2f1d5e6a7b8c",
    "3f2b9c1e-8a4d-4e0b-9c3a-2f1d5e6a7b8c",
    "a" * 64,
    "kb_1",
    "x" * 128,
]
BAD = ["", " kb", "kb ", "tenant B", "ü", "../kb", "kb/1", "kb*", '{"a":1}', "kb\x00", "kb\n", "x" * 129, "x" * 256]


class _Trimming(BaseModel):
    # The ingestion form model trims strings: the name type must not be trimmed with them.
    model_config = ConfigDict(str_strip_whitespace=True)

    collection_name: CollectionName


@pytest.mark.parametrize("name", GOOD)
def test_open_webui_names_pass_unchanged(name: str) -> None:
    assert check_collection_name(name) == name
    assert _Trimming(collection_name=name).collection_name == name


@pytest.mark.parametrize("name", BAD)
def test_other_names_are_refused_naming_the_field(name: str) -> None:
    with pytest.raises(ValueError, match=r"^collection_names\.0 must be 1-128 characters, each an ASCII letter"):
        check_collection_name(name, field="collection_names.0")
    with pytest.raises(ValidationError) as info:
        _Trimming(collection_name=name)
    assert info.value.errors()[0]["loc"] == ("collection_name",)


def test_the_json_schema_carries_the_pattern() -> None:
    schema = _Trimming.model_json_schema()["properties"]["collection_name"]
    assert (schema["type"], schema["pattern"]) == ("string", COLLECTION_NAME_PATTERN)
    assert COLLECTION_NAME_PATTERN == "^[A-Za-z0-9_-]{1,128}$"
