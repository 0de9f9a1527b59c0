"""Bringing what Open WebUI sends within the search limits."""

from __future__ import annotations

from retrieval_agent.search.leniency import MAX_MESSAGES, MAX_QUERY_CHARS, adjust, message_text, shorten


def test_shorten_keeps_head_and_tail_within_the_limit() -> None:
    text = "START " + "filler " * 1000 + "the question at the end?"
    short = shorten(text, 200)
    assert len(short) <= 200
    assert short.startswith("START")
    assert short.endswith("the question at the end?")
    assert shorten("short", 200) == "short"


def test_message_text_takes_text_parts_only() -> None:
    parts = [{"type": "text", "text": "first"}, {"type": "image_url", "image_url": {"url": "x"}}, "second", {"x": 1}]
    assert message_text(parts) == "first\nsecond"
    assert message_text(None) == ""
    assert message_text("plain") == "plain"


def test_adjust_reports_every_change() -> None:
    messages = [("user", "hi")] * (MAX_MESSAGES + 5) + [("user", [{"type": "text", "text": "x" * 20_000}])]
    adjusted = adjust(["q"] * 12 + ["y" * (MAX_QUERY_CHARS + 1)], messages, 1000)
    assert adjusted.changes == [
        "queries-dropped",
        "messages-trimmed",
        "message-parts",
        "message-truncated",
        "k-clamped",
    ]
    assert adjusted.queries == ["q"] * 10
    assert adjusted.messages is not None
    assert len(adjusted.messages) == MAX_MESSAGES
    assert len(adjusted.messages[-1].content) <= 10_000
    assert adjusted.k == 100


def test_adjust_leaves_a_request_within_the_limits_alone() -> None:
    adjusted = adjust(["q"], [("user", "hello")], 5)
    assert adjusted.changes == []
    assert adjusted.queries == ["q"]
    assert adjusted.k == 5


def test_adjust_replaces_lone_surrogates_and_keeps_whole_characters() -> None:
    messages = [("user", [{"type": "text", "text": "cut \udc00"}]), ("assistant", "fine 😀")]
    adjusted = adjust(["cut \ud83d", "whole 😀"], messages, 5)
    assert adjusted.changes == ["unicode-replaced", "message-parts"]
    assert adjusted.queries == ["cut \ufffd", "whole 😀"]
    assert adjusted.messages is not None
    assert [message.content for message in adjusted.messages] == ["cut \ufffd", "fine 😀"]
    assert adjust(["whole 😀"], [("user", "whole 😀")], 5).changes == []
