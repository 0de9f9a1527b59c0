"""How a chunk becomes a stored point (pure)."""

from __future__ import annotations

import hashlib
import random
import string
import uuid
from typing import Any

import pytest

from rag_runtime.embedding.types import SparseVectorData
from rag_runtime.store import chunk_payload, chunk_point, point_id_for


def test_the_payload_is_haystacks_document_plus_the_lexical_field() -> None:
    meta = {"collection_name": "tenant-a", "file_id": "f1", "languages": ["en", "de"], "page": 2}
    assert chunk_payload("chunk-1", "The foxes", meta) == {
        "id": "chunk-1",
        "content": "The foxes",
        "meta": {**meta, "lexical_language": "en"},
        "lexical_en": "The foxes",
    }
    assert "lexical_language" not in meta  # the caller's meta is not changed


@pytest.mark.parametrize(
    ("languages", "code"),
    [
        (["nb"], "no"),
        (["nn"], "no"),
        (["no"], "no"),
        (["NB"], "no"),
        (["sv", "en"], "sv"),
        (["zh", "de"], "de"),  # the first language we stem
        (["zh"], "any"),
        (["xx", "ja"], "any"),
        ([], "any"),
        (None, "any"),
        ("en", "any"),  # not a list: no language is known
    ],
)
def test_the_lexical_field_follows_the_detected_languages(languages: Any, code: str) -> None:
    meta: dict[str, Any] = {"collection_name": "tenant-a"}
    if languages is not None:
        meta["languages"] = languages
    payload = chunk_payload("c", "tekst", meta)
    assert payload["meta"]["lexical_language"] == code
    assert [key for key in payload if key.startswith("lexical_")] == [f"lexical_{code}"]
    assert payload[f"lexical_{code}"] == "tekst"


def test_point_ids_are_stable_uuids() -> None:
    first = point_id_for("file-1:0001")
    assert first == point_id_for("file-1:0001")
    assert first != point_id_for("file-1:0002")
    assert uuid.UUID(first).version == 5
    assert first == str(uuid.uuid5(uuid.NAMESPACE_URL, "file-1:0001"))


def test_a_chunk_id_that_is_a_uuid_is_its_own_point_id() -> None:
    chunk_id = "5B1F2F2E-0D6C-4A55-9A8F-2A3F0A4F1C01"
    assert point_id_for(chunk_id) == chunk_id.lower()


def test_every_id_maps_as_uuid_parses_it_or_as_uuid5_of_it() -> None:
    generator = random.Random(11)
    alphabet = string.printable + "æøå中"
    names = ["".join(generator.choice(alphabet) for _ in range(generator.randint(0, 70))) for _ in range(3000)]
    names += [hashlib.sha256(name.encode()).hexdigest() for name in names[:100]]
    given = uuid.UUID("5b1f2f2e-0d6c-4a55-9a8f-2a3f0a4f1c01")
    names += [given.hex, f"{{{given}}}", f"urn:uuid:{given}", str(given).upper()]
    for name in names:
        try:
            expected = str(uuid.UUID(name))
        except ValueError:
            expected = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
        assert point_id_for(name) == expected, name


def test_a_chunk_point_carries_its_vectors_and_payload() -> None:
    sparse = SparseVectorData(indices=[1, 5], values=[0.5, 0.25])
    point = chunk_point("file-1:0001", "Hei", {"languages": ["nb"]}, dense=[0.1, 0.2], sparse=sparse)
    assert point.point_id == point_id_for("file-1:0001")
    assert point.dense == [0.1, 0.2]
    assert point.sparse == sparse
    assert point.payload == chunk_payload("file-1:0001", "Hei", {"languages": ["nb"]})
    assert chunk_point("c", "x", {}, dense=[1.0], sparse=None).sparse is None


def test_the_lexical_field_holds_the_window_while_content_stays_the_chunk() -> None:
    payload = chunk_payload("c", "the chunk", {"languages": ["en"]}, lexical_text="before\nthe chunk\nafter")
    assert payload["content"] == "the chunk"
    assert payload["lexical_en"] == "before\nthe chunk\nafter"
