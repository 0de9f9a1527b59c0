"""The memory folder: one Markdown file per fact, every change a commit authored by "memory"."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from retrieval_agent.adapters.git import find_git
from retrieval_agent.errors import FactNotFoundError, InvalidMemoryRequestError
from retrieval_agent.memory.repository import FactRepository

pytestmark = pytest.mark.anyio


@pytest.fixture
def repository(tmp_path: Path) -> FactRepository:
    return FactRepository(tmp_path / "memory", find_git())


def git(folder: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *arguments], check=True, capture_output=True, text=True).stdout


async def test_add_writes_the_file_and_commits_it_as_add_with_the_reason(repository: FactRepository) -> None:
    fact = await repository.add(
        "alice", "The user uses pip.", language="en", reason="stated by the user", conversation_id="c1"
    )
    folder = repository.folder("alice")
    assert (folder / f"{fact.id}.md").read_text().endswith("---\nThe user uses pip.\n")
    log = git(folder, "log", "--format=%an|%s|%b")
    assert log.splitlines()[0] == "memory|ADD: The user uses pip.|Why: stated by the user"
    assert git(folder, "status", "--porcelain") == ""


async def test_update_rewrites_the_file_keeping_id_and_creation_time(repository: FactRepository) -> None:
    fact = await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    updated = await repository.update("alice", fact.id, "The user uses poetry.", language=None, reason="switched")
    assert (updated.id, updated.created_at, updated.language) == (fact.id, fact.created_at, "en")
    assert updated.updated_at >= fact.updated_at
    assert (await repository.get("alice", fact.id)).text == "The user uses poetry."
    subjects = git(repository.folder("alice"), "log", "--format=%s").splitlines()
    assert subjects[:2] == ["UPDATE: The user uses poetry.", "ADD: The user uses pip."]


async def test_delete_moves_the_fact_to_deleted_with_its_reason_and_commits(repository: FactRepository) -> None:
    fact = await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    removed = await repository.delete("alice", fact.id, reason="contradicted: switched to poetry")
    folder = repository.folder("alice")
    assert not (folder / f"{fact.id}.md").exists()
    moved = (folder / "deleted" / f"{fact.id}.md").read_text()
    assert "deleted_reason: 'contradicted: switched to poetry'" in moved
    assert removed.deleted_at is not None
    assert (await repository.facts("alice")).facts == []
    subject, why, fact_line = git(folder, "log", "-1", "--format=%s%n%b").splitlines()[:3]
    assert (subject, why, fact_line) == (
        "DELETE: The user uses pip.",
        "Why: contradicted: switched to poetry",
        f"Fact: {fact.id}",
    )
    with pytest.raises(FactNotFoundError):
        await repository.get("alice", fact.id)


async def test_hand_edits_are_committed_as_edit_and_read_back(repository: FactRepository) -> None:
    fact = await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    path = repository.folder("alice") / f"{fact.id}.md"
    path.write_text(path.read_text().replace("pip", "conda"))
    (repository.folder("alice") / "tea.md").write_text("The user drinks tea.\n")
    changed = await repository.commit_hand_edits("alice")
    assert sorted(changed) == sorted([f"{fact.id}.md", "tea.md"])
    assert git(repository.folder("alice"), "log", "-1", "--format=%s").startswith("EDIT: ")
    texts = sorted(item.text for item in (await repository.facts("alice")).facts)
    assert texts == ["The user drinks tea.", "The user uses conda."]
    assert await repository.commit_hand_edits("alice") == []


async def test_a_broken_hand_edit_is_listed_as_unreadable_not_dropped_silently(repository: FactRepository) -> None:
    await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    (repository.folder("alice") / "broken.md").write_text("---\nid: [oops\n---\ntext\n")
    listing = await repository.facts("alice")
    assert [item.text for item in listing.facts] == ["The user uses pip."]
    assert [item.file_name for item in listing.unreadable] == ["broken.md"]


async def test_users_have_separate_folders_and_histories(repository: FactRepository) -> None:
    await repository.add("alice", "Alice likes tea.", language="en", reason="stated")
    await repository.add("bob", "Bob likes coffee.", language="en", reason="stated")
    assert [fact.text for fact in (await repository.facts("alice")).facts] == ["Alice likes tea."]
    assert "Bob" not in git(repository.folder("alice"), "log", "--format=%s")


async def test_history_of_one_fact_follows_it_into_deleted(repository: FactRepository) -> None:
    fact = await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    await repository.add("alice", "The user drinks tea.", language="en", reason="stated")
    await repository.delete("alice", fact.id, reason="wrong")
    commits = await repository.log("alice", limit=10, fact_id=fact.id)
    assert [commit.subject for commit in commits] == ["DELETE: The user uses pip.", "ADD: The user uses pip."]
    assert all(commit.author == "memory" for commit in commits)


async def test_wipe_removes_the_folder_and_its_history(repository: FactRepository) -> None:
    await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    assert await repository.wipe("alice") is True
    assert not repository.folder("alice").exists()
    assert await repository.wipe("alice") is False


@pytest.mark.parametrize("user", ["../escape", "alice@example.com", ""])
async def test_a_user_name_that_could_leave_memory_path_is_refused(repository: FactRepository, user: str) -> None:
    with pytest.raises(InvalidMemoryRequestError):
        await repository.add(user, "text", language=None, reason="x")


async def test_a_fact_id_that_could_leave_the_folder_is_refused(repository: FactRepository) -> None:
    with pytest.raises(InvalidMemoryRequestError):
        await repository.get("alice", "../../etc/passwd")
