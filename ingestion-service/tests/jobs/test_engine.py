"""The engine every background job runs on: refusal once closing, stopping a job, the shutdown's steps.

Ordering is forced with events; the only timeouts are guards against a deadlocked test.
"""

from __future__ import annotations

import anyio
import pytest

from ingestion_service.errors import JobCancelledError, ShuttingDownError
from ingestion_service.jobs.engine import JobEngine, JobRun
from ingestion_service.run_control import RunControl

pytestmark = pytest.mark.anyio

GUARD_SECONDS = 30


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def until_cancelled(job: JobRun, ended: list[str]) -> None:
    with job.scope:
        await anyio.sleep_forever()
    ended.append(job.run_name)


async def until_set(event: anyio.Event, job: JobRun, ended: list[str]) -> None:
    await event.wait()
    ended.append(job.run_name)


async def test_a_closed_engine_refuses_new_jobs() -> None:
    engine: JobEngine[JobRun] = JobEngine("test")
    engine.refuse_if_closing()
    engine.close()
    with pytest.raises(ShuttingDownError):
        engine.refuse_if_closing()


async def test_stop_aborts_the_run_and_cancels_the_work_unless_told_not_to() -> None:
    engine: JobEngine[JobRun] = JobEngine("test")
    ended: list[str] = []
    waiting_run, running_run = RunControl(timeout_seconds=60), RunControl(timeout_seconds=60)
    waiting = JobRun("waiting", waiting_run)
    engine.launch(waiting, until_cancelled(waiting, ended))
    running = JobRun("running", running_run)
    engine.launch(running, until_cancelled(running, ended))
    await anyio.sleep(0)  # both tasks enter their scopes
    waiting.stop(JobCancelledError("cancelled"))
    running.stop(JobCancelledError("cancelled"), cancel_work=False)
    assert await engine.wait([waiting], GUARD_SECONDS) == []
    assert ended == ["waiting"]
    assert isinstance(waiting_run.aborted, JobCancelledError)
    # Not cancelled: its run is aborted and stops at its own next checkpoint.
    assert isinstance(running_run.aborted, JobCancelledError)
    assert running.task is not None
    assert not running.task.done()
    running.scope.cancel()
    assert await engine.wait([running], GUARD_SECONDS) == []


async def test_shutdown_gives_the_grace_then_stops_the_rest_and_returns_those_still_running() -> None:
    engine: JobEngine[JobRun] = JobEngine("test")
    ended: list[str] = []
    finishing, stubborn_release = anyio.Event(), anyio.Event()
    quick = JobRun("quick")
    engine.launch(quick, until_set(finishing, quick, ended))
    slow = JobRun("slow")
    engine.launch(slow, until_cancelled(slow, ended))
    stubborn = JobRun("stubborn")
    engine.launch(stubborn, until_set(stubborn_release, stubborn, ended))
    jobs = [quick, slow, stubborn]
    stopped: list[str] = []

    def stop(job: JobRun) -> None:
        stopped.append(job.run_name)
        job.stop(ShuttingDownError("service shutting down"))

    def unfinished() -> list[JobRun]:
        return [job for job in jobs if job.task is not None and not job.task.done()]

    await anyio.sleep(0)
    finishing.set()  # ends within the grace period, so it is never stopped
    left = await engine.shut_down(unfinished, stop, grace_seconds=0.2, abort_wait_seconds=0.2)
    assert stopped == ["slow", "stubborn"]
    assert ended == ["quick", "slow"]
    assert left == [stubborn]  # it ignores its scope: one native call the shutdown cannot end
    with pytest.raises(ShuttingDownError):
        engine.refuse_if_closing()
    stubborn_release.set()
    assert await engine.wait(left, GUARD_SECONDS) == []
