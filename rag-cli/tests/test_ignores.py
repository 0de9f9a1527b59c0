"""What ``rag sync`` and ``rag ingest`` leave out of a folder (defaults, .gitignore / .ragignore,
--include / --exclude), and a folder full of development litter synced into a real ingestion service
on an embedded store: exit 0, only the notes indexed, each under its path."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # the ingestion app below runs Haystack

import httpx
import pytest

from ingestion_service.main import create_app
from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from rag_cli.__main__ import main
from rag_cli.ignores import FolderFilter, IgnoreRules, UnreadableFolderError
from rag_runtime.embedding import ContractEmbedder
from shared_contract import load_settings

from .conftest import INGESTION_KEY, serving, store_parent  # noqa: TID252

NOTES = {
    "index.md": "# Index\n\nThe vault's entry page links the harbour notes and the ferry timetable.\n",
    "notes/2024/harbour.md": "# Harbour\n\nThe harbour project budget was approved in March by the council.\n",
    "notes/ferry.txt": "The ferry leaves the inner harbour every hour from six in the morning.\n",
}
LITTER = {
    "node_modules/left-pad/README.md": "# left-pad\n\nPads strings on the left.\n",
    "app/node_modules/x/index.md": "nested dependency notes",
    "__pycache__/mod.cpython-311.pyc": "compiled",
    "venv/lib/site.md": "a virtualenv's file",
    "env/bin/readme.txt": "another virtualenv",
    "build/out.md": "a build output",
    "dist/pkg.md": "a built package",
    "mypkg.egg-info/PKG-INFO": "Metadata-Version: 2.1\nName: mypkg\n",
    ".git/HEAD": "ref: refs/heads/main\n",
    ".obsidian/workspace.json": "{}",
    ".DS_Store": "\x00\x00\x00\x01Bud1",
    "notes/Thumbs.db": "\xd0\xcf\x11\xe0 thumbnail cache",
    "notes/desktop.ini": "[.ShellClassInfo]\n",
    "notes/~$meeting.docx": "an Office lock file",
    "notes/ferry.txt.swp": "a vim swap file",
    "notes/draft.md~": "an editor backup",
}


def _tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _kept(root: Path, rules: IgnoreRules | None = None) -> set[str]:
    return set(FolderFilter(root, rules).files())


def test_the_default_ignores_leave_out_development_folders_and_os_and_editor_litter(tmp_path: Path) -> None:
    _tree(tmp_path, {**NOTES, **LITTER})

    assert _kept(tmp_path) == set(NOTES)


def test_gitignore_and_ragignore_files_are_honoured_in_the_root_and_below(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            **NOTES,
            ".gitignore": "*.log\nprivate/\n",
            "notes/.ragignore": "secret-*.md\n",
            "notes/.gitignore": "!keep.log\n",
            "run.log": "root log",
            "notes/keep.log": "re-included below",
            "notes/secret-plan.md": "kept out by notes/.ragignore",
            "private/diary.md": "kept out by the root .gitignore",
            "other/secret-x.md": "notes/.ragignore does not reach here",
        },
    )

    assert _kept(tmp_path) == {*NOTES, "notes/keep.log", "other/secret-x.md"}


def test_an_ignore_file_can_take_a_default_back(tmp_path: Path) -> None:
    _tree(tmp_path, {**NOTES, "build/guide.md": "a folder named build that holds notes", ".ragignore": "!build/\n"})

    assert _kept(tmp_path) == {*NOTES, "build/guide.md"}


def test_include_keeps_only_matching_files_and_exclude_leaves_out_more(tmp_path: Path) -> None:
    _tree(tmp_path, {**NOTES, "drafts/idea.md": "a draft", "notes/scan.pdf": "%PDF-1.4"})

    assert _kept(tmp_path, IgnoreRules(include=("*.md",))) == {"index.md", "notes/2024/harbour.md", "drafts/idea.md"}
    assert _kept(tmp_path, IgnoreRules(exclude=("drafts/", "*.pdf"))) == set(NOTES)
    assert _kept(tmp_path, IgnoreRules(include=("*.md",), exclude=("drafts/",))) == {
        "index.md",
        "notes/2024/harbour.md",
    }


def test_a_file_in_an_ignored_folder_is_not_kept_even_when_named(tmp_path: Path) -> None:
    _tree(tmp_path, {**NOTES, **LITTER})
    rules = FolderFilter(tmp_path)

    assert rules.keeps("notes/ferry.txt")
    assert not rules.keeps("node_modules/left-pad/README.md")
    assert not rules.keeps("notes/Thumbs.db")


# --- against a real ingestion service ------------------------------------------------------------


@pytest.fixture(scope="module")
def store_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="rag-cli-ignores-", dir=store_parent()))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def ingestion(store_root: Path) -> Iterator[str]:
    """A real ingestion service on a loopback port, ready."""
    values: dict[str, Any] = {
        "api_key": INGESTION_KEY,
        "qdrant_uri": None,
        "qdrant_path": store_root / "qdrant",
        "qdrant_index": f"ignores_{uuid.uuid4().hex[:12]}",
        "scratch_dir": store_root / "scratch",
        "ingest_state_dir": store_root / "state",
        "originals_dir": store_root / "originals",
        "s3_endpoint_url": None,
    }
    settings = load_settings(Settings, **values)
    embedder = ContractEmbedder(settings)
    embedder.warm_up()
    with serving(create_app(settings, hooks=ServiceHooks(embedder=embedder))) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            for _ in range(600):
                if client.get("/health/ready").status_code == 200:
                    break
            else:
                pytest.fail("the ingestion service never became ready")
        yield url


def _documents(url: str, collection: str) -> dict[str, str | None]:
    response = httpx.get(
        f"{url}/api/v1/documents",
        params={"collection_name": collection, "limit": "1000"},
        headers={"Authorization": f"Bearer {INGESTION_KEY}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return {document["name"]: document["path"] for document in response.json()["documents"]}


def _connection(url: str) -> list[str]:
    return ["--url", url, "--api-key", INGESTION_KEY]


def test_a_folder_with_development_folders_syncs_without_them_and_exits_0(
    ingestion: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = tmp_path / "vault"
    _tree(vault, {**NOTES, **LITTER, ".gitignore": "scratch/\n", "scratch/todo.md": "ignored by .gitignore"})
    # Binary bytes under a name no default knows, which the service reads as no document: noted, not failed.
    (vault / "notes" / "cache").write_bytes(bytes(range(256)) * 16)
    collection = f"kb-{uuid.uuid4().hex[:8]}"

    code = main(["sync", str(vault), "--collection", collection, *_connection(ingestion)])

    output = capsys.readouterr().out
    assert code == 0, output
    assert "3 added, 0 changed, 0 unchanged, 0 removed, 0 failed" in output
    assert "skipped notes/cache: not a document" in output
    assert _documents(ingestion, collection) == {
        "index.md": "index.md",
        "harbour.md": "notes/2024/harbour.md",
        "ferry.txt": "notes/ferry.txt",
    }


def test_sync_include_and_exclude_narrow_what_is_indexed(
    ingestion: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = tmp_path / "vault"
    _tree(vault, {**NOTES, "drafts/idea.md": "# Idea\n\nA ferry that runs on wind power, drafted in May.\n"})
    collection = f"kb-{uuid.uuid4().hex[:8]}"

    code = main(
        [
            "sync",
            str(vault),
            "--collection",
            collection,
            "--include",
            "*.md",
            "--exclude",
            "drafts/",
            *_connection(ingestion),
        ]
    )

    assert code == 0, capsys.readouterr().out
    assert _documents(ingestion, collection) == {"index.md": "index.md", "harbour.md": "notes/2024/harbour.md"}


def test_ingest_of_a_folder_sends_each_files_path_relative_to_that_folder(
    ingestion: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = tmp_path / "vault"
    _tree(vault, {**NOTES, **LITTER})
    collection = f"kb-{uuid.uuid4().hex[:8]}"

    code = main(["ingest", str(vault / "notes"), "--collection", collection, *_connection(ingestion)])

    assert code == 0, capsys.readouterr().out
    assert _documents(ingestion, collection) == {"harbour.md": "2024/harbour.md", "ferry.txt": "ferry.txt"}


def test_an_ignore_file_that_cannot_be_read_stops_the_walk_and_names_it(tmp_path: Path) -> None:
    _tree(tmp_path, NOTES)
    # A link that loops: there, but unreadable (not a missing file, whose rules are simply none).
    (tmp_path / "notes" / ".gitignore").symlink_to(tmp_path / "notes" / ".gitignore")
    with pytest.raises(UnreadableFolderError, match=r"cannot read .*notes/\.gitignore"):
        list(FolderFilter(tmp_path).files())


def test_a_sync_that_cannot_read_an_ignore_file_removes_nothing(
    ingestion: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = tmp_path / "vault"
    _tree(vault, NOTES)
    collection = f"kb-{uuid.uuid4().hex[:8]}"
    assert main(["sync", str(vault), "--collection", collection, *_connection(ingestion)]) == 0
    synced = _documents(ingestion, collection)
    (vault / "notes" / ".gitignore").symlink_to(vault / "notes" / ".gitignore")
    capsys.readouterr()

    code = main(["sync", str(vault), "--collection", collection, *_connection(ingestion)])

    output = capsys.readouterr().out.replace("\n", "")  # the console wraps long paths
    assert code == 1, output
    assert "cannot read" in output
    assert "notes/.gitignore" in output
    assert _documents(ingestion, collection) == synced
