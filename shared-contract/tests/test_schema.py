from __future__ import annotations

import pytest

from shared_contract.schema import chunk_id, page_number

META = {"file_id": "f-1", "collection_name": "kb", "ingest_version": "v7", "name": "ignored.pdf"}


def test_a_chunk_id_is_stable_per_file_tenant_version_and_position() -> None:
    assert chunk_id(META, 3) == chunk_id({**META, "name": "renamed.pdf"}, 3)
    others = [
        chunk_id(META, 4),
        chunk_id({**META, "file_id": "f-2"}, 3),
        chunk_id({**META, "collection_name": "kb-2"}, 3),
        chunk_id({**META, "ingest_version": "v8"}, 3),
    ]
    assert chunk_id(META, 3) not in others
    assert len(set(others)) == len(others)
    assert len(chunk_id(META, 3)) == 64


@pytest.mark.parametrize(("stored", "shown"), [(0, 1), (2, 3), (None, None), (-1, None), (True, None), ("2", None)])
def test_the_page_people_read_is_the_stored_0_based_page_plus_one(stored: object, shown: int | None) -> None:
    assert page_number(stored) == shown
