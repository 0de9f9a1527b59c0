"""Removing a document: its committed chunks, then its originals (one path for DELETE and source syncs)."""

from __future__ import annotations

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.errors import DeleteFailedError
from ingestion_service.indexing.originals import Originals
from shared_contract import ContractError


async def delete_document(
    index: ChunkIndex, originals: Originals | None, file_id: str, collection_name: str | None
) -> int:
    """Delete the file from ``collection_name`` (every collection when None); the chunks removed.

    The chunks go first: an original without chunks is unreachable and removed by the next delete,
    while chunks without their original would cite a page that cannot be shown.
    """
    try:
        deleted = await index.delete_file(file_id, collection_name)
    except ContractError as exc:
        raise DeleteFailedError(str(exc)) from exc
    if originals is not None:
        if collection_name is None:
            await originals.forget_everywhere(file_id)
        else:
            try:
                await originals.settle(collection_name, file_id)
            except ContractError as exc:
                raise DeleteFailedError(str(exc)) from exc
    return deleted
