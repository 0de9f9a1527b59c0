"""The fact file format: what the service writes, and what people's hand edits may look like."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from retrieval_agent.memory.facts import (
    CLIPPED_MARKER,
    Fact,
    FactFormatError,
    check_user,
    clip_for_prompt,
    is_fact_id,
    is_user,
    parse_fact,
)

MODIFIED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _fact() -> Fact:
    return Fact(
        id="550e8400-e29b-41d4-a716-446655440000",
        text="The user prefers uv for Python package management.",
        created_at=datetime(2026, 11, 1, 10, 0, tzinfo=UTC),
        updated_at=datetime(2026, 11, 2, 11, 30, tzinfo=UTC),
        conversation_id="chat-1",
        source_message_id="msg-9",
        language="en",
    )


def test_rendered_file_has_the_front_matter_the_issue_names_and_the_fact_as_body() -> None:
    text = _fact().render()
    assert text.startswith("---\nid: 550e8400-e29b-41d4-a716-446655440000\nrole: memory\n")
    assert "created_at: '2026-11-01T10:00:00Z'" in text
    assert "updated_at: '2026-11-02T11:30:00Z'" in text
    assert "conversation_id: chat-1\n" in text
    assert "source_message_id: msg-9\n" in text
    assert text.endswith("---\nThe user prefers uv for Python package management.\n")


def test_a_deleted_fact_is_written_byte_for_byte_in_the_files_layout() -> None:
    moment = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
    fact = Fact(
        id="f-1",
        text="Æblegrød on Fridays.",
        created_at=moment,
        updated_at=moment,
        language="da",
        deleted_at=moment,
        deleted_reason="asked to forget",
    )
    assert fact.render() == (
        "---\nid: f-1\nrole: memory\ncreated_at: '2026-11-01T10:00:00Z'\nupdated_at: '2026-11-01T10:00:00Z'\n"
        "conversation_id: null\nsource_message_id: null\nlanguage: da\ndeleted_at: '2026-11-01T10:00:00Z'\n"
        "deleted_reason: asked to forget\n---\nÆblegrød on Fridays.\n"
    )


def test_a_body_with_rule_lines_but_no_front_matter_is_all_fact() -> None:
    parsed = parse_fact(b"Tea, not coffee.\n---\nid: other\n---\nAt work too.\n", stem="tea", modified=MODIFIED)
    assert parsed.text == "Tea, not coffee.\n---\nid: other\n---\nAt work too."


def test_a_rendered_fact_parses_back_to_itself_with_the_hash_of_its_bytes() -> None:
    stored, data = _fact().rendered()
    parsed = parse_fact(data, stem=stored.id, modified=MODIFIED)
    assert parsed == stored
    assert len(parsed.content_hash) == 64


def test_a_hand_written_file_without_front_matter_is_all_fact_with_the_file_times() -> None:
    parsed = parse_fact(b"I like tea.\n", stem="tea", modified=MODIFIED)
    assert (parsed.id, parsed.text, parsed.created_at, parsed.updated_at) == ("tea", "I like tea.", MODIFIED, MODIFIED)
    assert parsed.language == "any"


def test_an_edited_body_keeps_the_front_matter_fields() -> None:
    stored, data = _fact().rendered()
    edited = data.replace(b"uv for Python", b"poetry for Python")
    parsed = parse_fact(edited, stem=stored.id, modified=MODIFIED)
    assert parsed.text == "The user prefers poetry for Python package management."
    assert parsed.created_at == stored.created_at
    assert parsed.content_hash != stored.content_hash


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"---\nid: [unclosed\n---\nfact\n", "not valid YAML"),
        (b"---\n- a list\n---\nfact\n", "not a mapping"),
        (b"---\nid: other-id\n---\nfact\n", "is not its file name"),
        (b"---\nid: x\n---\n   \n", "holds no fact"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_file_that_cannot_be_a_fact_is_refused_with_the_reason(data: bytes, problem: str) -> None:
    with pytest.raises(FactFormatError, match=problem):
        parse_fact(data, stem="x", modified=MODIFIED)


def test_user_names_follow_the_tenant_rule() -> None:
    assert is_user("0b4e7a40-3c1e-4f7e-9d2a-5b6c7d8e9f00")
    assert not is_user("alice@example.com")
    assert not is_user("../etc")
    assert not is_user("a" * 122)
    with pytest.raises(ValueError, match="ASCII letter"):
        check_user("")


def test_fact_ids_cannot_leave_the_folder() -> None:
    assert is_fact_id("550e8400-e29b-41d4-a716-446655440000")
    assert is_fact_id("tea")
    assert not is_fact_id("../secret")
    assert not is_fact_id(".hidden")


def test_a_fact_that_fits_goes_into_a_prompt_unchanged() -> None:
    assert clip_for_prompt("The user drinks tea.", 20) == "The user drinks tea."


def test_a_long_fact_is_cut_after_its_last_whole_sentence_that_fits() -> None:
    text = "The user drinks tea. Green, mostly. In the morning and after lunch, never late."
    assert clip_for_prompt(text, 45) == "The user drinks tea. Green, mostly." + CLIPPED_MARKER


def test_a_long_sentence_is_cut_at_a_space_and_never_past_the_cap() -> None:
    text = "word " * 100
    clipped = clip_for_prompt(text, 52)
    assert clipped == "word " * 8 + "word" + CLIPPED_MARKER
    assert len(clipped) <= 52


def test_a_text_without_spaces_is_cut_at_the_cap() -> None:
    assert clip_for_prompt("x" * 100, 20) == "x" * (20 - len(CLIPPED_MARKER)) + CLIPPED_MARKER
