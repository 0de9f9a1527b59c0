"""The ingest fingerprint: everything besides a file's bytes that decides its chunks and vectors.

Same source sha256 + same fingerprint = the points an ingest would write are the ones stored, so
the ingest can answer ``unchanged`` without extracting or embedding. Any setting that changes
text, chunking or vectors belongs here; one that does not (timeouts, limits, ports) must not,
or every restart with a new timeout would re-embed everything.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from ingestion_service.settings import Settings
from shared_contract import CONTRACT_VERSION, manifest_for

# Bumped whenever the splitters cut chunks, or build what is indexed for them, differently for the
# same settings (2: whole blocks, tables between rows, a title and context indexed with each chunk).
CHUNKING_REVISION: Final = 2

# The settings that shape extraction, chunking and the lexical entries.
FINGERPRINT_SETTINGS: Final = (
    "enable_sparse_embeddings",
    "enable_ocr",
    "ocr_languages",
    "ocr_garbage_text_layer",
    "extraction_router_default",
    "extraction_router_diagram_engine",
    "extraction_router_diagram_profile",
    "extraction_router_min_textboxes",
    "extraction_router_drawing_ratio",
    "extraction_router_min_body_images",
    "extraction_router_min_image_emu",
    "extraction_router_min_image_word_ratio",
    "extraction_router_scan_engine",
    "vision_llm_model",
    "vision_llm_dpi",
    "vision_llm_max_pages",
    "vision_llm_language_hint",
    "vision_llm_profile",
    "max_extracted_chars",
    "chunk_split_by",
    "chunk_size",
    "chunk_overlap",
    "chunk_min_size",
    "tokenizer_model",
    "tokenizer_revision",
    "embed_headers_breadcrumb",
    "embed_document_title",
    "chunk_table_rows",
    "lexical_window_chunks",
)


def ingest_fingerprint(settings: Settings, engine: str) -> str:
    """A short digest of the contract's models and the settings above, for the engine this ingest uses."""
    manifest = manifest_for(settings).model_dump(exclude={"created_at", "contract_version"})
    shaping = {name: getattr(settings, name) for name in FINGERPRINT_SETTINGS}
    document = {
        # The major.minor contract: a new minor may change payloads (it adds keys).
        "contract": CONTRACT_VERSION.rsplit(".", 1)[0],
        "manifest": manifest,
        "settings": shaping,
        "chunking": CHUNKING_REVISION,
        "engine": engine,
    }
    encoded = json.dumps(document, sort_keys=True, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()[:32]
