"""The contract's snapshot of fastembed's model registry matches the installed fastembed.

The contract package stays free of fastembed, so it carries the dimensions and IDF flags as
tables; this test fails when a fastembed upgrade adds, drops or changes a model.
"""

from fastembed import SparseTextEmbedding, TextEmbedding

from shared_contract.embedding_models import FASTEMBED_DENSE_DIMS, FASTEMBED_SPARSE_REQUIRES_IDF


def test_dense_dimensions_match_fastembeds_registry() -> None:
    registry = {str(item["model"]): int(item["dim"]) for item in TextEmbedding.list_supported_models()}

    assert FASTEMBED_DENSE_DIMS == registry


def test_sparse_idf_flags_match_fastembeds_registry() -> None:
    registry = {
        str(item["model"]): bool(item.get("requires_idf", False))
        for item in SparseTextEmbedding.list_supported_models()
    }

    assert FASTEMBED_SPARSE_REQUIRES_IDF == registry
