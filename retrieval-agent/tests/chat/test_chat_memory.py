"""Long-term memory through /v1/chat/completions: a scripted model on loopback answers the chat and the
reconciler's two calls; the facts, their Git history, the index and the injected context are checked
through the files, git and the HTTP answers."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag_runtime.store import ChunkStore

from ..conftest import AUTH  # noqa: TID252
from ..memory.memory_script import MemoryScript, memory_requests  # noqa: TID252
from ..scripted_llm import ScriptedLLM, text  # noqa: TID252
from .chat_support import chat_settings, chunks, sse_events, system_text  # noqa: TID252

PIP = "The user uses pip for Python packaging."
POETRY = "The user uses poetry for Python packaging."
TEA = "The user drinks green tea."
FACTS = {"i use pip": [PIP], "switched to poetry": [POETRY], "green tea": [TEA]}

MemoryChat = Callable[..., tuple[TestClient, ScriptedLLM, MemoryScript, Path]]


def _echo_memory(body: dict[str, Any]) -> dict[str, Any]:
    """The chat answer names what the memory message told the model (empty when it told nothing)."""
    memory = [line[2:] for line in system_text(body).splitlines() if line.startswith("- ")]
    return text("REMEMBERED: " + " | ".join(memory))


@pytest.fixture
def memory_chat(
    serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore, tmp_path: Path
) -> MemoryChat:
    def build(**overrides: Any) -> tuple[TestClient, ScriptedLLM, MemoryScript, Path]:
        script = MemoryScript(FACTS, topics=["packaging"], chat_reply=_echo_memory)
        llm = ScriptedLLM(script)
        root = tmp_path / "memory"
        settings = chat_settings(f"{serve(llm.app())}/v1", enable_memory=True, memory_path=root, **overrides)
        return app_factory(settings, seeded), llm, script, root

    return build


def say(client: TestClient, content: str, *, user: str = "alice", **extra: Any) -> dict[str, Any]:
    body = {"model": "scripted", "messages": [{"role": "user", "content": content}], "user": user, **extra}
    response = client.post("/v1/chat/completions", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def facts(client: TestClient, user: str = "alice") -> list[str]:
    response = client.get(f"/api/v1/memory/{user}/facts", headers=AUTH)
    assert response.status_code == 200, response.text
    return [fact["text"] for fact in response.json()["facts"]]


def git_log(folder: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(folder), "log", "--format=%an|%s"], check=True, capture_output=True, text=True
    )
    return out.stdout.splitlines()


def test_a_preference_changed_then_asked_about(memory_chat: MemoryChat) -> None:
    client, llm, script, root = memory_chat()
    first = say(client, "Hi! I use pip for all my Python packaging.")
    assert first["memory_sources"] == []
    assert facts(client) == [PIP]

    say(client, "Actually, I switched to poetry last month.")
    assert facts(client) == [POETRY]

    third = say(client, "Which tool do I use for Python packaging?")
    assert third["choices"][0]["message"]["content"] == f"REMEMBERED: {POETRY}"
    (source,) = third["memory_sources"]
    assert source["text"] == POETRY
    assert 0.0 < source["relevance"] <= 1.0
    assert facts(client) == [POETRY]  # waits for the third turn's reconciliation
    # The question states nothing lasting: extracted, nothing decided.
    assert script.extractions[-1] == "Which tool do I use for Python packaging?"
    assert len(script.decisions) == 2

    folder = root / "alice"
    (live,) = list(folder.glob("*.md"))
    assert live.read_text().endswith(f"\n{POETRY}\n")
    assert "role: memory" in live.read_text()
    assert git_log(folder) == [
        f"memory|UPDATE: {POETRY}",
        f"memory|ADD: {PIP}",
        "memory|INIT: the memory of alice",
    ]
    assert list((folder / "deleted").glob("*.md")) == []
    # The chat's own three requests carried no memory tools; the model answered six requests in all.
    assert len(memory_requests(llm.requests)) == 5


def test_the_injected_context_names_the_facts_in_a_system_message(memory_chat: MemoryChat) -> None:
    client, llm, _, _ = memory_chat()
    say(client, "I use pip, and I drink green tea every morning.")
    say(client, "What should I install packages with?")
    facts(client)  # the model's requests are all in once the reconciliation is done
    chat_requests = [body for body in llm.requests if body not in memory_requests(llm.requests)]
    system = system_text(chat_requests[-1])
    assert "What you remember about the user" in system
    assert f"- {PIP}" in system


def test_a_hand_edit_is_picked_up_on_the_next_turn(memory_chat: MemoryChat) -> None:
    client, _, _, root = memory_chat()
    say(client, "I use pip for packaging.")
    assert facts(client) == [PIP]  # the reconciliation runs after the answer: wait for it
    (path,) = list((root / "alice").glob("*.md"))
    path.write_text(path.read_text().replace("pip", "uv"))
    answer = say(client, "Which tool do I use for Python packaging?")
    assert [source["text"] for source in answer["memory_sources"]] == ["The user uses uv for Python packaging."]
    assert git_log(root / "alice")[0] == f"memory|EDIT: {path.name}"


def test_one_users_facts_never_reach_another_user(memory_chat: MemoryChat) -> None:
    client, _, _, root = memory_chat()
    say(client, "I use pip for packaging.", user="alice")
    answer = say(client, "Which tool do I use for Python packaging?", user="bob")
    assert answer["memory_sources"] == []
    assert answer["choices"][0]["message"]["content"] == "REMEMBERED: "
    assert facts(client, "bob") == []
    assert not (root / "bob").exists()


def test_the_user_can_come_from_the_header_and_no_user_means_no_memory(memory_chat: MemoryChat) -> None:
    client, llm, _, _ = memory_chat()
    body = {"model": "scripted", "messages": [{"role": "user", "content": "I use pip for packaging."}]}
    anonymous = client.post("/v1/chat/completions", json=body, headers=AUTH)
    assert anonymous.json()["memory_sources"] == []
    assert memory_requests(llm.requests) == []
    headers = {**AUTH, "X-OpenWebUI-User-Id": "carol", "X-OpenWebUI-Chat-Id": "chat-7"}
    assert client.post("/v1/chat/completions", json=body, headers=headers).status_code == 200
    (fact,) = client.get("/api/v1/memory/carol/facts", headers=AUTH).json()["facts"]
    assert (fact["text"], fact["conversation_id"]) == (PIP, "chat-7")


def test_a_user_name_that_breaks_the_rule_is_a_400(memory_chat: MemoryChat) -> None:
    client, _, _, _ = memory_chat()
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "user": "alice@example.com"}
    response = client.post("/v1/chat/completions", json=body, headers=AUTH)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "user"


def test_a_stream_carries_memory_sources_in_its_last_chunk(memory_chat: MemoryChat) -> None:
    client, _, _, _ = memory_chat()
    say(client, "I use pip for packaging.")
    body = {
        "model": "scripted",
        "stream": True,
        "user": "alice",
        "messages": [{"role": "user", "content": "Which tool do I use for Python packaging?"}],
    }
    response = client.post("/v1/chat/completions", json=body, headers=AUTH)
    parsed = chunks(sse_events(response.text))
    assert [source["text"] for source in parsed[-1]["memory_sources"]] == [PIP]
    assert parsed[-1]["rag_sources"] == []


def test_a_malformed_decision_changes_nothing(memory_chat: MemoryChat) -> None:
    client, _, script, root = memory_chat()
    say(client, "I use pip for packaging.")
    assert facts(client) == [PIP]
    # From now on the model names a fact it was never shown, twice: the decision is refused.
    script.decide = lambda shown, new: [{"action": "UPDATE", "fact": 99, "text": POETRY, "reason": "x"}]  # type: ignore[method-assign]
    say(client, "Actually, I switched to poetry.")
    assert facts(client) == [PIP]
    assert [line.split("|")[1].split(":")[0] for line in git_log(root / "alice")] == ["ADD", "INIT"]
    metrics = client.get("/metrics", headers=AUTH).text
    assert 'memory_reconciliations_total{outcome="malformed"} 1.0' in metrics


def test_memory_tenants_are_not_knowledge_bases(memory_chat: MemoryChat) -> None:
    client, _, _, _ = memory_chat()
    say(client, "I use pip for packaging.")
    refused = client.post(
        "/v1/chat/completions",
        json={"model": "scripted@memory-alice", "messages": [{"role": "user", "content": "hi"}]},
        headers=AUTH,
    )
    assert refused.status_code == 400
    assert "reserved for long-term memory" in refused.json()["error"]["message"]
    models = [card["id"] for card in client.get("/v1/models", headers=AUTH).json()["data"]]
    assert not [name for name in models if "memory-" in name]
    assert json.dumps(models)


def test_a_12_mb_hand_written_fact_puts_at_most_the_cap_into_the_prompt(memory_chat: MemoryChat) -> None:
    client, llm, _, root = memory_chat(memory_max_fact_chars_in_prompt=500)
    say(client, "I use pip for packaging.")
    assert facts(client) == [PIP]
    path = root / "alice" / "packaging-notes.md"
    path.write_text("The user uses pip for Python packaging, every day. " * 240_000)  # 12 MB
    size = path.stat().st_size
    answer = say(client, "Which tool do I use for Python packaging?")
    (long_source,) = [source for source in answer["memory_sources"] if source["id"] == "packaging-notes"]
    assert len(long_source["text"]) <= 500
    assert long_source["text"].endswith("every day. […]")
    chat_requests = [body for body in llm.requests if body not in memory_requests(llm.requests)]
    (line,) = [line for line in system_text(chat_requests[-1]).splitlines() if "every day" in line]
    assert line == f"- {long_source['text']}"
    assert path.stat().st_size == size


def test_a_linked_file_in_the_folder_never_reaches_the_model(memory_chat: MemoryChat, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("The user's Python packaging password is hunter2.\n")
    client, llm, _, root = memory_chat()
    say(client, "I use pip for packaging.")
    assert facts(client) == [PIP]
    (root / "alice" / "secret.md").symlink_to(secret)
    (root / "alice" / "passwd.md").symlink_to("/etc/passwd")
    answer = say(client, "Which tool do I use for Python packaging?")
    assert [source["text"] for source in answer["memory_sources"]] == [PIP]
    facts(client)  # the reconciliation's requests are in too
    sent = json.dumps(llm.requests)
    assert "hunter2" not in sent
    assert Path("/etc/passwd").read_text().splitlines()[0] not in sent
