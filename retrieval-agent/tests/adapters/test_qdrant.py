from __future__ import annotations

import anyio
import pytest
from qdrant_client import QdrantClient

from retrieval_agent.adapters.qdrant import QdrantSearch
from retrieval_agent.errors import SearchBackendError
from retrieval_agent.search.query import dense_request
from shared_contract import CollectionMissingError, bootstrap_collection

from ..conftest import make_settings  # type: ignore[import-not-found]  # noqa: TID252


def test_capabilities_are_live_with_a_short_ttl() -> None:
    client = QdrantClient(location=":memory:")
    search = QdrantSearch(client, make_settings(capability_cache_ttl_seconds=0))
    with pytest.raises(CollectionMissingError):
        anyio.run(search.capabilities)
    bootstrap_collection(client, make_settings(enable_sparse_embeddings=False))
    assert anyio.run(search.capabilities).has_sparse is False
    # The collection is re-created with a sparse vector: noticed without a restart.
    client.delete_collection("ingestion_files")
    bootstrap_collection(client, make_settings())
    assert anyio.run(search.capabilities).has_sparse is True


def test_capabilities_are_cached_within_the_ttl() -> None:
    client = QdrantClient(location=":memory:")
    bootstrap_collection(client, make_settings(enable_sparse_embeddings=False))
    search = QdrantSearch(client, make_settings(capability_cache_ttl_seconds=60))
    assert anyio.run(search.capabilities).has_sparse is False
    client.delete_collection("ingestion_files")
    assert anyio.run(search.capabilities).has_sparse is False
    search.forget_capabilities()
    with pytest.raises(CollectionMissingError):
        anyio.run(search.capabilities)


def test_a_rejected_request_is_an_error_not_empty() -> None:
    client = QdrantClient(location=":memory:")
    bootstrap_collection(client, make_settings())
    search = QdrantSearch(client, make_settings())
    with pytest.raises(SearchBackendError):
        anyio.run(lambda: search.query(dense_request([0.1] * 3, ["kb"], 3)))  # wrong dimension
