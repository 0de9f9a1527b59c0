"""Embedding a run's chunks slice by slice, so a run can stop between model calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ingestion_service.errors import IngestionError
from ingestion_service.run_control import Stage, checkpoint, report_progress
from shared_contract import ContractError

# Texts per embedder call: a run can only stop between calls (deadline, disconnect, shutdown),
# so a call must stay short; two of the contract's default 32-text batches keep padding low.
EMBED_SLICE = 64

VectorT = TypeVar("VectorT")


def embed_in_slices(
    texts: Sequence[str],
    embed: Callable[[Sequence[str]], Sequence[VectorT]],
    failure: Callable[[str], IngestionError],
    stage: Stage,
) -> list[VectorT]:
    """``embed`` over ``texts`` in EMBED_SLICE slices, a checkpoint before each and the run's
    ``stage`` progress after each; one vector per text.

    Any failure of the model becomes ``failure`` (the stage's typed error); so does a miscount.
    """
    vectors: list[VectorT] = []
    report_progress(stage, 0, len(texts))
    for start in range(0, len(texts), EMBED_SLICE):
        checkpoint()
        try:
            vectors.extend(embed(texts[start : start + EMBED_SLICE]))
        except ContractError as exc:
            raise failure(str(exc)) from exc
        except Exception as exc:  # any backend failure means chunks without their vectors
            raise failure(f"{type(exc).__name__}: {exc}") from exc
        report_progress(stage, len(vectors), len(texts))
    if len(vectors) != len(texts):
        raise failure(f"{len(vectors)} vectors for {len(texts)} chunks")
    return vectors
