"""Value types the embedders return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer


@dataclass(frozen=True, slots=True)
class SparseVectorData:
    """A sparse vector as Qdrant stores it: parallel index and value lists."""

    indices: list[int]
    values: list[float]


@dataclass(frozen=True, slots=True)
class DocumentVectors:
    """Vectors for a batch of documents; ``sparse`` is None when it was not computed."""

    dense: list[list[float]]
    sparse: list[SparseVectorData] | None


@dataclass(frozen=True, slots=True)
class QueryVectors:
    """Vectors for one query."""

    dense: list[float]
    sparse: SparseVectorData | None


@dataclass(frozen=True, slots=True)
class TokenWindow:
    """What a model reads of one input: its tokenizer and the most tokens, special tokens included."""

    tokenizer: Tokenizer
    max_tokens: int
