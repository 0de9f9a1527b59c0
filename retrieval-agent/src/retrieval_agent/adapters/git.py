"""The git binary, for the memory folders: the only code that runs it.

Every commit is authored and committed by "memory", with the user's global configuration left out
(no signing prompts, hooks or templates of whoever runs the service), so a commit never waits on a
terminal and its author always says who wrote it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

import anyio

from retrieval_agent.errors import MemoryStorageError
from shared_contract import ContractConfigError

AUTHOR_NAME: Final = "memory"
AUTHOR_EMAIL: Final = "memory@localhost"
_RECORD: Final = "\x1e"
_FIELD: Final = "\x1f"
_MAX_ERROR_CHARS: Final = 500


def find_git() -> str:
    """The git executable; ContractConfigError naming ENABLE_MEMORY when there is none."""
    found = shutil.which("git")
    if found is None:
        raise ContractConfigError("ENABLE_MEMORY", "needs the git binary on PATH (apt-get install git)")
    return found


@dataclass(frozen=True, slots=True)
class Commit:
    """One commit of a memory folder's history."""

    sha: str
    committed_at: datetime
    author: str
    subject: str
    body: str
    files: list[str] = field(default_factory=lambda: list[str]())


class GitRepository:
    """One folder under version control. Commands run as child processes, off the event loop."""

    def __init__(self, path: Path, executable: str) -> None:
        self.path = path
        self._git = executable
        self._env: Mapping[str, str] = {
            **os.environ,
            "GIT_AUTHOR_NAME": AUTHOR_NAME,
            "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
            "GIT_COMMITTER_NAME": AUTHOR_NAME,
            "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
        }

    async def _run(self, *arguments: str, check: bool = True) -> tuple[int, str]:
        command = [self._git, "-C", str(self.path), "-c", "commit.gpgsign=false", "-c", "core.quotepath=off"]
        try:
            result = await anyio.run_process([*command, *arguments], env=dict(self._env), check=False)
        except OSError as exc:
            raise MemoryStorageError(f"git could not run: {exc}") from exc
        output = result.stdout.decode("utf-8", errors="replace")
        if check and result.returncode != 0:
            detail = result.stderr.decode("utf-8", errors="replace").strip()[:_MAX_ERROR_CHARS]
            raise MemoryStorageError(f"git {arguments[0]} failed ({result.returncode}): {detail}")
        return result.returncode, output

    async def ensure(self) -> None:
        """The folder, as a repository (created on first use)."""
        try:
            await anyio.Path(self.path).mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file in the way, no permission
            raise MemoryStorageError(f"the memory folder {self.path} could not be created: {exc}") from exc
        if not await anyio.Path(self.path / ".git").exists():
            await self._run("init", "--quiet", "--initial-branch=main")

    async def head(self) -> str | None:
        """The commit HEAD names; None before the first commit."""
        code, output = await self._run("rev-parse", "--verify", "--quiet", "HEAD", check=False)
        return output.strip() if code == 0 and output.strip() else None

    async def changed_paths(self) -> list[str]:
        """Paths that differ from the last commit (edited, added or removed by hand), relative to the folder."""
        _, output = await self._run("status", "--porcelain=v1", "-z", "--untracked-files=all")
        paths: list[str] = []
        entries = iter(output.split("\0"))
        for entry in entries:
            if len(entry) < 4:
                continue
            paths.append(entry[3:])
            if entry[0] in "RC":
                next(entries, None)  # a rename's second path is its source
        return paths

    async def commit_all(self, message: str) -> str | None:
        """Stage every change in the folder and commit it; the new commit's sha, None when nothing changed."""
        await self._run("add", "--all", "--", ".")
        staged, _ = await self._run("diff", "--cached", "--quiet", check=False)
        if staged == 0:
            return None
        await self._run("commit", "--quiet", "--no-verify", "--message", message)
        _, sha = await self._run("rev-parse", "HEAD")
        return sha.strip()

    async def log(self, *, limit: int, paths: Sequence[str] = ()) -> list[Commit]:
        """The newest ``limit`` commits (touching ``paths`` when given), newest first."""
        if not await anyio.Path(self.path / ".git").exists():
            return []
        if await self.head() is None:
            return []
        pretty = f"--format={_RECORD}%H{_FIELD}%cI{_FIELD}%an{_FIELD}%s{_FIELD}%b{_FIELD}"
        _, output = await self._run("log", f"--max-count={limit}", "--name-only", pretty, "--", *paths)
        commits: list[Commit] = []
        for record in output.split(_RECORD)[1:]:
            sha, committed, author, subject, body, files = record.split(_FIELD, 5)
            commits.append(
                Commit(
                    sha=sha,
                    committed_at=datetime.fromisoformat(committed),
                    author=author,
                    subject=subject,
                    body=body.strip(),
                    files=[line for line in files.splitlines() if line.strip()],
                )
            )
        return commits
