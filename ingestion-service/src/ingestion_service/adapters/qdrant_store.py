"""Qdrant access: the Haystack document store over the shared client, and the chunk index.

Every call goes through :func:`shared_contract.call_qdrant`, so transport and server errors
arrive as ``QdrantUnavailableError``; callers decide which wire code that becomes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from haystack_integrations.document_stores.qdrant import QdrantDocumentStore
from qdrant_client import QdrantClient, models

from ingestion_service.settings import Settings
from shared_contract import PAYLOAD_META, MetaKey, QdrantUnavailableError, call_qdrant, embedded_backend, meta_path


class SharedClientDocumentStore(QdrantDocumentStore):
    """qdrant-haystack's store, writing through the process's shared client.

    qdrant-haystack opens its own client in ``_initialize_client`` and then creates or checks
    the collection itself. An embedded store cannot be opened twice in one process, and
    ``shared_contract.bootstrap_collection`` owns the layout, so we hand over the shared client
    through the private ``_client`` attribute (checked against qdrant-haystack 13.1) and skip
    its collection setup. ``use_sparse_embeddings=True`` always, so every point gets NAMED
    vectors: with sparse off the documents simply carry no ``sparse_embedding``.
    """

    def __init__(self, client: QdrantClient, settings: Settings) -> None:
        super().__init__(
            index=settings.qdrant_index,
            embedding_dim=settings.dense_dim,
            use_sparse_embeddings=True,
            sparse_idf=True,
            recreate_index=False,
            progress_bar=False,
            wait_result_from_api=True,
            write_batch_size=64,
        )
        self._client = client

    def _initialize_client(self) -> None:
        if self._client is None:
            raise QdrantUnavailableError("the shared Qdrant client was released")

    async def _initialize_async_client(self) -> None:
        raise NotImplementedError("the ingestion service writes synchronously from worker threads")

    def close(self) -> None:
        # The shared client belongs to the app's lifespan (shared_contract.close_qdrant).
        return None


@dataclass(frozen=True)
class StoredChunk:
    """One point as the inspection API shows it."""

    point_id: str
    content: str
    meta: dict[str, Any]


def _match(key: str, value: str | int) -> models.FieldCondition:
    return models.FieldCondition(key=meta_path(key), match=models.MatchValue(value=value))


def _file_filter(file_id: str, collection_name: str | None, *extra: models.Condition) -> list[models.Condition]:
    conditions: list[models.Condition] = [_match(MetaKey.FILE_ID, file_id)]
    if collection_name is not None:
        conditions.append(_match(MetaKey.COLLECTION_NAME, collection_name))
    conditions.extend(extra)
    return conditions


Predicate = Callable[[dict[str, Any]], bool]


def _file_predicate(file_id: str, collection_name: str | None, extra: Predicate | None = None) -> Predicate:
    """The same selection as ``_file_filter``, evaluated on a point's meta in Python."""

    def matches(meta: dict[str, Any]) -> bool:
        if meta.get(MetaKey.FILE_ID) != file_id:
            return False
        if collection_name is not None and meta.get(MetaKey.COLLECTION_NAME) != collection_name:
            return False
        return extra is None or extra(meta)

    return matches


def _seq(meta: dict[str, Any]) -> int | float | None:
    value = meta.get(MetaKey.INGEST_SEQ)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


