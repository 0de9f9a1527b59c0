"""A document rebuilt from overlapping chunk windows."""

from __future__ import annotations

from shared_contract.text import overlap_length, stitch

TEXT = (
    "# Staff handbook\n\nNew employees receive a laptop on their first day. The IT desk on the second floor "
    "sets up accounts for email, calendar and the document archive. Holiday requests go to your manager at "
    "least three weeks ahead through the HR portal. The canteen opens at eleven thirty and closes at one "
    "thirty. Bicycles are parked in the basement, never in the corridors."
)


def windows(text: str, size: int, overlap: int) -> list[str]:
    """Word windows sharing ``overlap`` words, as the token splitter cuts them."""
    words = text.split(" ")
    pieces: list[str] = []
    start = 0
    while start < len(words):
        pieces.append(" ".join(words[start : start + size]).strip())
        if start + size >= len(words):
            break
        start += size - overlap
    return pieces


def test_overlap_is_the_longest_suffix_that_prefixes_the_next_chunk() -> None:
    assert overlap_length("alpha beta gamma delta", "gamma delta epsilon") == len("gamma delta")
    assert overlap_length("abc", "xyz") == 0
    assert overlap_length("aaaa", "aaab") == 3


def test_stitch_keeps_each_window_overlap_once() -> None:
    chunks = windows(TEXT, 14, 6)
    assert len(chunks) > 3
    assert stitch(chunks) == TEXT


def test_chunks_sharing_nothing_are_joined_by_a_blank_line() -> None:
    assert stitch(["First section ends here.", "## Second\nstarts here."]) == (
        "First section ends here.\n\n## Second\nstarts here."
    )
