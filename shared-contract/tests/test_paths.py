"""The one rule for a document's relative path and its folders."""

from __future__ import annotations

import pytest

from shared_contract.paths import MAX_PATH_CHARS, path_folders, relative_path


@pytest.mark.parametrize(
    ("given", "normalised"),
    [
        ("notes/plan.md", "notes/plan.md"),
        ("notes\\2024\\plan.md", "notes/2024/plan.md"),
        ("./notes//2024/./plan.md", "notes/2024/plan.md"),
        ("notes/2024/", "notes/2024"),
        ("..notes/a..b.md", "..notes/a..b.md"),  # dots inside a name are no parent folder
    ],
)
def test_a_relative_path_is_normalised_to_slash_separated_segments(given: str, normalised: str) -> None:
    assert relative_path(given) == normalised


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("/etc/passwd", "must be relative"),
        ("\\\\server\\share\\a.md", "must be relative"),
        ("C:\\Users\\a.md", "must be relative"),
        ("c:a.md", "must be relative"),
        ("notes/../../secret.md", "must not contain '..'"),
        ("..", "must not contain '..'"),
        ("a\nb.md", "must not contain control characters"),
        ("", "must name a file or folder"),
        ("./", "must name a file or folder"),
        ("a/" * MAX_PATH_CHARS, f"at most {MAX_PATH_CHARS} characters"),
    ],
)
def test_a_path_that_is_not_relative_or_climbs_out_is_refused_without_quoting_it(given: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as refused:
        relative_path(given)
    assert given.strip("/.") == "" or given not in str(refused.value)


def test_the_folders_of_a_path_run_from_the_outermost_in() -> None:
    assert path_folders("notes/2024/q1/plan.md") == ["notes", "notes/2024", "notes/2024/q1"]
    assert path_folders("plan.md") == []
