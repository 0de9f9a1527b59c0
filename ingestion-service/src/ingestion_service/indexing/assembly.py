"""Assembly of the indexing pipeline (built once at start-up): its components by stage, and their wiring."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from haystack import Pipeline

from ingestion_service import run_control
from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.documents import ConverterRegistry
from ingestion_service.documents.renderings import PageRenderer
from ingestion_service.pipeline.components.chunk_finalizer import ChunkFinalizer
from ingestion_service.pipeline.components.chunk_regions import ChunkRegions
from ingestion_service.pipeline.components.chunk_writer import ChunkWriter, WriteBatch
from ingestion_service.pipeline.components.dense_embedder import ContractDenseEmbedder
from ingestion_service.pipeline.components.embedding_guard import EmbeddingGuard
from ingestion_service.pipeline.components.file_converter import FileConverter
from ingestion_service.pipeline.components.language_tagger import LanguageTagger
from ingestion_service.pipeline.components.markdown_splitter import MarkdownSplitter
from ingestion_service.pipeline.components.multilingual_embedder import MultilingualDenseEmbedder
from ingestion_service.pipeline.components.sparse_embedder import ContractSparseEmbedder
from ingestion_service.pipeline.components.token_splitter import TokenSplitter
from ingestion_service.pipeline.components.unit_splitter import UnitSplitter
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver
from ingestion_service.settings import Settings
from rag_runtime.embedding import ContractEmbedder
from rag_runtime.language_id import language_identifier
from rag_runtime.store import ChunkPoint


@dataclass
class PipelineParts:
    """The components, by stage. Tests swap single parts (e.g. a failing embedder) before assembly."""

    converter: Any
    splitter: Any
    finalizer: Any
    dense_embedder: Any
    sparse_embedder: Any | None
    guard: Any
    writer: Any
    multilingual_embedder: Any | None = None
    language_tagger: Any | None = None
    regions: Any | None = None


def checked_write(write: WriteBatch) -> WriteBatch:
    """``write`` that first stops an aborted or late run (the writer itself is not run-aware)."""

    async def write_batch(points: Sequence[ChunkPoint]) -> None:
        run_control.checkpoint()
        await write(points)

    return write_batch


def build_parts(
    settings: Settings,
    *,
    registry: ConverterRegistry,
    embedder: ContractEmbedder,
    embed_text: EmbedTextBuilder,
    index: ChunkIndex,
    observer: StageObserver | None = None,
    multilingual_active: Callable[[], bool] = lambda: False,
) -> PipelineParts:
    """The standard components for ``settings``.

    ``multilingual_active``: whether the collection has ``text-dense-multilingual`` (its manifest).
    """
    overlap = settings.chunk_overlap
    splitter: Any
    if settings.chunk_split_by == "markdown":
        splitter = MarkdownSplitter(
            embed_text,
            overlap=overlap,
            min_tokens=settings.chunk_min_size,
            keyed_tables=settings.chunk_table_rows == "pairs",
            observer=observer,
        )
    elif settings.chunk_split_by == "token":
        splitter = TokenSplitter(embed_text, overlap=overlap, observer=observer)
    else:
        splitter = UnitSplitter(settings.chunk_split_by, size=settings.chunk_size, overlap=overlap, observer=observer)
    sparse_on = settings.enable_sparse_embeddings
    return PipelineParts(
        converter=FileConverter(
            registry,
            settings.extraction_engine,
            observer=observer,
            max_chars=settings.max_extracted_chars,
            attribute_types=settings.attribute_types,
        ),
        splitter=splitter,
        finalizer=ChunkFinalizer(
            embed_text, overlap=overlap, observer=observer, max_chunks=settings.max_chunks_per_document
        ),
        language_tagger=LanguageTagger(language_identifier(), observer=observer),
        regions=ChunkRegions(
            observer=observer,
            renderer=PageRenderer(settings) if settings.gotenberg_url and settings.gotenberg_page_renderings else None,
        ),
        dense_embedder=ContractDenseEmbedder(embedder, embed_text, sparse_enabled=sparse_on, observer=observer),
        sparse_embedder=ContractSparseEmbedder(embedder, embed_text, observer=observer) if sparse_on else None,
        guard=EmbeddingGuard(dim=embedder.dim, require_sparse=sparse_on, observer=observer),
        writer=ChunkWriter(
            checked_write(index.write), embed_text, lexical_window=settings.lexical_window_chunks, observer=observer
        ),
        multilingual_embedder=None
        if embedder.multilingual is None
        else MultilingualDenseEmbedder(
            embedder.multilingual, embed_text, active=multilingual_active, observer=observer
        ),
    )


def assemble(parts: PipelineParts) -> Pipeline:
    """converter -> splitter -> finalizer -> [regions] -> [languages] -> dense -> [sparse] -> guard -> [multilingual] -> writer."""
    pipeline = Pipeline()
    pipeline.add_component("converter", parts.converter)
    pipeline.add_component("splitter", parts.splitter)
    pipeline.add_component("finalizer", parts.finalizer)
    pipeline.add_component("dense_embedder", parts.dense_embedder)
    pipeline.add_component("guard", parts.guard)
    pipeline.add_component("writer", parts.writer)
    pipeline.connect("converter.documents", "splitter.documents")
    pipeline.connect("splitter.documents", "finalizer.documents")
    # The extracted text too, so each chunk gets its character offset in it.
    pipeline.connect("converter.documents", "finalizer.sources")
    finalized = "finalizer.documents"
    if parts.regions is not None:
        pipeline.add_component("regions", parts.regions)
        pipeline.connect(finalized, "regions.documents")
        pipeline.connect("converter.source", "regions.source")
        finalized = "regions.documents"
    if parts.language_tagger is not None:
        pipeline.add_component("language_tagger", parts.language_tagger)
        pipeline.connect(finalized, "language_tagger.documents")
        pipeline.connect("language_tagger.documents", "dense_embedder.documents")
    else:
        pipeline.connect(finalized, "dense_embedder.documents")
    if parts.sparse_embedder is not None:
        pipeline.add_component("sparse_embedder", parts.sparse_embedder)
        pipeline.connect("dense_embedder.documents", "sparse_embedder.documents")
        pipeline.connect("sparse_embedder.documents", "guard.documents")
    else:
        pipeline.connect("dense_embedder.documents", "guard.documents")
    if parts.multilingual_embedder is not None:
        pipeline.add_component("multilingual_embedder", parts.multilingual_embedder)
        pipeline.connect("guard.documents", "multilingual_embedder.documents")
        pipeline.connect("multilingual_embedder.documents", "writer.documents")
        pipeline.connect("multilingual_embedder.multilingual", "writer.multilingual")
    else:
        pipeline.connect("guard.documents", "writer.documents")
    return pipeline