class ChunkIndex:
    """Reads and deletes a file's points by payload filters (versioning, DELETE, inspection).

    Against a server every operation is one filtered request (served by the payload indexes).
    The embedded store has no payload indexes and evaluates a filter in Python over every point
    (~0.1 s per call at 10k points), which made each ingest's commit cost grow with the
    collection; there the same selections run as a plain scan of the stored payloads, under
    the store's lock, and deletes go by point id.
    """

    def __init__(self, client: QdrantClient, collection: str) -> None:
        self._client = client
        self._collection = collection

    def count(self, file_id: str, collection_name: str | None = None) -> int:
        """Points of ``file_id`` (in one tenant collection, or in all)."""
        return self._count(
            models.Filter(must=_file_filter(file_id, collection_name)), _file_predicate(file_id, collection_name)
        )

    def count_newer(self, file_id: str, collection_name: str, ingest_seq: int) -> int:
        """Points of this (file, tenant) written by a run with a larger ingest_seq."""
        newer = models.FieldCondition(key=meta_path(MetaKey.INGEST_SEQ), range=models.Range(gt=ingest_seq))

        def is_newer(meta: dict[str, Any]) -> bool:
            seq = _seq(meta)
            return seq is not None and seq > ingest_seq

        return self._count(
            models.Filter(must=_file_filter(file_id, collection_name, newer)),
            _file_predicate(file_id, collection_name, is_newer),
        )

    def count_version(self, file_id: str, collection_name: str, ingest_version: str) -> int:
        """Points one run wrote."""
        mine = _match(MetaKey.INGEST_VERSION, ingest_version)
        return self._count(
            models.Filter(must=_file_filter(file_id, collection_name, mine)),
            _file_predicate(file_id, collection_name, lambda meta: meta.get(MetaKey.INGEST_VERSION) == ingest_version),
        )

    def delete_older(self, file_id: str, collection_name: str, ingest_seq: int) -> None:
        """Delete every point of (file, tenant) not written by a run with ingest_seq >= ``ingest_seq``.

        ``must_not`` (rather than a ``lt`` range) also removes points without an ingest_seq,
        e.g. ones written by older tooling.
        """
        keep = models.FieldCondition(key=meta_path(MetaKey.INGEST_SEQ), range=models.Range(gte=ingest_seq))

        def is_older(meta: dict[str, Any]) -> bool:
            seq = _seq(meta)
            return seq is None or not seq >= ingest_seq

        self._delete(
            models.Filter(must=_file_filter(file_id, collection_name), must_not=[keep]),
            _file_predicate(file_id, collection_name, is_older),
        )

    def delete_version(self, file_id: str, collection_name: str, ingest_version: str) -> None:
        """Delete the points one run wrote."""
        mine = _match(MetaKey.INGEST_VERSION, ingest_version)
        self._delete(
            models.Filter(must=_file_filter(file_id, collection_name, mine)),
            _file_predicate(file_id, collection_name, lambda meta: meta.get(MetaKey.INGEST_VERSION) == ingest_version),
        )

    def delete_file(self, file_id: str, collection_name: str | None = None) -> int:
        """Delete a file's points (one tenant or all); returns how many there were just before."""
        selector = models.Filter(must=_file_filter(file_id, collection_name))
        return self._delete(selector, _file_predicate(file_id, collection_name), counted=True)

    def scroll(
        self, file_id: str, collection_name: str | None, *, limit: int, offset: str | None
    ) -> tuple[list[StoredChunk], str | None]:
        """One page of a file's points in id order, plus the cursor of the next page."""
        records, next_offset = call_qdrant(
            "scroll",
            lambda: self._client.scroll(
                collection_name=self._collection,
                scroll_filter=models.Filter(must=_file_filter(file_id, collection_name)),
                limit=limit,
                offset=offset,
                with_payload=True,
                with_vectors=False,
            ),
        )
        chunks = [
            StoredChunk(
                point_id=str(record.id),
                content=str((record.payload or {}).get("content") or ""),
                meta=dict((record.payload or {}).get("meta") or {}),
            )
            for record in records
        ]
        return chunks, None if next_offset is None else str(next_offset)

    def _embedded_ids(self, backend: Any, predicate: Predicate) -> list[Any]:
        collection = backend.collections.get(self._collection)
        if collection is None:
            return []
        deleted = collection.deleted
        return [
            collection.ids_inv[index]
            for index, payload in enumerate(collection.payload)
            if not deleted[index] and predicate((payload or {}).get(PAYLOAD_META) or {})
        ]

    def _count(self, selector: models.Filter, predicate: Predicate) -> int:
        with embedded_backend(self._client) as embedded:
            if embedded is not None:
                return len(self._embedded_ids(embedded[0], predicate))
        result = call_qdrant(
            "count",
            lambda: self._client.count(collection_name=self._collection, count_filter=selector, exact=True),
        )
        return int(result.count)

    def _delete(self, selector: models.Filter, predicate: Predicate, *, counted: bool = False) -> int:
        """Delete the selected points; return how many there were (counted on a server only if asked)."""
        with embedded_backend(self._client) as embedded:
            if embedded is not None:
                # Still under the store's lock: the selection and the delete are one step.
                ids = self._embedded_ids(embedded[0], predicate)
                if ids:
                    call_qdrant(
                        "delete",
                        lambda: self._client.delete(
                            collection_name=self._collection,
                            points_selector=models.PointIdsList(points=ids),
                            wait=True,
                        ),
                    )
                return len(ids)
        existing = self._count(selector, predicate) if counted else None
        if existing != 0:  # unknown (not counted) or some: delete
            call_qdrant(
                "delete",
                lambda: self._client.delete(
                    collection_name=self._collection,
                    points_selector=models.FilterSelector(filter=selector),
                    wait=True,
                ),
            )
        return existing or 0
