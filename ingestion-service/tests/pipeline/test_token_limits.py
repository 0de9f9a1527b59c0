"""No chunk exceeds what the model reads, in every chunking mode, prefix and breadcrumb included."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ingestion_service.runtime import ServiceHooks
from ingestion_service.tokens import TokenCounter
from rag_runtime.embedding import ContractEmbedder

if TYPE_CHECKING:
    from ..conftest import AppFactory, MakeSettings, Points, Upload  # noqa: TID252

LONG_HEADING = " ".join(f"heading{i}" for i in range(25))
PARAGRAPH = " ".join(f"token{i} supercalifragilistic antidisestablishmentarianism" for i in range(45))
MARKDOWN = f"# {LONG_HEADING}\n\n## Second level {LONG_HEADING}\n\n{PARAGRAPH}\n\n## Tiny\n\nsmall\n\n### Deep\n\n{PARAGRAPH}\n"


@pytest.fixture(scope="module")
def prefixed_embedder(make_test_settings_module: MakeSettings) -> ContractEmbedder:
    embedder = ContractEmbedder(
        make_test_settings_module(embedding_prefix_doc="passage: ", enable_sparse_embeddings=False)
    )
    embedder.warm_up()
    return embedder


@pytest.mark.parametrize("split_by", ["markdown", "token", "word", "sentence", "passage"])
def test_no_chunk_exceeds_the_model_limit(
    app_client: AppFactory,
    upload: Upload,
    points: Points,
    prefixed_embedder: ContractEmbedder,
    tmp_path: Path,
    split_by: str,
) -> None:
    source = tmp_path / "long.md"
    source.write_text(MARKDOWN)
    hooks = ServiceHooks(embedder=prefixed_embedder)
    with app_client(
        hooks=hooks,
        chunk_split_by=split_by,
        embedding_prefix_doc="passage: ",
        chunk_min_size=10,
        enable_sparse_embeddings=False,
    ) as client:
        response = upload(client, source, file_id="t")
        assert response.status_code == 200, response.text
        stored = points(client, file_id="t")
    assert len(stored) > 3
    limit = prefixed_embedder.max_tokens
    for record in stored:
        meta = record.payload["meta"]
        # The lexical field holds exactly what the models read: context lines and body.
        embedded = record.payload[f"lexical_{meta['lexical_language']}"]
        assert record.payload["content"] in embedded
        total = prefixed_embedder.count_tokens("passage: " + embedded) + 2
        assert total <= limit, (split_by, total, meta["split_id"])
    if split_by == "markdown":
        headers = [record.payload["meta"]["headers"] for record in stored]
        assert [LONG_HEADING, f"Second level {LONG_HEADING}"] in headers
        assert [LONG_HEADING, "Tiny", "Deep"] in headers or [LONG_HEADING, "Tiny"] in headers


class WideWindowDense:
    """A dense model that reads 2,048 tokens (as an HTTP model such as bge-m3 does); fixed vectors."""

    model_name = "sentence-transformers/all-MiniLM-L6-v2"  # its tokenizer counts the chunks
    max_tokens: int | None = 2048

    def warm_up(self) -> None:
        return None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0 / math.sqrt(384)] * 384 for _ in texts]


@pytest.mark.parametrize("split_by", ["markdown", "token", "sentence"])
def test_no_chunk_exceeds_the_sparse_models_window_beside_a_wider_dense_model(
    app_client: AppFactory,
    upload: Upload,
    points: Points,
    make_test_settings: MakeSettings,
    tmp_path: Path,
    split_by: str,
) -> None:
    embedder = ContractEmbedder(make_test_settings(), dense_backend=WideWindowDense())
    embedder.warm_up()
    window = embedder.sparse_window
    assert window is not None
    assert embedder.max_tokens == 2048
    source = tmp_path / "long.md"
    source.write_text("# Findings\n\n" + " ".join(f"Sentence {i} about {PARAGRAPH[:120]}." for i in range(40)))
    with app_client(hooks=ServiceHooks(embedder=embedder), chunk_split_by=split_by, chunk_size=1500) as client:
        response = upload(client, source, file_id="w")
        assert response.status_code == 200, response.text
        stored = points(client, file_id="w")
    sparse_counter = TokenCounter(window.tokenizer)
    read_by_bm42 = []
    for record in stored:
        # What the models read is what BM25 indexes: the chunk's context lines and body.
        embedded = record.payload[f"lexical_{record.payload['meta']['lexical_language']}"]
        read_by_bm42.append(sparse_counter.count(embedded) + 2)
    # Without the sparse window the 1,500-token budget would make two or three chunks that BM42 cuts at 256.
    assert len(stored) >= 6
    assert max(read_by_bm42) <= window.max_tokens, (split_by, read_by_bm42)
    assert max(read_by_bm42) > window.max_tokens // 2  # pieces fill the window, not a sliver of it
