"""Citation links in the tests: the settings that turn them on, a fixed clock, chunks a link can show
(a PDF's page, as ingestion stores it under contract 3.3) and one it cannot (a docx)."""

from __future__ import annotations

from typing import Any

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore
from shared_contract.citations import CITATIONS_PATH, ORIGINAL_SUFFIX, PAGE_IMAGE_SUFFIX

from .conftest import add_chunk, chunk_meta  # noqa: TID252

SIGNING_KEY = "citation-signing-key-0123456789-abcdef"
KEY = SIGNING_KEY.encode("utf-8")
BASE_URL = "https://ingest.example.org"
TTL_SECONDS = 3600
NOW = 1_750_000_000.5
# The settings that make links (overrides of make_settings / chat_settings).
LINKS_ON: dict[str, Any] = {
    "citation_signing_key": SIGNING_KEY,
    "citation_base_url": BASE_URL,
    "citation_link_ttl_seconds": TTL_SECONDS,
}

HANDBOOK_TENANT = "kb-a"
HANDBOOK_NAME = "handbook.pdf"
HANDBOOK_FILE_ID = "file-handbook.pdf"
HANDBOOK_HASH = "ab" * 32
# (chunk id, 0-based page, text): two chunks of one PDF, on different pages.
HANDBOOK_CHUNKS = [
    ("handbook-leave", 2, "Every employee gets twenty-five days of paid vacation leave per calendar year."),
    ("handbook-sick", 4, "Sick leave beyond three days of absence needs a doctor's note for the employer."),
]
LEAVE_QUESTION = "How many days of paid vacation leave does an employee get?"
MEMO_NAME = "memo.docx"
MEMO_TEXT = "The vacation memo asks everybody to book paid vacation leave before March."


def clock() -> float:
    return NOW


async def add_handbook(store: ChunkStore, embedder: ContractEmbedder) -> None:
    """The handbook PDF's chunks with their regions, and a docx (a format with no page to show)."""
    for split, (chunk_id, page, text) in enumerate(HANDBOOK_CHUNKS):
        meta = chunk_meta(
            HANDBOOK_TENANT,
            HANDBOOK_NAME,
            page,
            split,
            format="pdf",
            source_sha256=HANDBOOK_HASH,
            geometry="text_layer",
            regions=[{"page": page, "boxes": [[0.1, 0.2, 0.9, 0.25]]}],
        )
        await add_chunk(store, embedder, chunk_id, text, meta)
    memo = chunk_meta(HANDBOOK_TENANT, MEMO_NAME, 0, 0, format="docx", source_sha256="cd" * 32, geometry="none")
    del memo["page"]
    await add_chunk(store, embedder, "memo-0", MEMO_TEXT, memo)


def page_image_token(url: str) -> str:
    """The token of a page-image link, asserting the link's shape."""
    prefix = f"{BASE_URL}{CITATIONS_PATH}/"
    suffix = f"/{PAGE_IMAGE_SUFFIX}"
    assert url.startswith(prefix), url
    assert url.endswith(suffix), url
    return url.removeprefix(prefix).removesuffix(suffix)


def original_link(token: str, page: int) -> str:
    """The original's link for ``token``, opened at the 0-based ``page``."""
    return f"{BASE_URL}{CITATIONS_PATH}/{token}/{ORIGINAL_SUFFIX}#page={page + 1}"
