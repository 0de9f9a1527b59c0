"""PUT /api/v1/ingest of Markdown notes with front matter: labels from the block, the block out of the text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

if TYPE_CHECKING:
    from ...conftest import AppFactory, Upload  # noqa: TID252

NOTE = """---
title: Deployment checklist
tags: [ops, "#release"]
type: runbook
date: 2024-05-01
aliases: [deploy list]
priority: high
---

# Before the release

Tag the build, then announce the freeze in the team channel.
"""

TOML_NOTE = """+++
title = "Static site"
tags = ["web"]
category = "site"
+++

# Publishing

The static site is rebuilt on every merge to main.
"""

BROKEN_NOTE = """---
title: [unclosed
tags: ops
---

# Broken properties

The properties above are not valid YAML.
"""


@pytest.fixture
def client(app_client: AppFactory) -> Iterator[TestClient]:
    with app_client(enable_inspection_api=True, indexed_attributes="priority:integer") as test_client:
        yield test_client


def note(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def listing(client: TestClient, collection: str, **query: str) -> list[dict[str, Any]]:
    response = client.get("/api/v1/documents", params={"collection_name": collection, **query})
    assert response.status_code == 200, response.text
    documents: list[dict[str, Any]] = response.json()["documents"]
    return documents


def chunks(client: TestClient, file_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/api/v1/documents/{file_id}/chunks", params={"include_content": "full", "limit": 1000})
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["chunks"]
    return found


def metric(client: TestClient, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {name} not exported")


@pytest.mark.parametrize("engine", ["kreuzberg", "auto"])
def test_a_yaml_note_is_filed_under_its_tags_and_type_without_the_block_in_its_text(
    app_client: AppFactory, upload: Upload, tmp_path: Path, engine: str
) -> None:
    with app_client(enable_inspection_api=True, extraction_engine=engine) as client:
        response = upload(client, note(tmp_path, "checklist.md", NOTE), file_id="fm-yaml", collection_name="vault")
        assert response.status_code == 200, response.text
        [tagged] = listing(client, "vault", tag="release")
        assert listing(client, "vault", category="runbook") == [tagged]
        assert tagged["tags"] == ["ops", "release"]
        assert tagged["attributes"] == {
            "aliases": ["deploy list"],
            "date": "2024-05-01",
            "priority": "high",
        }
        stored = chunks(client, "fm-yaml")
        assert stored
        assert {chunk["meta"]["title"] for chunk in stored} == {"Deployment checklist"}
        text = "\n".join(chunk["content"] for chunk in stored)
        assert "Tag the build" in text
        for block_text in ("title:", "tags", "runbook", "2024-05-01", "Sequence"):
            assert block_text not in text


def test_a_toml_note_is_filed_under_its_tags_and_category(client: TestClient, upload: Upload, tmp_path: Path) -> None:
    response = upload(client, note(tmp_path, "site.md", TOML_NOTE), file_id="fm-toml", collection_name="vault")
    assert response.status_code == 200, response.text
    [document] = listing(client, "vault", category="site")
    assert document["file_id"] == "fm-toml"
    assert document["tags"] == ["web"]
    text = "\n".join(chunk["content"] for chunk in chunks(client, "fm-toml"))
    assert "+++" not in text
    assert 'category = "site"' not in text


def test_a_declared_attribute_of_another_type_is_left_out(client: TestClient, upload: Upload, tmp_path: Path) -> None:
    upload(client, note(tmp_path, "checklist.md", NOTE), file_id="fm-typed", collection_name="vault")
    [document] = listing(client, "vault")
    assert document["attributes"] == {"aliases": ["deploy list"], "date": "2024-05-01"}


def test_the_requests_own_labels_win_over_the_front_matters(client: TestClient, upload: Upload, tmp_path: Path) -> None:
    path = note(tmp_path, "checklist.md", NOTE)
    upload(client, path, file_id="fm-request", collection_name="vault", tags="from-request")
    [document] = listing(client, "vault")
    assert document["tags"] == ["from-request"]
    assert document["category"] == "runbook"  # not sent: the front matter's


def test_the_requests_attributes_are_merged_over_the_front_matters_also_when_unchanged(
    client: TestClient, upload: Upload, tmp_path: Path
) -> None:
    path = note(tmp_path, "checklist.md", NOTE)
    sent = '{"sync_path": "ops/checklist.md", "date": "2025-01-01"}'
    expected = {"sync_path": "ops/checklist.md", "date": "2025-01-01", "aliases": ["deploy list"]}
    upload(client, path, file_id="fm-merge", collection_name="vault", attributes=sent)
    [document] = listing(client, "vault")
    assert document["attributes"] == expected
    again = upload(client, path, file_id="fm-merge", collection_name="vault", attributes=sent)
    assert again.json()["unchanged"] is True
    [document] = listing(client, "vault")
    assert document["attributes"] == expected


def test_an_edited_note_drops_a_removed_tag_and_keeps_a_patched_category(
    client: TestClient, upload: Upload, tmp_path: Path
) -> None:
    first = "---\ntags: [ops, release]\n---\n\n# Notes\n\nThe first draft of the notes.\n"
    upload(client, note(tmp_path, "notes.md", first), file_id="fm-edit", collection_name="vault")
    patched = client.patch("/api/v1/documents/fm-edit", params={"collection_name": "vault"}, json={"category": "kept"})
    assert patched.status_code == 200, patched.text
    edited = "---\ntags: [ops]\n---\n\n# Notes\n\nThe second draft of the notes.\n"
    again = upload(client, note(tmp_path, "notes.md", edited), file_id="fm-edit", collection_name="vault")
    assert again.json()["unchanged"] is False
    [document] = listing(client, "vault")
    assert document["tags"] == ["ops"]
    assert document["category"] == "kept"


def test_an_unreadable_block_is_indexed_as_text_and_counted(client: TestClient, upload: Upload, tmp_path: Path) -> None:
    before = metric(client, "ingest_front_matter_unread_total")
    response = upload(client, note(tmp_path, "broken.md", BROKEN_NOTE), file_id="fm-broken", collection_name="vault")
    assert response.status_code == 200, response.text
    [document] = listing(client, "vault")
    assert document["tags"] == []
    stored = chunks(client, "fm-broken")
    assert "unclosed" in "\n".join(chunk["content"] for chunk in stored)
    assert stored[0]["meta"]["front_matter_error"].startswith("YAML front matter could not be read")
    assert metric(client, "ingest_front_matter_unread_total") == before + 1


def test_a_note_holding_only_front_matter_has_no_text_to_index(
    client: TestClient, upload: Upload, tmp_path: Path
) -> None:
    path = note(tmp_path, "empty.md", "---\ntags: [ops]\ntype: stub\n---\n")
    response = upload(client, path, file_id="fm-empty", collection_name="vault")
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "EXTRACTION_FAILED"
    assert "no extractable text" in response.json()["error"].lower()
