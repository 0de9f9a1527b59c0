"""The async ingest job registry on its own: states, bounds, expiry, cancellation, shutdown, metrics, log line.

The work is a stand-in for the pipeline run; ordering is forced with events, expiry with an
injected clock, never with sleeps or measured latencies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from ingestion_service.errors import (
    IngestionError,
    JobCancelledError,
    JobNotFoundError,
    JobQueueFullError,
    ShuttingDownError,
)
from ingestion_service.jobs.ingest import FINAL_STATES, JobRegistry, JobSnapshot, JobWork
from ingestion_service.metrics import IngestMetrics
from ingestion_service.run_control import RunControl
from shared_contract import ContractConfigError

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

pytestmark = pytest.mark.anyio

# Only a guard against a deadlocked test; no assertion depends on how long anything takes.
GUARD_SECONDS = 30
RESULT = {"status": True, "collection_name": "file-f", "chunks_count": 3, "extraction": {"engine": "kreuzberg"}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def render(error: IngestionError) -> dict[str, Any]:
    return {"status": False, "error": error.detail(), "code": error.code, "request_id": "req-1"}


def registry(metrics: IngestMetrics | None = None, *, clock: Clock | None = None, **overrides: Any) -> JobRegistry:
    values: dict[str, Any] = {"max_jobs": 10, "ttl_seconds": 60.0, "timeout_seconds": 600.0}
    values.update(overrides)
    return JobRegistry(metrics=metrics or IngestMetrics(), clock=clock or Clock(), **values)


def submit(jobs: JobRegistry, work: JobWork, file_id: str = "f") -> JobSnapshot:
    return jobs.submit(
        file_id=file_id, collection_name=f"file-{file_id}", request_id="req-1", work=work, render_error=render
    )


async def done() -> dict[str, Any]:
    return RESULT


def succeeding() -> JobWork:
    async def work(control: RunControl) -> dict[str, Any]:
        return await done()

    return work


def held(release: anyio.Event, *, started: bool) -> JobWork:
    """Waits for ``release``; ``started``: as a running pipeline (stops when aborted), else queued for a slot."""

    async def work(control: RunControl) -> dict[str, Any]:
        if started:
            control.start()
        while not release.is_set():
            if control.aborted is not None:
                raise control.aborted
            await anyio.sleep(0.01)
        return RESULT

    return work


def stubborn(release: anyio.Event, returned: anyio.Event) -> JobWork:
    """A running pipeline stuck in one engine call: ignores aborts until ``release``."""

    async def work(control: RunControl) -> dict[str, Any]:
        control.start()
        await release.wait()
        # The job records its end in this same step, before the test that waits for this runs.
        returned.set()
        return RESULT

    return work


async def until(jobs: JobRegistry, job_id: str, check: Callable[[JobSnapshot], bool]) -> JobSnapshot:
    with anyio.fail_after(GUARD_SECONDS):
        while not check(snapshot := jobs.get(job_id)):
            await anyio.sleep(0.01)
    return snapshot


async def finished(jobs: JobRegistry, job_id: str) -> JobSnapshot:
    return await until(jobs, job_id, lambda job: job.state in FINAL_STATES)


async def test_a_job_goes_queued_running_succeeded() -> None:
    metrics = IngestMetrics()
    jobs = registry(metrics)
    release = anyio.Event()
    accepted = submit(jobs, held(release, started=True))
    assert accepted.state == "queued"
    assert accepted.result is None
    running = await until(jobs, accepted.job_id, lambda job: job.state == "running")
    assert running.started_at is not None
    assert 'ingest_jobs_active{state="running"} 1.0' in metrics.render().decode()
    release.set()
    job = await finished(jobs, accepted.job_id)
    assert job.state == "succeeded"
    assert job.result == RESULT
    assert job.error is None
    assert job.finished_at is not None
    assert job.started_at is not None
    assert job.created_at <= job.started_at <= job.finished_at
    text = metrics.render().decode()
    assert 'ingest_jobs_total{state="succeeded"} 1.0' in text
    assert 'ingest_jobs_active{state="queued"} 0.0' in text
    assert 'ingest_jobs_active{state="running"} 0.0' in text


async def test_finished_jobs_expire_after_the_ttl() -> None:
    clock = Clock()
    jobs = registry(clock=clock, ttl_seconds=60.0)
    job_id = submit(jobs, succeeding()).job_id
    await finished(jobs, job_id)
    clock.now += 59.5
    assert jobs.get(job_id).state == "succeeded"
    clock.now += 0.5
    with pytest.raises(JobNotFoundError):
        jobs.get(job_id)


async def test_unfinished_jobs_never_expire() -> None:
    clock = Clock()
    jobs = registry(clock=clock, ttl_seconds=60.0)
    release = anyio.Event()
    job_id = submit(jobs, held(release, started=True)).job_id
    clock.now += 10_000
    assert jobs.get(job_id).state in {"queued", "running"}
    release.set()
    await finished(jobs, job_id)
    # The TTL counts from the end of the job.
    clock.now += 59
    assert jobs.get(job_id).state == "succeeded"


async def test_full_of_unfinished_jobs_refuses_then_drops_the_oldest_finished() -> None:
    jobs = registry(max_jobs=2)
    first_release, second_release = anyio.Event(), anyio.Event()
    first = submit(jobs, held(first_release, started=True)).job_id
    second = submit(jobs, held(second_release, started=True)).job_id
    with pytest.raises(JobQueueFullError) as refused:
        submit(jobs, succeeding())
    assert refused.value.status_code == 503
    assert refused.value.code == "JOB_QUEUE_FULL"
    # The second finishes first, so it is the oldest finished job.
    second_release.set()
    await finished(jobs, second)
    first_release.set()
    await finished(jobs, first)
    third = submit(jobs, succeeding()).job_id
    with pytest.raises(JobNotFoundError):
        jobs.get(second)
    assert jobs.get(first).state == "succeeded"
    assert (await finished(jobs, third)).state == "succeeded"


async def test_cancelling_a_queued_job_aborts_it_without_running() -> None:
    metrics = IngestMetrics()
    jobs = registry(metrics)
    never = anyio.Event()
    job_id = submit(jobs, held(never, started=False)).job_id
    snapshot, requested = jobs.cancel(job_id)
    assert requested is True
    assert snapshot.state == "queued"
    job = await finished(jobs, job_id)
    assert job.state == "aborted"
    assert job.started_at is None
    assert job.error is not None
    assert job.error["code"] == "JOB_CANCELLED"
    assert 'ingest_jobs_total{state="aborted"} 1.0' in metrics.render().decode()
    assert 'ingest_jobs_active{state="queued"} 0.0' in metrics.render().decode()


async def test_cancelling_a_running_job_aborts_its_run_and_a_finished_job_stays() -> None:
    jobs = registry()
    never = anyio.Event()
    job_id = submit(jobs, held(never, started=True)).job_id
    await until(jobs, job_id, lambda job: job.state == "running")
    assert jobs.cancel(job_id)[1] is True
    job = await finished(jobs, job_id)
    assert job.state == "aborted"
    assert job.error == render(JobCancelledError("cancelled with DELETE"))
    snapshot, requested = jobs.cancel(job_id)
    assert requested is False
    assert snapshot == job


async def test_an_unexpected_exception_fails_the_job_as_the_sync_route_would(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(control: RunControl) -> dict[str, Any]:
        raise RuntimeError("boom")

    jobs = registry()
    with caplog.at_level(logging.INFO, logger="ingestion_service.jobs.ingest"):
        job_id = submit(jobs, broken).job_id
        job = await finished(jobs, job_id)
    assert job.state == "failed"
    assert job.error == {
        "status": False,
        "error": "Indexing pipeline failed.",
        "code": "PIPELINE_FAILED",
        "request_id": "req-1",
    }
    [line] = [record for record in caplog.records if record.name == "ingestion_service.jobs.ingest"]
    assert line.levelno == logging.ERROR
    assert line.exc_info is not None
    assert isinstance(line.exc_info[1], RuntimeError)


async def test_one_log_line_when_a_job_ends_with_its_ids_state_and_code(caplog: pytest.LogCaptureFixture) -> None:
    jobs = registry()
    with caplog.at_level(logging.INFO, logger="ingestion_service.jobs.ingest"):
        job_id = submit(jobs, succeeding(), file_id="logged").job_id
        await finished(jobs, job_id)
    [line] = [record for record in caplog.records if record.name == "ingestion_service.jobs.ingest"]
    assert line.levelno == logging.INFO
    fields = {name: getattr(line, name) for name in ("job_id", "file_id", "state", "code", "request_id")}
    assert fields == {"job_id": job_id, "file_id": "logged", "state": "succeeded", "code": "OK", "request_id": "req-1"}


async def test_shutdown_waits_the_grace_then_aborts_and_refuses_new_jobs() -> None:
    jobs = registry()
    never = anyio.Event()
    finishing = anyio.Event()
    running = submit(jobs, held(never, started=True)).job_id
    quick = submit(jobs, held(finishing, started=True)).job_id
    queued = submit(jobs, held(never, started=False)).job_id
    await until(jobs, running, lambda job: job.state == "running")
    finishing.set()  # finishes within the grace period
    await jobs.shutdown(grace_seconds=0.5, abort_wait_seconds=GUARD_SECONDS)
    assert jobs.get(quick).state == "succeeded"
    for job_id in (running, queued):
        job = jobs.get(job_id)
        assert job.state == "aborted"
        assert job.error is not None
        assert job.error["code"] == "SHUTTING_DOWN"
    with pytest.raises(ShuttingDownError):
        submit(jobs, succeeding())


async def test_shutdown_marks_a_job_stuck_past_the_abort_wait_aborted() -> None:
    metrics = IngestMetrics()
    jobs = registry(metrics)
    release, returned = anyio.Event(), anyio.Event()
    job_id = submit(jobs, stubborn(release, returned)).job_id
    await until(jobs, job_id, lambda job: job.state == "running")
    await jobs.shutdown(grace_seconds=0, abort_wait_seconds=0)
    job = jobs.get(job_id)
    assert job.state == "aborted"
    assert job.error is not None
    assert job.error["code"] == "SHUTTING_DOWN"
    # The run ending later changes neither the recorded end nor the series.
    release.set()
    with anyio.fail_after(GUARD_SECONDS):
        await returned.wait()
    assert jobs.get(job_id) == job
    text = metrics.render().decode()
    assert 'ingest_jobs_total{state="aborted"} 1.0' in text
    assert 'ingest_jobs_total{state="succeeded"}' not in text
    assert 'ingest_jobs_active{state="running"} 0.0' in text


def test_job_settings_defaults(make_test_settings: MakeSettings) -> None:
    settings = make_test_settings()
    assert (settings.ingest_jobs_max, settings.ingest_job_ttl_seconds) == (1000, 3600.0)


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"ingest_jobs_max": 0}, "INGEST_JOBS_MAX"),
        ({"ingest_jobs_max": 100_001}, "INGEST_JOBS_MAX"),
        ({"ingest_job_ttl_seconds": 0}, "INGEST_JOB_TTL_SECONDS"),
        ({"ingest_job_ttl_seconds": 8 * 24 * 3600}, "INGEST_JOB_TTL_SECONDS"),
    ],
)
def test_job_settings_are_validated(
    make_test_settings: MakeSettings, overrides: dict[str, object], variable: str
) -> None:
    with pytest.raises(ContractConfigError) as caught:
        make_test_settings(**overrides)
    assert caught.value.variable == variable
