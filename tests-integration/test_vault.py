"""A notes folder as people keep one, black-box: `rag sync` of a folder full of development litter
(exit 0, only the notes indexed), `/search` by folder, and `rag ask` against a real `rag dev` whose
chat model is scripted on loopback, printing the answer and its Sources with 1-based pages and paths."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration_support import FIXTURES, Stack, running_rag_dev
from scripted_llm_server import ScriptedLLMServer

CONTRACT_PDF = FIXTURES / "kreuzberg__sample_contract.pdf"
UPSTREAM_KEY = "scripted-vault-upstream-key-0123456789"
HARBOUR = "# Harbour\n\nThe harbour office signs the ferry contract every spring with the island council.\n"
LITTER = {
    "node_modules/left-pad/README.md": "# left-pad\n",
    "__pycache__/mod.cpython-311.pyc": "compiled",
    "venv/lib/site.md": "a virtualenv",
    "build/out.md": "build output",
    "dist/pkg.md": "a built package",
    "mypkg.egg-info/PKG-INFO": "Metadata-Version: 2.1\n",
    ".obsidian/workspace.json": "{}",
    "notes/Thumbs.db": "\xd0\xcf\x11\xe0 thumbnail cache",
    "private/diary.md": "# Diary\n\nKept out by .gitignore.\n",
    ".gitignore": "private/\n",
}
# Only a guard against a hung command; no assertion depends on how long it takes.
COMMAND_GUARD_S = 600


@pytest.fixture(scope="module")
def vault_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if os.environ.get("INGESTION_BASE_URL"):
        pytest.skip("starts its own `rag dev` with a scripted chat model on loopback")
    workdir = tmp_path_factory.mktemp("vault")
    with ScriptedLLMServer() as llm:
        env = {
            "CHAT_UPSTREAM_BASE_URL": llm.url,
            "CHAT_UPSTREAM_API_KEY": UPSTREAM_KEY,
            "CHAT_DEFAULT_MODEL": "scripted",
        }
        with running_rag_dev(workdir, stack.s3, env) as running:
            yield running


def _rag(running: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "RAG_INGESTION_URL": running.ingestion_url,
        "INGESTION_API_KEY": running.ingestion_key,
        "RAG_RETRIEVAL_URL": running.retrieval_url,
        "RETRIEVAL_API_KEY": running.retrieval_key,
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "rag_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_GUARD_S,
        check=False,
    )


def test_a_vault_with_development_folders_syncs_without_them_and_rag_ask_cites_paths_and_pages(
    vault_stack: Stack, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    for relative, text in LITTER.items():
        (vault / relative).parent.mkdir(parents=True, exist_ok=True)
        (vault / relative).write_text(text, encoding="utf-8")
    (vault / "notes" / "2024").mkdir(parents=True)
    shutil.copy(CONTRACT_PDF, vault / "notes" / "2024" / "contract.pdf")
    (vault / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    tenant = f"kb-vault-{uuid.uuid4().hex[:8]}"

    synced = _rag(vault_stack, "sync", str(vault), "--collection", tenant)

    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "2 added, 0 changed, 0 unchanged, 0 removed, 0 failed" in synced.stdout
    search = vault_stack.retrieval().post(
        "/search",
        json={"queries": ["contract"], "collection_names": [tenant], "k": 10, "filter": {"path_prefix": "notes"}},
    )
    assert search.status_code == 200, search.text
    assert {meta["path"] for meta in search.json()["metadatas"][0]} == {"notes/2024/contract.pdf"}

    asked = _rag(vault_stack, "ask", "What does the contract say?", "--collection", tenant)

    assert asked.returncode == 0, asked.stdout + asked.stderr
    answer, _, sources = asked.stdout.partition("Sources:")
    assert answer.strip().startswith("According to")
    lines = [line.strip() for line in sources.strip().splitlines()]
    assert any(
        re.fullmatch(r"\[\d+\] contract\.pdf \(pages? [1-9][\d, ]*, notes/2024/contract\.pdf\)", line) for line in lines
    ), lines
    assert all(re.fullmatch(r"\[\d+\] (contract\.pdf|harbour\.md) \(.*\)", line) for line in lines), lines
