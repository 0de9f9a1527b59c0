from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from qdrant_client import models

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, chunk_point, tenant_filter
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.search.query import dense_request
from shared_contract import CollectionMissingError, ContractMismatchError, ManifestMissingError, StoreRequestError

from ..conftest import (  # noqa: TID252
    RecordingStore,
    add_chunk,
    chunk_meta,
    create_collection,
    create_contract_2_collection,
    make_settings,
)
from ..contract_support import CHANGED_SETTING, RebuildableStore, names_the_mismatch  # noqa: TID252

pytestmark = pytest.mark.anyio


async def test_capabilities_of_a_contract_collection(store_factory: Callable[..., ChunkStore]) -> None:
    store = store_factory()
    await create_collection(store, make_settings())
    for language in ("en", "nb"):  # a language's BM25 index appears with its first chunk
        await store.upsert(
            [
                chunk_point(
                    language,
                    "text",
                    chunk_meta("t", "a.txt", 1, 0, languages=[language]),
                    dense=[1.0] * 384,
                    sparse=None,
                )
            ]
        )
    capabilities = await StoreSearch(store, make_settings()).capabilities()
    assert capabilities.has_sparse is True
    assert capabilities.sparse_idf is True  # BM42: the IDF modifier, so per-tenant IDF applies
    assert capabilities.lexical_fields == {"lexical_en", "lexical_no"}
    assert capabilities.live_key is True  # contract 3.x: search filters on meta.live_in alone


async def test_a_contract_2_collection_is_searched_without_the_live_key_and_says_how_to_get_it(
    store_factory: Callable[..., ChunkStore], caplog: pytest.LogCaptureFixture
) -> None:
    store = store_factory()
    await create_contract_2_collection(store, make_settings())
    search = StoreSearch(store, make_settings())
    with caplog.at_level(logging.INFO, logger="retrieval_agent.adapters.store"):
        capabilities = await search.capabilities()
        search.forget_capabilities()
        await search.capabilities()
    assert (capabilities.own_layout, capabilities.live_key) == (True, False)
    [hint] = [record.getMessage() for record in caplog.records if "contract 2.4.1 collection" in record.getMessage()]
    assert "rag migrate" in hint


async def test_capabilities_without_sparse_or_lexical_indexes(store_factory: Callable[..., ChunkStore]) -> None:
    store = store_factory()
    await create_collection(store, make_settings(), sparse=False, lexical=False)
    capabilities = await StoreSearch(store, make_settings()).capabilities()
    assert (capabilities.has_sparse, capabilities.sparse_idf, capabilities.lexical_fields) == (
        False,
        False,
        frozenset(),
    )


async def test_missing_collection_is_an_error_and_never_cached(store_factory: Callable[..., ChunkStore]) -> None:
    store = store_factory()
    search = StoreSearch(store, make_settings(capability_cache_ttl_seconds=60))
    with pytest.raises(CollectionMissingError):
        await search.capabilities()
    await create_collection(store, make_settings(), sparse=False)
    assert (await search.capabilities()).has_sparse is False


async def test_capabilities_are_cached_within_the_ttl(store_factory: Callable[..., ChunkStore]) -> None:
    inner = store_factory()
    await create_collection(inner, make_settings())
    store = RecordingStore(inner)
    search = StoreSearch(store, make_settings(capability_cache_ttl_seconds=60))
    first = await search.capabilities()
    assert await search.capabilities() is first
    assert store.infos == 1
    search.forget_capabilities()
    await search.capabilities()
    assert store.infos == 2
    expired = StoreSearch(store, make_settings(capability_cache_ttl_seconds=0))
    await expired.capabilities()
    await expired.capabilities()
    assert store.infos == 4


async def test_lexical_languages_facet_per_tenant_set_committed_only(
    store_factory: Callable[..., ChunkStore], embedder: ContractEmbedder
) -> None:
    inner = store_factory()
    settings = make_settings()
    await create_collection(inner, settings)
    await add_chunk(inner, embedder, "en", "Dogs run.", chunk_meta("t1", "a.txt", 1, 0), sparse=True)
    await add_chunk(inner, embedder, "no", "Hunder løper.", chunk_meta("t2", "b.txt", 1, 0, languages=["nb"]))
    await add_chunk(inner, embedder, "xx", "犬が走る", chunk_meta("t2", "c.txt", 1, 0, languages=["ja"]))
    await add_chunk(inner, embedder, "de", "Hunde laufen.", chunk_meta("t3", "d.txt", 1, 0, languages=["de"]))
    # A run still writing: its language must not count.
    await add_chunk(
        inner,
        embedder,
        "fr",
        "Les chiens courent.",
        chunk_meta("t1", "e.txt", 1, 0, languages=["fr"], ingest_state="pending"),
    )
    store = RecordingStore(inner)
    search = StoreSearch(store, make_settings(lexical_language_cache_ttl_seconds=60))
    assert await search.lexical_languages(["t2", "t1"]) == {"any": 1, "en": 1, "no": 1}
    assert store.facets == [("meta.lexical_language", tenant_filter(["t1", "t2"]))]
    # Cached per sorted tenant set.
    assert await search.lexical_languages(["t1", "t2"]) == {"any": 1, "en": 1, "no": 1}
    assert len(store.facets) == 1
    assert await search.lexical_languages(["t3"]) == {"de": 1}
    assert len(store.facets) == 2


