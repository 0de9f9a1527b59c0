"""A document rebuilt from overlapping chunk windows."""

from __future__ import annotations

import random

import pytest

from shared_contract.text import chunk_origin, overlap_length, stitch

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


# A page or paragraph that reads the same as the one before it (an OCR'd form, a repeated notice).
REPEATED = "This page is intentionally left blank for the archive."


def test_a_chunk_equal_to_the_one_before_it_is_kept_not_taken_for_overlap() -> None:
    assert len(REPEATED) >= 20
    assert stitch([REPEATED] * 4) == "\n\n".join([REPEATED] * 4)


def test_an_overlap_is_shorter_than_both_chunks() -> None:
    assert overlap_length(REPEATED, REPEATED) == 0
    # ``following`` wholly a suffix of ``previous``, ``previous`` wholly a prefix of ``following``.
    assert overlap_length("Intro. " + REPEATED, REPEATED) == 0
    assert overlap_length(REPEATED, REPEATED + " Next.") == 0
    # The longest border shorter than both: "abc", not "abcabc".
    assert overlap_length("abcabc", "abcabc") == 3
    assert overlap_length("a", "a") == 0
    assert overlap_length("", "abc") == overlap_length("abc", "") == 0


def test_window_overlap_is_removed_around_a_repeated_chunk() -> None:
    chunks = windows(TEXT, 14, 6)
    assert stitch([*chunks, chunks[-1]]) == TEXT + "\n\n" + chunks[-1]
    assert stitch([chunks[0], *chunks]) == chunks[0] + "\n\n" + TEXT


def test_chunks_of_different_origins_share_no_overlap() -> None:
    footer = "Harbour Office annual report 2024"
    pages = [f"Revenue grew by four percent. {footer}", f"{footer} Costs fell in every quarter."]
    # One origin: the footer is taken for a window overlap.
    assert (
        stitch(pages, [(1, None), (1, None)]) == f"Revenue grew by four percent. {footer} Costs fell in every quarter."
    )
    # Two pages: both copies stay.
    assert stitch(pages, [(1, None), (2, None)]) == "\n\n".join(pages)
    # Windows of one section still lose their overlap; a new section starts afresh.
    chunks = windows(TEXT, 14, 6)
    origins = [chunk_origin({"page": 3, "headers": ["Staff handbook"]})] * len(chunks)
    assert stitch([*chunks, *chunks], [*origins, *[(3, ("Other",))] * len(chunks)]) == TEXT + "\n\n" + TEXT


def test_chunk_origin_is_the_page_and_heading_path() -> None:
    assert chunk_origin({"page": 2, "headers": ["A", "B"], "split_id": 5}) == (2, ("A", "B"))
    assert chunk_origin({}) == (None, None)
    assert chunk_origin({"page": {"odd": 1}, "headers": "not a list"}) == (None, None)


def test_origins_must_match_the_chunks() -> None:
    with pytest.raises(ValueError, match="2 origins for 1 chunks"):
        stitch(["one"], [1, 2])


def test_overlap_is_what_a_search_of_every_suffix_finds() -> None:
    def every_suffix(previous: str, following: str) -> int:
        longest = min(len(previous), len(following)) - 1
        return next((size for size in range(longest, 0, -1) if previous.endswith(following[:size])), 0)

    generator = random.Random(7)
    for _ in range(5000):
        alphabet = generator.choice(["a", "ab", "abc", "abcdefgh"])
        previous = "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 14)))
        following = "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 14)))
        assert overlap_length(previous, following) == every_suffix(previous, following), (previous, following)
        at_least = generator.randint(1, 6)
        expected = every_suffix(previous, following)
        assert overlap_length(previous, following, at_least=at_least) == (expected if expected >= at_least else 0)
