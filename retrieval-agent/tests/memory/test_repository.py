"""The memory folder: one Markdown file per fact, every change a commit authored by "memory"."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from retrieval_agent.adapters.git import find_git
from retrieval_agent.errors import FactNotFoundError, InvalidMemoryRequestError, MemoryStorageError
from retrieval_agent.memory.limits import MAX_FACT_FILE_BYTES
from retrieval_agent.memory.repository import FactRepository

from .faulty_git import FaultyGit  # noqa: TID252

pytestmark = pytest.mark.anyio


@pytest.fixture
def repository(tmp_path: Path) -> FactRepository:
    return FactRepository(tmp_path / "memory", find_git())


@pytest.fixture
def faulty_git(tmp_path: Path) -> FaultyGit:
    return FaultyGit(tmp_path / "faulty-git")


@pytest.fixture
def faulty(tmp_path: Path, faulty_git: FaultyGit) -> FactRepository:
    return FactRepository(tmp_path / "memory", str(faulty_git.path))


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


def folder_state(folder: Path) -> tuple[str, list[str]]:
    """HEAD and every path in the folder but .git (temporary files included)."""
    paths = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if ".git" not in path.parts)
    return git(folder, "rev-parse", "HEAD").strip(), paths


# -- a full disk -----------------------------------------------------------------------------------


async def test_an_add_whose_commit_fails_on_a_full_disk_leaves_no_trace(
    faulty: FactRepository, faulty_git: FaultyGit
) -> None:
    await faulty.add("alice", "The user uses pip.", language="en", reason="stated")
    folder = faulty.folder("alice")
    before = folder_state(folder)
    faulty_git.disk_full()
    with pytest.raises(MemoryStorageError, match="unable to write"):
        await faulty.add("alice", "The user drinks tea.", language="en", reason="stated")
    faulty_git.disk_full(False)
    assert folder_state(folder) == before
    assert [fact.text for fact in (await faulty.facts("alice")).facts] == ["The user uses pip."]
    assert await faulty.commit_hand_edits("alice") == []
    # The retry stores it once.
    await faulty.add("alice", "The user drinks tea.", language="en", reason="stated")
    texts = sorted(fact.text for fact in (await faulty.facts("alice")).facts)
    assert texts == ["The user drinks tea.", "The user uses pip."]
    assert git(folder, "log", "--format=%s").splitlines()[:2] == [
        "ADD: The user drinks tea.",
        "ADD: The user uses pip.",
    ]


async def test_an_update_whose_commit_fails_keeps_the_previous_file(
    faulty: FactRepository, faulty_git: FaultyGit
) -> None:
    fact = await faulty.add("alice", "The user uses pip.", language="en", reason="stated")
    folder = faulty.folder("alice")
    before = folder_state(folder), (folder / fact.file_name).read_bytes()
    faulty_git.disk_full()
    with pytest.raises(MemoryStorageError):
        await faulty.update("alice", fact.id, "The user uses poetry.", language=None, reason="switched")
    faulty_git.disk_full(False)
    assert (folder_state(folder), (folder / fact.file_name).read_bytes()) == before
    assert (await faulty.get("alice", fact.id)).text == "The user uses pip."


async def test_a_delete_whose_commit_fails_leaves_the_fact_in_place(
    faulty: FactRepository, faulty_git: FaultyGit
) -> None:
    fact = await faulty.add("alice", "The user uses pip.", language="en", reason="stated")
    folder = faulty.folder("alice")
    before = folder_state(folder)
    faulty_git.disk_full()
    with pytest.raises(MemoryStorageError):
        await faulty.delete("alice", fact.id, reason="wrong")
    faulty_git.disk_full(False)
    # deleted/ may stay, empty: git has no empty folders.
    assert folder_state(folder) == (before[0], sorted([*before[1], "deleted"]))
    assert [item.id for item in (await faulty.facts("alice")).facts] == [fact.id]


async def test_git_failing_after_it_committed_is_a_stored_change(faulty: FactRepository, faulty_git: FaultyGit) -> None:
    await faulty.add("alice", "The user uses pip.", language="en", reason="stated")
    faulty_git.fail_after_commit()
    fact = await faulty.add("alice", "The user drinks tea.", language="en", reason="stated")
    faulty_git.fail_after_commit(False)
    folder = faulty.folder("alice")
    assert git(folder, "log", "-1", "--format=%s") == "ADD: The user drinks tea.\n"
    assert git(folder, "status", "--porcelain") == ""
    assert (await faulty.get("alice", fact.id)).text == "The user drinks tea."


# -- links -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["secret", "/etc/passwd"])
async def test_a_linked_fact_file_is_never_read(repository: FactRepository, tmp_path: Path, target: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("The launch code is 0000.\n")
    await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    folder = repository.folder("alice")
    (folder / "leak.md").symlink_to(secret if target == "secret" else Path(target))
    listing = await repository.facts("alice")
    assert [fact.text for fact in listing.facts] == ["The user uses pip."]
    (refused,) = listing.unreadable
    assert (refused.file_name, refused.refused) == ("leak.md", "link")
    assert "launch code" not in refused.problem
    assert "root:" not in refused.problem
    with pytest.raises(MemoryStorageError, match="symbolic link"):
        await repository.get("alice", "leak")
    # Neither changed nor moved through the link.
    with pytest.raises(MemoryStorageError):
        await repository.update("alice", "leak", "The user uses poetry.", language=None, reason="x")
    with pytest.raises(MemoryStorageError):
        await repository.delete("alice", "leak", reason="x")
    assert not (folder / "deleted").exists()
    assert secret.read_text() == "The launch code is 0000.\n"


async def test_a_linked_user_folder_is_never_read_or_written(repository: FactRepository, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "note.md").write_text("The launch code is 0000.\n")
    repository.root.mkdir()
    (repository.root / "alice").symlink_to(outside, target_is_directory=True)
    for reading in (repository.facts("alice"), repository.get("alice", "note"), repository.log("alice", limit=5)):
        with pytest.raises(MemoryStorageError, match="symbolic link"):
            await reading
    with pytest.raises(MemoryStorageError, match="symbolic link"):
        await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    assert sorted(path.name for path in outside.iterdir()) == ["note.md"]
    # Wiping removes the link, never what it points to.
    assert await repository.wipe("alice") is True
    assert not (repository.root / "alice").is_symlink()
    assert (outside / "note.md").exists()


async def test_a_linked_deleted_folder_is_not_written(repository: FactRepository, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    fact = await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    (repository.folder("alice") / "deleted").symlink_to(outside, target_is_directory=True)
    with pytest.raises(MemoryStorageError, match="symbolic link"):
        await repository.delete("alice", fact.id, reason="wrong")
    assert list(outside.iterdir()) == []
    assert (await repository.get("alice", fact.id)).text == "The user uses pip."


# -- long hand-written files -----------------------------------------------------------------------


async def test_a_long_hand_written_fact_is_read_only_up_to_the_limit(repository: FactRepository) -> None:
    await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    path = repository.folder("alice") / "long.md"
    path.write_text("The user wrote a lot. " * 600_000)  # 13 MB
    size = path.stat().st_size
    (fact,) = [item for item in (await repository.facts("alice")).facts if item.id == "long"]
    assert fact.truncated is True
    assert fact.text.startswith("The user wrote a lot.")
    assert len(fact.text.encode()) <= MAX_FACT_FILE_BYTES
    assert path.stat().st_size == size


async def test_deleting_a_long_fact_moves_all_of_it(repository: FactRepository) -> None:
    await repository.add("alice", "The user uses pip.", language="en", reason="stated")
    body = "The user wrote a lot. " * 10_000
    (repository.folder("alice") / "long.md").write_text(body)
    await repository.delete("alice", "long", reason="too long")
    moved = (repository.folder("alice") / "deleted" / "long.md").read_text()
    assert moved.endswith(body.strip() + "\n")
