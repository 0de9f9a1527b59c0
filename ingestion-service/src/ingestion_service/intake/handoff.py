"""The hand-off to the pipeline: the runner once the service is ready (503 before), and a request's run,
which a client that disconnects aborts."""

from __future__ import annotations

import anyio
from starlette.types import Receive

from ingestion_service.errors import ClientDisconnectedError, IngestionError, NotReadyError
from ingestion_service.indexing.job import IngestJob, IngestOutcome
from ingestion_service.indexing.runner import IndexingRunner
from ingestion_service.run_control import RunControl
from ingestion_service.runtime import ServiceRuntime


async def ready_runner(runtime: ServiceRuntime) -> IndexingRunner:
    """The pipeline runner once models are warm and the collection is bootstrapped (503 before)."""
    if not runtime.readiness.collection_ready and not await runtime.ensure_collection():
        raise NotReadyError(runtime.readiness.collection_error or "collection not ready")
    if runtime.runner is None and not await runtime.ensure_pipeline():
        raise NotReadyError(runtime.readiness.pipeline_error or "pipeline warming up")
    assert runtime.runner is not None  # ensure_pipeline() is true only once the runner is built
    return runtime.runner


# How often a background job that started with the app asks again whether the service is ready.
READY_POLL_SECONDS = 1.0


async def wait_for_runner(runtime: ServiceRuntime) -> IndexingRunner:
    """The runner, waited for: a job resumed at start-up runs before the collection is bootstrapped
    and the models are warm."""
    while True:
        try:
            return await ready_runner(runtime)
        except NotReadyError:
            await anyio.sleep(READY_POLL_SECONDS)


async def require_qdrant(runtime: ServiceRuntime) -> None:
    """Delete and inspection need only the collection (503 before it is bootstrapped)."""
    if not runtime.readiness.collection_ready and not await runtime.ensure_collection():
        raise NotReadyError(runtime.readiness.collection_error or "collection not ready")


async def _abort_on_disconnect(receive: Receive, control: RunControl) -> None:
    # The body is fully read, so the next ASGI message is the disconnect (or never comes).
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            control.abort(ClientDisconnectedError("client disconnected during the ingest"))
            return


async def run_job(runtime: ServiceRuntime, runner: IndexingRunner, job: IngestJob, receive: Receive) -> IngestOutcome:
    """The pipeline in a worker thread, at most INGEST_CONCURRENCY at once per process.

    A client that disconnects aborts the run: it stops at its next checkpoint, its pending
    points are removed and the previous version stays.
    """
    control = runner.new_control()
    outcome: IngestOutcome | None = None
    error: IngestionError | None = None
    async with anyio.create_task_group() as watchers:
        watchers.start_soon(_abort_on_disconnect, receive, control)
        try:
            outcome = await runner.ingest(job, limiter=runtime.limiter, control=control)
        except IngestionError as exc:
            error = exc  # raised outside the task group, so it is not wrapped in an ExceptionGroup
        finally:
            watchers.cancel_scope.cancel()
    if error is not None:
        raise error
    assert outcome is not None
    return outcome
