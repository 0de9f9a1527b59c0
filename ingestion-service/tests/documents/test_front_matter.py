"""Markdown front matter: split off the text, parsed as YAML or TOML, mapped onto labels."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from haystack import Document

from ingestion_service.documents import SourceFile
from ingestion_service.documents.front_matter import (
    FRONT_MATTER_ERROR_KEY,
    FRONT_MATTER_KEY,
    MAX_FRONT_MATTER_CHARS,
    FrontMatter,
    FrontMatterError,
    front_matter_from,
    split_front_matter,
    typed_labels,
    without_front_matter,
)

YAML_NOTE = """---
title: Deployment checklist
tags: [ops, "#release"]
type: runbook
date: 2024-05-01
aliases: deploy list
status: draft
---

# Before the release

Tag the build.
"""

TOML_NOTE = """+++
title = "Hugo page"
tags = ["web", "static"]
category = "site"
updated = 2024-06-02T08:30:00Z
+++
Body of the page.
"""


def test_a_yaml_block_is_split_off_and_parsed() -> None:
    split = split_front_matter(YAML_NOTE)
    assert split is not None
    fields, body = split
    assert fields == {
        "title": "Deployment checklist",
        "tags": ["ops", "#release"],
        "type": "runbook",
        "date": date(2024, 5, 1),
        "aliases": "deploy list",
        "status": "draft",
    }
    assert body == "# Before the release\n\nTag the build.\n"


def test_a_toml_block_is_split_off_and_parsed() -> None:
    split = split_front_matter(TOML_NOTE)
    assert split is not None
    fields, body = split
    assert fields["tags"] == ["web", "static"]
    assert fields["updated"].isoformat() == "2024-06-02T08:30:00+00:00"
    assert body == "Body of the page.\n"


@pytest.mark.parametrize(
    "text",
    [
        "# Title\n\n---\ntitle: not at the start\n---\n",
        "---\nA thematic break opens this note and nothing closes it.\n",
        "---\n" + "x: 1\n" * (MAX_FRONT_MATTER_CHARS // 4) + "---\nbody\n",
    ],
    ids=["not-at-the-start", "never-closed", "closed-too-far-in"],
)
def test_text_without_a_block_at_its_very_start_has_no_front_matter(text: str) -> None:
    assert split_front_matter(text) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("---\ntitle: [unclosed\n---\nbody\n", "YAML front matter could not be read"),
        ("---\ndate: 2024-13-01\n---\nbody\n", "month must be in 1..12"),
        ("+++\ntitle = \n+++\nbody\n", "TOML front matter could not be read"),
        ("---\njust a sentence\n---\nbody\n", "not a mapping"),
    ],
    ids=["yaml-syntax", "yaml-impossible-date", "toml-syntax", "not-a-mapping"],
)
def test_a_block_that_is_no_mapping_is_an_error_naming_why(text: str, reason: str) -> None:
    with pytest.raises(FrontMatterError, match=reason):
        split_front_matter(text)


def test_an_empty_block_is_front_matter_without_fields() -> None:
    assert split_front_matter("---\n---\nbody\n") == ({}, "body\n")


def test_the_fields_map_onto_title_tags_category_and_attributes() -> None:
    fields, _ = split_front_matter(YAML_NOTE) or ({}, "")
    assert front_matter_from(fields) == FrontMatter(
        title="Deployment checklist",
        tags=["ops", "release"],
        category="runbook",
        attributes={"aliases": ["deploy list"], "date": "2024-05-01", "status": "draft"},
    )


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ("#ops, release ,ops", ["ops", "release"]),
        ("#ops #project/alpha  release", ["ops", "project/alpha", "release"]),
        (["#ops", 2024, None, {"nested": 1}, "x" * 129], ["ops", "2024"]),
    ],
    ids=["comma-separated", "space-separated", "list"],
)
def test_tags_are_read_from_lists_and_strings_without_obsidians_hash(tags: object, expected: list[str]) -> None:
    assert front_matter_from({"tags": tags}).tags == expected


def test_category_prefers_category_over_type_and_reads_a_wiki_link() -> None:
    front = front_matter_from({"Type": "note", "Category": ["[[Books|my books]]", "Films"]})
    assert front.category == "Books"
    assert front.attributes == {"Type": "note"}


def test_dates_become_iso_text_and_keys_become_attribute_keys() -> None:
    front = front_matter_from(
        {
            "created": date(2024, 1, 2),
            "due-date": date(2024, 3, 4),
            "review count": 3,
            "nested": {"a": 1},
            "links": [{"url": "x"}],
            "9lives": "cat",
            "empty": None,
        }
    )
    assert front.attributes == {"created": "2024-01-02", "due_date": "2024-03-04", "review_count": 3}


def test_a_declared_attribute_of_another_type_is_left_out() -> None:
    labels = {"tags": ["a"], "attributes": {"priority": "high", "year": 2024}}
    assert typed_labels(labels, {"priority": "integer", "year": "integer"}) == {
        "tags": ["a"],
        "attributes": {"year": 2024},
    }


def _staged(tmp_path: Path, name: str, text: str) -> SourceFile:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return SourceFile(path=path, filename=name)


def test_the_engine_reads_the_text_after_the_block_from_a_file_removed_afterwards(tmp_path: Path) -> None:
    source = _staged(tmp_path, "note.md", YAML_NOTE)
    with without_front_matter(source) as reading:
        assert reading.source.path != source.path
        assert reading.source.filename == "note.md"
        assert reading.source.path.read_text(encoding="utf-8") == "# Before the release\n\nTag the build.\n"
        documents = reading.apply([Document(content="text", meta={"title": "Before the release", "page": 0})])
    assert not reading.source.path.exists()
    assert source.path.read_text(encoding="utf-8") == YAML_NOTE
    assert documents[0].meta == {
        "title": "Deployment checklist",
        "page": 0,
        FRONT_MATTER_KEY: {
            "tags": ["ops", "release"],
            "category": "runbook",
            "attributes": {"aliases": ["deploy list"], "date": "2024-05-01", "status": "draft"},
        },
    }


def test_an_unreadable_block_stays_in_the_file_the_engine_reads(tmp_path: Path) -> None:
    source = _staged(tmp_path, "broken.md", "---\ntitle: [unclosed\n---\nbody\n")
    with without_front_matter(source) as reading:
        assert reading.source == source
        documents = reading.apply([Document(content="text")])
    assert documents[0].meta[FRONT_MATTER_ERROR_KEY].startswith("YAML front matter could not be read")
    assert FRONT_MATTER_KEY not in documents[0].meta


def test_a_file_that_is_not_markdown_keeps_its_block(tmp_path: Path) -> None:
    source = _staged(tmp_path, "notes.txt", YAML_NOTE)
    with without_front_matter(source) as reading:
        assert reading.source == source
        assert reading.apply([Document(content="text")])[0].meta == {}
