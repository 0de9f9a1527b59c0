"""A failed pipeline warm-up is retried by the readiness probe and by ingests, without a restart."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.testclient import TestClient

from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.dense import TeiDenseEmbedder

from ...scripted_servers import LoopbackServer, RecordedRequest  # noqa: TID252

if TYPE_CHECKING:
    from ...conftest import AppFactory, MakeSettings, Upload  # noqa: TID252


class ScriptedTei(LoopbackServer):
    """TEI's ``POST /embed``: 503 (model still loading) until ``up`` is set, then unit vectors of ``dim``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.up = threading.Event()

    def answer(self, request: RecordedRequest) -> tuple[int, str, bytes, float]:
        if not self.up.is_set():
            return 503, "application/json", b'{"error": "Model is loading"}', 0.0
        vector = [1.0] + [0.0] * (self.dim - 1)
        body = json.dumps([vector for _ in request.json()["inputs"]]).encode()
        return 200, "application/json", body, 0.0


def tei_hooks(settings: Settings, tei: ScriptedTei) -> ServiceHooks:
    """The service's embedder on the scripted TEI endpoint (no retries: each probe asks once)."""
    dense = TeiDenseEmbedder(
        settings.embedding_model,
        base_url=tei.url,
        api_key=None,
        timeout=5,
        max_retries=0,
        batch_size=8,
        max_tokens=512,
    )
    return ServiceHooks(embedder=ContractEmbedder(settings, dense_backend=dense))


def _wait_for_failed_warm_up(client: TestClient) -> None:
    """Until the background warm-up has recorded its failure (it runs once, in the lifespan)."""
    assert isinstance(client.app, FastAPI)
    readiness = client.app.state.runtime.readiness
    for _ in range(3000):
        if readiness.pipeline_error is not None:
            return
        threading.Event().wait(0.01)
    raise AssertionError("the warm-up never failed")


def test_failed_warm_up_is_retried_until_the_endpoint_answers(
    app_client: AppFactory, make_test_settings: MakeSettings, upload: Upload, docs: Path
) -> None:
    settings = make_test_settings(enable_sparse_embeddings=False)
    with ScriptedTei(settings.dense_dim) as tei:
        hooks = tei_hooks(settings, tei)
        with app_client(hooks=hooks, ready=False, enable_sparse_embeddings=False) as client:
            _wait_for_failed_warm_up(client)
            failed = client.get("/health/ready")
            assert failed.status_code == 503
            assert failed.json()["detail"]["pipeline"].startswith("pipeline warm-up failed:")
            refused = upload(client, docs / "md" / "docling__wiki.md")
            assert refused.status_code == 503
            assert refused.json()["code"] == "PIPELINE_FAILED"

            tei.up.set()
            ready = client.get("/health/ready")
            assert ready.status_code == 200, ready.text
            ingested = upload(client, docs / "md" / "docling__wiki.md")
            assert ingested.status_code == 200, ingested.text


def test_an_ingest_retries_a_failed_warm_up_itself(
    app_client: AppFactory, make_test_settings: MakeSettings, upload: Upload, docs: Path
) -> None:
    settings = make_test_settings(enable_sparse_embeddings=False)
    with ScriptedTei(settings.dense_dim) as tei:
        hooks = tei_hooks(settings, tei)
        with app_client(hooks=hooks, ready=False, enable_sparse_embeddings=False) as client:
            _wait_for_failed_warm_up(client)
            tei.up.set()
            # No probe in between: the ingest that finds the pipeline unready retries the warm-up.
            ingested = upload(client, docs / "md" / "docling__wiki.md")
            assert ingested.status_code == 200, ingested.text
            assert client.get("/health/ready").status_code == 200
