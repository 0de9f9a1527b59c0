"""The word-quality measure behind the garbage-text-layer rule."""

from __future__ import annotations

from ingestion_service.documents.text_quality import word_quality


def test_clean_prose_scores_one() -> None:
    assert word_quality("The quick brown fox jumps over the lazy dog in 2003.") == 1.0


def test_noisy_ocr_layer_scores_lower_than_its_correction() -> None:
    noisy = "Servingretirees, spouses and SUNivors from the pUblicUniversfties; Teny M.Weidner (EIU) n, 61920 tmw3idner"
    clean = "Serving retirees, spouses and survivors from the public universities; Terry M. Weidner (EIU) IL 61920"
    assert word_quality(noisy) < word_quality(clean)


def test_non_latin_scripts_are_not_judged() -> None:
    assert word_quality("코로나바이러스감염 세계보건기구") == 1.0


def test_text_without_tokens_scores_one() -> None:
    assert word_quality("  ... --- ") == 1.0
