"""A vault of Markdown notes with front matter (issue 48), through both real HTTP APIs: each note's
tags and type filter /search, and no chunk carries the front matter block."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from integration_support import Stack, ingest_multipart

# Three notes with YAML front matter (Obsidian's forms: a list, #tags, a comma string) and one with TOML.
VAULT = {
    "release-checklist.md": """---
title: Release checklist
tags: [ops, "#release"]
type: runbook
created: 2024-05-01
---

# Shipping a version

Freeze the main branch, build the artefacts, and announce the version in the team channel.
""",
    "incident-review.md": """---
title: Incident review
tags: "#ops, postmortem"
category: review
---

# What went wrong

The nightly job filled the disk; the alert reached nobody because the pager rota was empty.
""",
    "reading-list.md": """---
tags:
  - books
type: list
---

# Books to read

A novel about lighthouses and a history of the printing press.
""",
    "static-site.md": """+++
title = "Static site"
tags = ["web", "ops"]
category = "site"
+++

# Publishing the site

Every merge to the main branch rebuilds the static site and uploads it.
""",
}
# What the engines would have indexed of the blocks: their keys, values only they hold, delimiters.
BLOCK_TEXT = ("tags", "type:", "category", "runbook", "postmortem", "2024-05-01", "Sequence", "---", "+++")


def search(stack: Stack, collection: str, search_filter: dict[str, Any]) -> tuple[set[str], list[str]]:
    """The notes (by file name) a filtered /search returns, and the text of every chunk it returned."""
    response = stack.retrieval().post(
        f"{stack.retrieval_url}/search",
        json={
            "queries": ["how do we ship, publish and review work"],
            "collection_names": [collection],
            "k": 20,
            "filter": search_filter,
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    return {meta["name"] for meta in body["metadatas"][0]}, list(body["documents"][0])


@pytest.fixture(scope="module")
def vault(stack: Stack, unique: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The notes ingested one by one into a knowledge base of their own; removed afterwards."""
    collection = f"kb-vault-{unique}"
    folder = tmp_path_factory.mktemp("vault")
    file_ids = []
    for name, text in VAULT.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        file_id = str(uuid.uuid4())
        assert ingest_multipart(stack.ingestion(), path, file_id, collection)["status"] is True
        file_ids.append(file_id)
    yield collection
    for file_id in file_ids:
        stack.ingestion().delete(f"/api/v1/documents/{file_id}", params={"collection_name": collection})


@pytest.mark.parametrize(
    ("search_filter", "expected"),
    [
        ({"tags": ["ops"]}, {"release-checklist.md", "incident-review.md", "static-site.md"}),
        ({"tags": ["release"]}, {"release-checklist.md"}),
        ({"tags": ["books", "postmortem"]}, {"reading-list.md", "incident-review.md"}),
        ({"category": "runbook"}, {"release-checklist.md"}),
        ({"category": ["review", "list"]}, {"incident-review.md", "reading-list.md"}),
        ({"tags": ["ops"], "category": "site"}, {"static-site.md"}),
    ],
    ids=["tag-ops", "obsidian-hash-tag", "any-of-two-tags", "yaml-type", "yaml-categories", "toml-tag-and-category"],
)
def test_a_filter_by_tag_or_type_finds_the_notes_whose_front_matter_says_so(
    stack: Stack, vault: str, search_filter: dict[str, Any], expected: set[str]
) -> None:
    names, _ = search(stack, vault, search_filter)
    assert names == expected


def test_no_chunk_of_the_vault_holds_its_front_matter(stack: Stack, vault: str) -> None:
    names, texts = search(stack, vault, {})
    assert names == set(VAULT)
    for text in texts:
        for block_text in BLOCK_TEXT:
            assert block_text not in text, text


def test_the_listing_shows_the_front_matters_labels(stack: Stack, vault: str) -> None:
    response = stack.ingestion().get("/api/v1/documents", params={"collection_name": vault})
    assert response.status_code == 200, response.text
    by_name = {document["name"]: document for document in response.json()["documents"]}
    assert by_name["release-checklist.md"]["tags"] == ["ops", "release"]
    assert by_name["release-checklist.md"]["category"] == "runbook"
    assert by_name["release-checklist.md"]["attributes"] == {"created": "2024-05-01"}
    assert by_name["static-site.md"]["tags"] == ["web", "ops"]
