"""What the MCP tools return, the backend port they call, and its typed errors.

Light on purpose (pydantic and the shared filter model only): ``rag mcp`` imports this, and the
server definition, without the retrieval agent's search stack.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, Field

from retrieval_agent.errors import KnowledgeBaseError
from shared_contract.document_filter import DocumentFilter
from shared_contract.paths import relative_path
from shared_contract.schema import TenantKind, tenant_kind

CollectionKind = TenantKind
collection_kind = tenant_kind
DOCUMENT_URI_PREFIX = "kb://"
# The tools' bounds, the same over MCP and the OpenAPI tool server.
DEFAULT_K = 5
MAX_K = 50
MAX_PAGE = 200
ONE_DOCUMENT = "read_document takes a file_id or a path, one of them."


def _absent(value: object) -> bool:
    return value is None


def document_uri(collection: str, file_id: str) -> str:
    """The resource URI of one document (the ``kb://{collection}/{file_id}`` template)."""
    return f"{DOCUMENT_URI_PREFIX}{collection}/{file_id}"


class Passage(BaseModel):
    """One ranked search hit."""

    rank: int = Field(description="1 is the best match.")
    text: str
    name: str | None = Field(default=None, description="The source file's name.")
    path: str | None = Field(default=None, description="Its path relative to the folder it was synced from.")
    file_id: str | None = None
    collection: str | None = None
    page: int | None = Field(default=None, description="0-based page of the source, when the format has pages.")
    page_number: int | None = Field(default=None, description="The same page as people count it (page + 1).")
    score: float = Field(description="Calibrated relevance in [0, 1] (the /search distance).")
    uri: str | None = Field(default=None, description="The whole document as a resource (kb://collection/file_id).")
    # Left out when absent: without citation links a passage reads as it did before them.
    citation_url: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="The passage's page as a PNG with the passage highlighted, a signed link that opens without a "
        "key until it expires (PDFs and images on a server with citation links configured; else absent).",
    )
    original_url: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="The original document at the passage's page (#page=), signed as citation_url.",
    )


class SearchResult(BaseModel):
    query: str
    collection: str
    passages: list[Passage]


class DocumentText(BaseModel):
    file_id: str
    collection: str
    name: str | None = None
    path: str | None = Field(default=None, description="Its path relative to the folder it was synced from.")
    text: str
    chunks: int | None = Field(default=None, description="Chunks the text was rebuilt from.")
    truncated: bool = Field(default=False, description="The text was cut at the server's size limit.")


class DocumentSummary(BaseModel):
    file_id: str
    name: str | None = None
    path: str | None = None
    format: str | None = None
    tags: list[str] = Field(default_factory=list)
    category: str | None = None
    chunks: int | None = None
    ingested_at: datetime | None = None
    uri: str


class DocumentList(BaseModel):
    collection: str
    documents: list[DocumentSummary]
    total: int = Field(description="Documents in the collection (all pages).")
    next_offset: int | None = Field(default=None, description="The next page's offset; null on the last page.")


class CollectionInfo(BaseModel):
    name: str
    kind: CollectionKind = Field(
        description="knowledge_base, or Open WebUI's per-file (file-*) and per-user memory (user-memory-*) collections."
    )
    documents: int | None = None
    chunks: int | None = None


class CollectionList(BaseModel):
    collections: list[CollectionInfo]
    complete: bool = Field(default=True, description="False when the listing stopped at the server's cap.")


class KnowledgeBackend(Protocol):
    """What the tools run on: the retrieval agent in process (``/mcp``) or the two services over HTTP
    (``rag mcp``). Arguments arrive validated (collection names follow the contract's rule).

    Every method raises :class:`KnowledgeBaseError` (or a subclass) for a failure the caller can act on.
    """

    async def search(
        self, query: str, collection: str, *, k: int, document_filter: DocumentFilter | None
    ) -> list[Passage]: ...

    async def read_document(self, file_id: str, collection: str) -> DocumentText: ...

    async def file_id_at(self, path: str, collection: str) -> str:
        """The file_id of the document at ``path`` (relative, normalised) in ``collection``, the newest
        when several files were ingested under that path; DocumentNotFoundError when there is none."""
        ...

    async def list_documents(self, collection: str, *, limit: int, offset: int) -> DocumentList: ...

    async def list_collections(self, *, include_all: bool) -> CollectionList: ...


async def document_id(backend: KnowledgeBackend, collection: str, file_id: str | None, path: str | None) -> str:
    """The file_id read_document reads: the one given, else the one at ``path`` in ``collection``.

    :class:`KnowledgeBaseError` unless exactly one of them is given, or for a path that is not relative.
    """
    if path is None:
        if file_id is None:
            raise KnowledgeBaseError(ONE_DOCUMENT)
        return file_id
    if file_id is not None:
        raise KnowledgeBaseError(ONE_DOCUMENT)
    try:
        normalised = relative_path(path)
    except ValueError as exc:
        raise KnowledgeBaseError(f"path {exc}") from None
    return await backend.file_id_at(normalised, collection)
