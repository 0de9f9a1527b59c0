"""Where the chunker's tokenizer comes from: the embedder, the offline models dir, or the Hub."""

from __future__ import annotations

from tokenizers import Tokenizer

from ingestion_service.settings import Settings
from ingestion_service.tokens import TokenCounter
from rag_runtime.embedding import ContractEmbedder
from shared_contract import ModelUnavailableError
from shared_contract.embedding_models import model_folder


def load_token_counter(settings: Settings, embedder: ContractEmbedder) -> TokenCounter:
    """A counter for TOKENIZER_MODEL (default: the embedding model itself).

    The embedding model's own tokenizer is preferred: chunk budgets are then exact. A different
    TOKENIZER_MODEL is read from LOCAL_MODELS_DIR when built there, else from the Hugging Face
    Hub pinned to TOKENIZER_REVISION.
    """
    name = settings.tokenizer_model or settings.embedding_model
    if name == settings.embedding_model and embedder.tokenizer is not None:
        return TokenCounter(embedder.tokenizer)
    if settings.local_models_dir is not None:
        candidate = model_folder(settings.local_models_dir, name) / "tokenizer.json"
        if candidate.is_file():
            return TokenCounter(Tokenizer.from_file(str(candidate)))
    try:
        tokenizer = Tokenizer.from_pretrained(name, revision=settings.tokenizer_revision or "main")
    except Exception as exc:  # the Hub client raises many types; all mean "not obtainable"
        raise ModelUnavailableError(
            f"tokenizer {name!r} is not in LOCAL_MODELS_DIR and could not be fetched ({type(exc).__name__})"
        ) from exc
    return TokenCounter(tokenizer)
