"""The labels a new version is published with: the request's, the front matter's, the stored version's."""

from __future__ import annotations

from ingestion_service.indexing.job import DocumentLabels, front_matter_labels, publish_labels

FRONT = DocumentLabels(tags=["ops"], category="runbook", attributes={"status": "draft"})


def test_a_label_the_request_sends_wins_over_the_front_matters() -> None:
    labels = publish_labels(DocumentLabels(tags=["sent"]), FRONT, None)
    assert labels == DocumentLabels(tags=["sent"], category="runbook", attributes={"status": "draft"})


def test_the_requests_attributes_are_merged_over_the_front_matters_key_by_key() -> None:
    requested = DocumentLabels(attributes={"status": "final", "sync_path": "a.md"})
    labels = publish_labels(requested, FRONT, None)
    assert labels.attributes == {"status": "final", "sync_path": "a.md"}
    labels = publish_labels(requested, DocumentLabels(attributes={"owner": "ops", "status": "draft"}), None)
    assert labels.attributes == {"status": "final", "sync_path": "a.md", "owner": "ops"}


def test_the_front_matter_wins_over_a_label_set_on_the_stored_version() -> None:
    stored = {"tags": ["patched"], "category": "patched"}
    assert publish_labels(DocumentLabels(), FRONT, stored) == FRONT


def test_a_stored_label_neither_sets_is_kept_unless_the_old_front_matter_set_it() -> None:
    stored = {
        "tags": ["ops", "release"],
        "category": "patched",
        "front_matter": {"tags": ["ops", "release"]},
    }
    labels = publish_labels(DocumentLabels(), DocumentLabels(), stored)
    assert labels == DocumentLabels(tags=None, category="patched", attributes=None)


def test_a_chunk_without_front_matter_has_no_front_matter_labels() -> None:
    assert front_matter_labels({"tags": ["ops"]}) == DocumentLabels()
    assert front_matter_labels({"front_matter": {"category": "runbook"}}) == DocumentLabels(category="runbook")
