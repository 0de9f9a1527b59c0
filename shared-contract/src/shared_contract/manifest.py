"""The contract manifest stored in a collection's metadata, and the check against it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from shared_contract.embedding_models import sparse_model_requires_idf
from shared_contract.errors import ContractConfigError, ContractMismatchError
from shared_contract.settings import ContractSettings
from shared_contract.version import CONTRACT_VERSION, READABLE_OLDER_MAJORS, major_version

MANIFEST_METADATA_KEY = "rag_contract"

Distance = Literal["cosine", "dot", "euclid", "manhattan"]
SparseModifier = Literal["idf", "none"]


class CollectionManifest(BaseModel):
    """What a collection was built with; every reader and writer must agree with it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    contract_version: str
    dense_model: str
    dense_dim: int
    distance: Distance
    prefix_doc: str
    prefix_query: str
    sparse_model: str | None
    sparse_modifier: SparseModifier | None
    # ``text-dense-multilingual``: None in a collection built without it (or before contract 2.3).
    multilingual_model: str | None = None
    multilingual_dim: int | None = None
    created_at: str | None = None


def sparse_modifier_for(model_name: str) -> SparseModifier:
    """IDF for term-frequency-style sparse models (BM25, BM42), none for learned ones (SPLADE).

    A model the catalog does not know is refused: guessing "none" for a model that needs IDF
    would store a collection whose sparse scores ignore term rarity, and no check would notice.
    """
    try:
        return "idf" if sparse_model_requires_idf(model_name) else "none"
    except KeyError:
        raise ContractConfigError(
            "SPARSE_EMBEDDING_MODEL",
            f"{model_name} is not a sparse model the contract knows, so whether its vectors need "
            "Qdrant's IDF modifier is unknown; use one of fastembed's sparse models "
            "(e.g. Qdrant/bm42-all-minilm-l6-v2-attentions) or set ENABLE_SPARSE_EMBEDDINGS=false",
        ) from None


def manifest_for(settings: ContractSettings, *, created_at: datetime | None = None) -> CollectionManifest:
    """The manifest a collection created with ``settings`` carries."""
    sparse_model = settings.sparse_embedding_model if settings.enable_sparse_embeddings else None
    return CollectionManifest(
        contract_version=CONTRACT_VERSION,
        dense_model=settings.embedding_model,
        dense_dim=settings.dense_dim,
        distance="cosine",
        prefix_doc=settings.embedding_prefix_doc,
        prefix_query=settings.embedding_prefix_query,
        sparse_model=sparse_model,
        sparse_modifier=sparse_modifier_for(sparse_model) if sparse_model is not None else None,
        multilingual_model=settings.multilingual_model,
        multilingual_dim=settings.multilingual_dim,
        created_at=(created_at or datetime.now(UTC)).isoformat(),
    )


def has_live_key(manifest: CollectionManifest | None) -> bool:
    """Whether every committed point of the collection carries ``meta.live_in``: true for a collection
    created under contract 3.x, whose writers all set it (2.x services refuse it). A 2.x collection,
    or one without a manifest, is read with the tenant and "not pending" conditions."""
    return manifest is not None and major_version(manifest.contract_version) >= 3


def verify_manifest(
    collection: str,
    stored: CollectionManifest,
    settings: ContractSettings,
    *,
    require_sparse: bool,
) -> None:
    """Raise ContractMismatchError on the first disagreement between ``stored`` and ``settings``.

    A collection of an older major in READABLE_OLDER_MAJORS agrees (it is served as that major was).

    ``require_sparse``: the caller writes or reads sparse vectors, so the collection must have
    the same sparse model. Without it a sparse-less collection is acceptable (dense only).
    """
    expected = manifest_for(settings)
    stored_major = major_version(stored.contract_version)
    if stored_major != major_version(expected.contract_version) and stored_major not in READABLE_OLDER_MAJORS:
        raise ContractMismatchError(
            collection, "contract major version", stored.contract_version, expected.contract_version
        )
    checks: list[tuple[str, object, object]] = [
        ("EMBEDDING_MODEL", stored.dense_model, expected.dense_model),
        ("EMBEDDING_DIM", stored.dense_dim, expected.dense_dim),
        ("distance", stored.distance, expected.distance),
        ("EMBEDDING_PREFIX_DOC", stored.prefix_doc, expected.prefix_doc),
        ("EMBEDDING_PREFIX_QUERY", stored.prefix_query, expected.prefix_query),
    ]
    if require_sparse or (stored.sparse_model is not None and expected.sparse_model is not None):
        checks.append(("SPARSE_EMBEDDING_MODEL", stored.sparse_model, expected.sparse_model))
        if stored.sparse_model is not None and expected.sparse_model is not None:
            checks.append(("sparse modifier", stored.sparse_modifier, expected.sparse_modifier))
    # A collection without the multilingual vector stays usable without it (the services then
    # neither write nor query it); one with it must be written and read with the same model.
    if stored.multilingual_model is not None:
        checks.append(("MULTILINGUAL_EMBEDDING_PROVIDER", stored.multilingual_model, expected.multilingual_model))
    for field, stored_value, service_value in checks:
        if stored_value != service_value:
            raise ContractMismatchError(collection, field, stored_value, service_value)
