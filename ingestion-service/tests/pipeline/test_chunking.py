"""Token packing and Markdown sectioning with the real MiniLM tokenizer."""

from __future__ import annotations

import itertools

import pytest

from ingestion_service.pipeline.chunking import markdown_sections, merge_small_sections, pack_tokens
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.tokens import TokenCounter
from rag_runtime.embedding import ContractEmbedder


@pytest.fixture(scope="module")
def counter(embedder: ContractEmbedder) -> TokenCounter:
    assert embedder.tokenizer is not None
    return TokenCounter(embedder.tokenizer)


def test_pack_tokens_respects_budget_and_overlap(counter: TokenCounter) -> None:
    text = " ".join(f"word{i} alpha beta." for i in range(400))
    pieces = pack_tokens(text, counter, budget=50, overlap=10)
    assert len(pieces) > 5
    assert all(counter.count(piece) <= 50 for piece in pieces)
    # Consecutive pieces share text (the overlap), and together they cover the whole input.
    for first, second in itertools.pairwise(pieces):
        assert first.split()[-1] in second.split()[:15]
    assert pieces[0].startswith("word0")
    assert pieces[-1].endswith("word399 alpha beta.")


def test_pack_tokens_short_text_is_one_piece(counter: TokenCounter) -> None:
    assert pack_tokens("  hello world  ", counter, budget=50, overlap=10) == ["hello world"]
    assert pack_tokens("   ", counter, budget=50, overlap=10) == []


def test_markdown_sections_track_the_heading_path_and_ignore_fences() -> None:
    text = "intro\n# A\none\n## B\ntwo\n```\n# not a heading\n```\n# C\nthree"
    sections, stack = markdown_sections(text)
    assert [section.headers for section in sections] == [[], ["A"], ["A", "B"], ["C"]]
    assert "# not a heading" in sections[2].text
    # The path carries into the next page of the same document.
    more, _ = markdown_sections("continued", stack)
    assert more[0].headers == ["C"]


def test_a_longer_fence_is_closed_only_by_a_fence_as_long() -> None:
    # A code file quoting a Markdown fence: its "# comment" lines are code, not headings.
    text = "````python\ndoc = '''\n```\n'''\n# not a heading\n```js\n````\n# Real\nafter"
    sections, _ = markdown_sections(text)
    assert [section.headers for section in sections] == [[], ["Real"]]
    assert "# not a heading" in sections[0].text


def test_small_sections_merge_with_their_common_heading_path(counter: TokenCounter) -> None:
    sections, _ = markdown_sections("# A\n## B\ntiny\n## C\n" + "long text " * 40)
    merged = merge_small_sections(sections, counter, min_tokens=20, budget_for=lambda _: 200)
    assert len(merged) == 1
    assert merged[0].headers == ["A"]
    assert "tiny" in merged[0].text
    assert "long text" in merged[0].text


def test_budget_leaves_room_for_prefix_context_and_special_tokens(counter: TokenCounter) -> None:
    builder = EmbedTextBuilder(counter, max_tokens=256, chunk_size=400, prefix="passage: ", use_breadcrumb=True)
    context = builder.context("Annual report", ["Chapter one", "Section two"])
    assert context == ["Annual report", "Chapter one > Section two"]
    budget = builder.content_budget(context)
    assert budget < 256 - counter.count("passage: ") - counter.count("Annual report\nChapter one > Section two\n\n") - 2
    assert builder.text("body", context) == "Annual report\nChapter one > Section two\n\nbody"
    assert builder.content_budget(None) > budget


def test_context_says_a_title_once_and_stays_within_a_third_of_the_window(counter: TokenCounter) -> None:
    builder = EmbedTextBuilder(counter, max_tokens=256, chunk_size=400, prefix="", use_breadcrumb=True)
    assert builder.context("IBM", ["IBM", "History"]) == ["IBM", "History"]
    long_header = "| " + " | ".join(f"column number {i}" for i in range(40)) + " |"
    context = builder.context("Annual report", ["Chapter one"], [long_header])
    assert counter.count("\n".join(context) + "\n\n") <= 256 // 3
    # The table's header row is kept (clipped) before the heading path.
    assert context[0] == "Annual report"
    assert context[-1].startswith("| column number 0 |")
    without_title = EmbedTextBuilder(
        counter, max_tokens=256, chunk_size=400, prefix="", use_breadcrumb=True, use_title=False
    )
    assert without_title.context("Annual report", ["Chapter one"]) == ["Chapter one"]