async def test_empty_lexical_languages_are_not_cached(
    store_factory: Callable[..., ChunkStore], embedder: ContractEmbedder
) -> None:
    inner = store_factory()
    await create_collection(inner, make_settings())
    store = RecordingStore(inner)
    search = StoreSearch(store, make_settings(lexical_language_cache_ttl_seconds=60))
    assert await search.lexical_languages(["new"]) == {}
    await add_chunk(inner, embedder, "first", "The first chunk.", chunk_meta("new", "a.txt", 1, 0))
    assert await search.lexical_languages(["new"]) == {"en": 1}
    assert len(store.facets) == 2


async def test_a_rejected_request_is_an_error_not_empty(store_factory: Callable[..., ChunkStore]) -> None:
    store = store_factory()
    await create_collection(store, make_settings())
    with pytest.raises(StoreRequestError):
        await StoreSearch(store, make_settings()).query(dense_request([0.1] * 3, ["kb"], 3))  # wrong dimension


async def test_a_text_query_without_an_index_is_flagged(store_factory: Callable[..., ChunkStore]) -> None:
    store = store_factory()
    await create_collection(store, make_settings(), lexical=False)
    request = models.QueryRequest(query=models.TextQuery(text="x"), using="lexical_en", filter=tenant_filter(["t"]))
    with pytest.raises(StoreRequestError) as caught:
        await StoreSearch(store, make_settings()).query(request)
    assert caught.value.missing_text_index is True


async def test_query_on_a_missing_collection_forgets_capabilities(store_factory: Callable[..., ChunkStore]) -> None:
    search = StoreSearch(store_factory(), make_settings())
    with pytest.raises(CollectionMissingError):
        await search.query(dense_request([0.1] * 384, ["kb"], 3))


async def test_scroll_contents_pages_through_committed_chunks_of_the_tenants(
    store_factory: Callable[..., ChunkStore], embedder: ContractEmbedder
) -> None:
    store = store_factory()
    await create_collection(store, make_settings())
    for index in range(5):
        await add_chunk(store, embedder, f"a{index}", f"chunk {index}", chunk_meta("t", "a.txt", 1, index))
    await add_chunk(store, embedder, "p", "pending", chunk_meta("t", "b.txt", 1, 0, ingest_state="pending"))
    await add_chunk(store, embedder, "o", "other", chunk_meta("other", "c.txt", 1, 0))
    search = StoreSearch(store, make_settings())
    records = await search.scroll_contents(["t"], max_docs=100)
    assert sorted(record.payload["content"] for record in records) == [f"chunk {index}" for index in range(5)]
    assert all(set(record.payload) == {"content", "meta"} for record in records)
    assert len(await search.scroll_contents(["t"], max_docs=3)) == 3


async def test_a_contract_mismatch_refuses_naming_the_setting_until_readiness_reads_the_fixed_collection(
    store_factory: Callable[..., ChunkStore], caplog: pytest.LogCaptureFixture
) -> None:
    inner = store_factory()
    await create_collection(inner, make_settings())
    store = RebuildableStore(inner)
    search = StoreSearch(store, make_settings(capability_cache_ttl_seconds=3600))
    await search.check_contract()
    store.rebuild()
    search.forget_capabilities()  # as after a failed query, or the next readiness probe
    with caplog.at_level(logging.WARNING, logger="retrieval_agent.adapters.store"):
        with pytest.raises(ContractMismatchError) as caught:
            await search.check_contract()
        with pytest.raises(ContractMismatchError):
            await search.capabilities()
    assert caught.value.field == CHANGED_SETTING
    assert names_the_mismatch(str(caught.value))
    assert [
        record.getMessage().startswith("contract mismatch: every query is refused") for record in caplog.records
    ] == [True]
    store.restore()
    # The verdict is cached: a query before the next reading is still refused.
    with pytest.raises(ContractMismatchError):
        await search.check_contract()
    await search.verify()  # a readiness probe
    await search.check_contract()
    assert (await search.capabilities()).own_layout is True


async def test_a_fixed_mismatch_is_served_once_the_cache_expires(store_factory: Callable[..., ChunkStore]) -> None:
    inner = store_factory()
    await create_collection(inner, make_settings())
    store = RebuildableStore(inner)
    search = StoreSearch(store, make_settings(capability_cache_ttl_seconds=0))
    store.rebuild()
    with pytest.raises(ContractMismatchError):
        await search.check_contract()
    store.restore()
    await search.check_contract()


class _ForeignCollection(RecordingStore):
    """A collection another tool created: no contract manifest."""

    async def read_manifest(self) -> Any:
        raise ManifestMissingError(self.collection)


async def test_a_collection_without_a_manifest_is_searched_not_refused(
    store_factory: Callable[..., ChunkStore],
) -> None:
    inner = store_factory()
    await create_collection(inner, make_settings())
    search = StoreSearch(_ForeignCollection(inner), make_settings())
    await search.check_contract()
    assert (await search.capabilities()).own_layout is False
