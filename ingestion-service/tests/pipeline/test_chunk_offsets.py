"""``stamp_offsets``: offsets found in order; a chunk that is not a verbatim piece of the text gets none
and does not lose the ones after it."""

from __future__ import annotations

from haystack import Document

from ingestion_service.pipeline.components.chunk_finalizer import stamp_offsets


def test_a_chunk_not_in_the_text_gets_no_offset_and_the_next_is_still_found() -> None:
    pages = [Document(content="Alpha beta gamma."), Document(content="Delta epsilon. Zeta eta.")]
    chunks = [
        Document(content="Alpha beta"),
        Document(content="beta gamma."),
        Document(content="| col | Delta |"),  # a re-rendered table row: not the text as extracted
        Document(content="Zeta eta."),
    ]
    stamp_offsets(chunks, pages)
    text = "Alpha beta gamma.\n\nDelta epsilon. Zeta eta."
    assert [chunk.meta.get("char_start") for chunk in chunks] == [0, 6, None, text.index("Zeta")]


def test_a_repeated_piece_is_placed_after_the_chunk_before_it() -> None:
    pages = [Document(content="A. Rep. B. Rep. C.")]
    chunks = [Document(content="A. Rep."), Document(content="B."), Document(content="Rep."), Document(content="C.")]
    stamp_offsets(chunks, pages)
    # The second "Rep." is the one after "B.", not the first one in the text.
    assert [chunk.meta["char_start"] for chunk in chunks] == [0, 8, 11, 16]
