"""Prompt profiles of the vision engines."""

from __future__ import annotations

from typing import get_args

import pytest

from ingestion_service.documents.vision_profiles import PROFILES, prompt_for
from ingestion_service.settings import VisionProfile


def test_profiles_are_the_five_the_settings_accept() -> None:
    assert frozenset(get_args(VisionProfile)) == PROFILES
    assert PROFILES == {"diagram", "diagram-topology", "general", "figure", "ocr"}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_prompt_carries_the_language_hint_and_forbids_translation(profile: str) -> None:
    prompt = prompt_for(profile, "Danish")
    assert "The document is probably in Danish." in prompt
    assert "do not translate" in prompt
    assert "Norwegian" in prompt_for(profile, "Norwegian")


def test_empty_hint_keeps_the_rule_without_guessing_a_language() -> None:
    prompt = prompt_for("general", "  ")
    assert "do not translate" in prompt
    assert "probably in" not in prompt


def test_profiles_ask_for_their_own_output() -> None:
    assert "Markdown tables" in prompt_for("general", "Danish")
    assert "plain text" in prompt_for("ocr", "Danish")
    assert "Mermaid flowchart" in prompt_for("diagram", "Danish")
    topology = prompt_for("diagram-topology", "Danish")
    assert "Mermaid graph" in topology
    assert "verbatim" in topology
    figure = prompt_for("figure", "Danish")
    assert "Mermaid graph" in figure
    assert "short description" in figure
    assert len({prompt_for(profile, "Danish") for profile in PROFILES}) == len(PROFILES)


def test_unknown_profile_is_rejected() -> None:
    with pytest.raises(ValueError, match="Unknown vision profile 'poster'"):
        prompt_for("poster", "Danish")
