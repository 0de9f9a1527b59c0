"""Long-term memory black-box: a real `rag dev` with ENABLE_MEMORY=true and a scripted chat model on
loopback, driven through the official OpenAI client, the memory API, the files, git and `rag memory`.

The conversation states a preference, changes it, then asks about it; a hand edit in the folder is
picked up by the next turn; wiping one user leaves another untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from integration_support import Stack, running_rag_dev
from scripted_llm_server import MEMORY_FACTS, ScriptedLLMServer

PIP = MEMORY_FACTS["i use pip"]
POETRY = MEMORY_FACTS["switched to poetry"]
TEA = MEMORY_FACTS["green tea"]


@dataclass
class MemoryStack:
    client: openai.OpenAI
    retrieval: httpx.Client
    root: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def memory(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryStack]:
    if os.environ.get("INGESTION_BASE_URL"):
        pytest.skip("starts its own `rag dev` with memory on and a scripted chat model on loopback")
    workdir = tmp_path_factory.mktemp("memory")
    root = workdir / "memory"
    with ScriptedLLMServer() as llm:
        env = {
            "CHAT_UPSTREAM_BASE_URL": llm.url,
            "CHAT_DEFAULT_MODEL": "scripted",
            "ENABLE_MEMORY": "true",
            "MEMORY_PATH": str(root),
        }
        with running_rag_dev(workdir, stack.s3, env) as running:
            client = openai.OpenAI(
                base_url=f"{running.retrieval_url}/v1", api_key=running.retrieval_key, max_retries=0, timeout=60
            )
            cli_env = {
                **os.environ,
                "RAG_RETRIEVAL_URL": running.retrieval_url,
                "RETRIEVAL_API_KEY": running.retrieval_key,
            }
            yield MemoryStack(client, running.retrieval(), root, cli_env)
            client.close()


def say(memory: MemoryStack, user: str, content: str) -> Any:
    return memory.client.chat.completions.create(
        model="scripted", user=user, messages=[{"role": "user", "content": content}]
    )


def facts(memory: MemoryStack, user: str) -> list[dict[str, Any]]:
    response = memory.retrieval.get(f"/api/v1/memory/{user}/facts")
    assert response.status_code == 200, response.text
    listed: list[dict[str, Any]] = response.json()["facts"]
    return listed


def subjects(folder: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(folder), "log", "--format=%an %s"], check=True, capture_output=True, text=True
    )
    return out.stdout.splitlines()


def test_a_changed_preference_is_reconciled_and_recalled(memory: MemoryStack) -> None:
    say(memory, "dana", "I use pip for my Python packaging.")
    assert [fact["text"] for fact in facts(memory, "dana")] == [PIP]
    say(memory, "dana", "Actually, I switched to poetry.")
    (fact,) = facts(memory, "dana")
    assert fact["text"] == POETRY

    answer = say(memory, "dana", "Which tool do I use for Python packaging?")
    assert answer.choices[0].message.content == f"I remember: {POETRY}."
    sources = (answer.model_extra or {})["memory_sources"]
    assert [(source["id"], source["text"]) for source in sources] == [(fact["id"], POETRY)]

    folder = memory.root / "dana"
    assert (folder / f"{fact['id']}.md").read_text(encoding="utf-8").endswith(f"\n{POETRY}\n")
    assert subjects(folder) == [f"memory UPDATE: {POETRY}", f"memory ADD: {PIP}", "memory INIT: the memory of dana"]


def test_a_hand_edit_is_committed_and_recalled_on_the_next_turn(memory: MemoryStack) -> None:
    say(memory, "erik", "I drink green tea in the morning.")
    (fact,) = facts(memory, "erik")
    path = memory.root / "erik" / f"{fact['id']}.md"
    path.write_text(path.read_text(encoding="utf-8").replace("green tea", "rooibos tea"), encoding="utf-8")
    answer = say(memory, "erik", "What tea do I drink?")
    sources = (answer.model_extra or {})["memory_sources"]
    assert [source["text"] for source in sources] == ["The user drinks rooibos tea."]
    assert subjects(memory.root / "erik")[0] == f"memory EDIT: {path.name}"


def test_rag_memory_shows_the_history_and_wipe_forgets_only_that_user(memory: MemoryStack) -> None:
    say(memory, "fred", "I use pip for packaging.")
    say(memory, "gina", "I use pip for packaging.")
    assert len(facts(memory, "fred")) == len(facts(memory, "gina")) == 1
    log = subprocess.run(
        [sys.executable, "-m", "rag_cli", "memory", "log", "fred"],
        env=memory.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert log.returncode == 0, log.stderr
    assert f"ADD: {PIP}" in log.stdout
    wiped = memory.retrieval.delete("/api/v1/memory/fred")
    assert wiped.json() == {"user": "fred", "wiped": True}
    assert facts(memory, "fred") == []
    assert not (memory.root / "fred").exists()
    assert [fact["text"] for fact in facts(memory, "gina")] == [PIP]
    answer = say(memory, "fred", "Which tool do I use for Python packaging?")
    assert (answer.model_extra or {})["memory_sources"] == []


def test_links_are_never_served_and_a_long_hand_written_fact_is_cut_in_the_prompt(
    memory: MemoryStack, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("The user's Python packaging password is hunter2.\n", encoding="utf-8")
    say(memory, "hana", "I use pip for my Python packaging.")
    assert [fact["text"] for fact in facts(memory, "hana")] == [PIP]  # waits for the reconciliation
    folder = memory.root / "hana"
    (folder / "secret.md").symlink_to(secret)
    (folder / "passwd.md").symlink_to("/etc/passwd")
    notes = folder / "notes.md"
    notes.write_text("The user uses pip for Python packaging, every day. " * 240_000, encoding="utf-8")  # 12 MB
    size = notes.stat().st_size

    answer = say(memory, "hana", "Which tool do I use for Python packaging?")
    sources = {source["id"]: source["text"] for source in (answer.model_extra or {})["memory_sources"]}
    (pip,) = [fact["id"] for fact in facts(memory, "hana") if fact["text"] == PIP]
    assert sorted(sources) == sorted([pip, "notes"])
    # MEMORY_MAX_FACT_CHARS_IN_PROMPT's default.
    assert len(sources["notes"]) <= 4000
    assert sources["notes"].endswith("every day. […]")
    # The scripted model answers with the memory message's facts: what the prompt carried.
    reply = answer.choices[0].message.content or ""
    assert sources["notes"] in reply
    assert len(reply) <= len("I remember: . | ") + len(PIP) + 4000
    assert "hunter2" not in reply
    assert "root:" not in reply

    listing = memory.retrieval.get("/api/v1/memory/hana/facts").json()
    assert sorted(item["file_name"] for item in listing["unreadable"]) == ["passwd.md", "secret.md"]
    assert "hunter2" not in json.dumps(listing)
    assert notes.stat().st_size == size
