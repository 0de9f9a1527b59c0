"""The collection's layout, as data: what bootstrap asks either adapter to create (pure)."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from qdrant_client import models

from rag_runtime.lexical import LEXICAL_FIELD_PREFIX, text_index_params
from shared_contract.attributes import AttributeType
from shared_contract.manifest import MANIFEST_METADATA_KEY, CollectionManifest, manifest_for
from shared_contract.schema import DENSE_VECTOR, MULTILINGUAL_VECTOR, SPARSE_VECTOR, MetaKey, meta_path
from shared_contract.settings import ContractSettings

IndexSchema = (
    models.KeywordIndexParams
    | models.IntegerIndexParams
    | models.FloatIndexParams
    | models.DatetimeIndexParams
    | models.TextIndexParams
)


# int8 copies of the ``text-dense`` vectors, kept in RAM: a graph search scores its candidates on
# them and rescores the best with the stored originals, so hits keep their exact cosines (search
# asks for that: ``retrieval_agent.search.query.DENSE_SEARCH``). One byte a dimension; on the 5k
# SciFact store the dense leg took 0.41 ms against 1.32 ms (docs/benchmarks.md).
DENSE_QUANTIZATION = models.ScalarQuantization(
    scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
)


@dataclass(frozen=True)
class PayloadIndexSpec:
    """One payload index the collection must have."""

    field_name: str
    schema: IndexSchema


@dataclass(frozen=True)
class CollectionSpec:
    """Exactly what bootstrap creates: vectors, HNSW layout, manifest and payload indexes."""

    name: str
    dense_dim: int
    sparse_idf: bool | None  # None: no text-sparse vector
    hnsw_config: models.HnswConfigDiff
    metadata: dict[str, Any]
    payload_indexes: list[PayloadIndexSpec] = field(default_factory=lambda: list[PayloadIndexSpec]())
    # Cluster layout on a Qdrant server (None: the server's default); the embedded store has one shard.
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    multilingual_dim: int | None = None  # None: no text-dense-multilingual vector
    # False: no int8 copies, as in collections created before 2026-11-28.
    dense_int8_copies: bool = True

    @property
    def vectors_config(self) -> dict[str, models.VectorParams]:
        """The named dense vectors: ``text-dense``, and ``text-dense-multilingual`` when configured."""
        vectors = {
            DENSE_VECTOR: models.VectorParams(
                size=self.dense_dim,
                distance=models.Distance.COSINE,
                quantization_config=DENSE_QUANTIZATION if self.dense_int8_copies else None,
            )
        }
        if self.multilingual_dim is not None:
            # Cold: not loaded into RAM ahead of use. Every point has a slot in a named vector's
            # storage, so an English-only store would otherwise hold ~1.5 KB per chunk for nothing
            # (+31 MiB at 10k chunks, measured); where the vectors exist, queries read them through
            # the page cache as fast (0.45 ms per query over 3.5k vectors either way).
            vectors[MULTILINGUAL_VECTOR] = models.VectorParams(
                size=self.multilingual_dim, distance=models.Distance.COSINE, memory=models.Memory.COLD
            )
        return vectors

    @property
    def sparse_vectors_config(self) -> dict[str, models.SparseVectorParams] | None:
        """The named sparse vector (IDF modifier for BM42/BM25), or None."""
        if self.sparse_idf is None:
            return None
        modifier = models.Modifier.IDF if self.sparse_idf else None
        return {SPARSE_VECTOR: models.SparseVectorParams(modifier=modifier)}


def _keyword(key: str, *, tenant: bool = False, hnsw: bool = True) -> PayloadIndexSpec:
    return PayloadIndexSpec(
        meta_path(key),
        models.KeywordIndexParams(
            type=models.KeywordIndexType.KEYWORD, is_tenant=tenant or None, enable_hnsw=None if hnsw else False
        ),
    )


def _attribute_index(key: str, kind: AttributeType) -> PayloadIndexSpec:
    path = meta_path(f"{MetaKey.ATTRIBUTES}.{key}")
    schema: IndexSchema
    if kind == "integer":
        schema = models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True, range=True)
    elif kind == "float":
        schema = models.FloatIndexParams(type=models.FloatIndexType.FLOAT)
    elif kind == "datetime":
        schema = models.DatetimeIndexParams(type=models.DatetimeIndexType.DATETIME)
    else:
        schema = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD)
    return PayloadIndexSpec(path, schema)


def collection_spec(settings: ContractSettings) -> CollectionSpec:
    """The collection layout for ``settings``."""
    manifest = manifest_for(settings)
    indexes = [
        # The tenant key: per-tenant HNSW subgraphs and tenant-grouped storage.
        _keyword(MetaKey.COLLECTION_NAME, tenant=True),
        _keyword(MetaKey.COLLECTION_TYPE),
        _keyword(MetaKey.LANGUAGES),
        _keyword(MetaKey.LEXICAL_LANGUAGE),
        _keyword(MetaKey.FILE_ID),
        _keyword(MetaKey.INGEST_VERSION),
        _keyword(MetaKey.INGEST_STATE),
        # Search's one-condition filter (contract 3.0). It selects a tenant's committed points, which
        # the tenant key's graphs already link: no second set of per-tenant graphs.
        _keyword(MetaKey.LIVE_IN, hnsw=False),
        # Range filters on the ingest sequence decide which version of a file is newest.
        PayloadIndexSpec(
            meta_path(MetaKey.INGEST_SEQ),
            models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=False, range=True),
        ),
        # Document metadata: what /search's ``filter``, the documents list and sync select on.
        _keyword(MetaKey.NAME),
        _keyword(MetaKey.FORMAT),
        _keyword(MetaKey.TAGS),
        _keyword(MetaKey.CATEGORY),
        _keyword(MetaKey.EXTRACTOR),
        _keyword(MetaKey.SOURCE_HASH),
        # Since 3.2: reading a document by its path, and the folder filter (exact folders, no prefix scan).
        _keyword(MetaKey.PATH),
        _keyword(MetaKey.FOLDERS),
        PayloadIndexSpec(
            meta_path(MetaKey.INDEXED_AT), models.DatetimeIndexParams(type=models.DatetimeIndexType.DATETIME)
        ),
        # split_id 0 is a document's head: listing documents reads one point each.
        PayloadIndexSpec(
            meta_path(MetaKey.SPLIT_ID),
            models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True, range=False),
        ),
        *(_attribute_index(key, kind) for key, kind in settings.attribute_types.items()),
    ]
    # The BM25 text index of each lexical language is created by the first upsert that writes a
    # chunk in that language (``lexical_indexes_for``): the engine holds ~35 MB per loaded text
    # index whatever its size, so a store keeps only the languages it holds.
    return replace(
        vector_layout(settings.qdrant_index, manifest),
        shard_number=settings.qdrant_shard_number,
        replication_factor=settings.qdrant_replication_factor,
        write_consistency_factor=settings.qdrant_write_consistency_factor,
        payload_indexes=indexes,
    )


def vector_layout(name: str, manifest: CollectionManifest) -> CollectionSpec:
    """The layout's vectors and graphs for the collection ``manifest`` describes, without payload
    indexes: what maintenance restates to a store created under an earlier layout."""
    sparse_idf: bool | None = None
    if manifest.sparse_model is not None:
        sparse_idf = manifest.sparse_modifier == "idf"
    return CollectionSpec(
        name=name,
        dense_dim=manifest.dense_dim,
        sparse_idf=sparse_idf,
        # m=0 disables the global graph; payload_m builds one graph per tenant instead.
        hnsw_config=models.HnswConfigDiff(m=0, payload_m=16),
        metadata={MANIFEST_METADATA_KEY: manifest.model_dump(mode="json")},
        multilingual_dim=manifest.multilingual_dim,
    )


def lexical_indexes_for(payloads: Iterable[Mapping[str, Any]], existing: Container[str]) -> list[PayloadIndexSpec]:
    """The BM25 text indexes a batch of payloads needs that ``existing`` lacks (one per language field)."""
    fields = sorted(
        {key for payload in payloads for key in payload if key.startswith(LEXICAL_FIELD_PREFIX) and key not in existing}
    )
    return [PayloadIndexSpec(field, text_index_params(field.removeprefix(LEXICAL_FIELD_PREFIX))) for field in fields]
