"""The official OpenAI Python client against the app on a real uvicorn server (and a scripted upstream)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore
from retrieval_agent.main import create_app

from ..conftest import API_KEY  # noqa: TID252
from ..scripted_llm import Script, ScriptedLLM, Status, text  # noqa: TID252
from .chat_support import QUESTION, chat_settings  # noqa: TID252

Client = Callable[[Script], tuple[openai.OpenAI, ScriptedLLM]]


@pytest.fixture
def client_for(serve: Callable[[Any], str], embedder: ContractEmbedder, seeded: ChunkStore) -> Client:
    def build(script: Script) -> tuple[openai.OpenAI, ScriptedLLM]:
        llm = ScriptedLLM(script)
        upstream = serve(llm.app())
        app = create_app(chat_settings(f"{upstream}/v1"), embedder=embedder, store=seeded)
        url = serve(app)
        return openai.OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0, timeout=30), llm

    return build


def test_completion_with_sources_from_extra_body(client_for: Client) -> None:
    client, llm = client_for(lambda body: text("In 1889 [1]."))
    completion = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"collection_names": ["kb-a"]},
    )
    assert completion.choices[0].message.content == "In 1889 [1]."
    assert completion.model == "scripted"
    sources = (completion.model_extra or {})["rag_sources"]
    assert sources[0]["index"] == 1
    assert sources[0]["file_name"] == "paris.pdf"
    assert completion.to_dict()["rag_sources"] == sources
    assert "[1] paris.pdf" in llm.requests[0]["messages"][0]["content"]


def test_stream_with_model_suffix(client_for: Client) -> None:
    client, _ = client_for(lambda body: text("Painted every seven years [1]."))
    stream = client.chat.completions.create(
        model="scripted@kb-b", messages=[{"role": "user", "content": "How often is the tower painted?"}], stream=True
    )
    pieces: list[str] = []
    sources: list[Any] = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        sources.extend((chunk.model_extra or {}).get("rag_sources") or [])
    assert "".join(pieces) == "Painted every seven years [1]."
    assert sources
    assert {source["collection_name"] for source in sources} == {"kb-b"}


def test_errors_raise_the_sdk_exceptions(client_for: Client) -> None:
    client, _ = client_for(lambda body: Status(429, '{"error": {"message": "quota exceeded"}}'))
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="scripted@kb-a", messages=[{"role": "user", "content": QUESTION}])
    assert "quota exceeded" in caught.value.message
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "upstream_error"
    wrong_key = openai.OpenAI(base_url=str(client.base_url), api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong_key.chat.completions.create(model="scripted", messages=[{"role": "user", "content": QUESTION}])
    with pytest.raises(openai.BadRequestError) as invalid:
        client.chat.completions.create(model="scripted@not a kb", messages=[{"role": "user", "content": QUESTION}])
    assert "knowledge base" in invalid.value.message
