"""Reading fact files: only regular files inside the folder, at most MAX_FACT_FILE_BYTES of each."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retrieval_agent.memory.fact_files import LinkedFolderError, RefusedFileError, fact_names, open_folder, read_fact_at


def test_a_fifo_named_like_a_fact_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    with open_folder(tmp_path) as folder_fd:
        assert folder_fd is not None
        with pytest.raises(RefusedFileError) as refused:
            read_fact_at(folder_fd, "pipe.md")
    assert refused.value.reason == "not_a_file"


def test_a_link_is_refused_even_to_a_file_in_the_same_folder(tmp_path: Path) -> None:
    (tmp_path / "tea.md").write_text("The user drinks tea.\n")
    (tmp_path / "alias.md").symlink_to(tmp_path / "tea.md")
    with open_folder(tmp_path) as folder_fd:
        assert folder_fd is not None
        assert fact_names(folder_fd) == ["alias.md", "tea.md"]
        assert read_fact_at(folder_fd, "tea.md").text == "The user drinks tea."
        with pytest.raises(RefusedFileError) as refused:
            read_fact_at(folder_fd, "alias.md")
    assert refused.value.reason == "link"


def test_a_linked_folder_is_refused_and_a_missing_one_is_none(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    with pytest.raises(LinkedFolderError), open_folder(tmp_path / "alias"):
        pass
    with open_folder(tmp_path / "missing") as folder_fd:
        assert folder_fd is None


def test_a_read_cut_inside_a_character_drops_that_character(tmp_path: Path) -> None:
    (tmp_path / "long.md").write_bytes("Æ".encode() * 10)  # two bytes each
    with open_folder(tmp_path) as folder_fd:
        assert folder_fd is not None
        fact = read_fact_at(folder_fd, "long.md", max_bytes=7)
        whole = read_fact_at(folder_fd, "long.md", max_bytes=None)
    assert (fact.text, fact.truncated) == ("ÆÆÆ", True)
    assert (whole.text, whole.truncated) == ("Æ" * 10, False)
