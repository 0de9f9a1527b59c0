"""A reindex job's progress and ETA, from its record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ingestion_service.jobs.reindex_state import ReindexRecord

START = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def record(**fields: object) -> ReindexRecord:
    values: dict[str, object] = {
        "job_id": "j1",
        "collection_name": "kb",
        "target_index": "ingestion_files",
        "source_index": None,
        "force": False,
        "state": "running",
        "created_at": START,
    }
    return ReindexRecord.model_validate({**values, **fields})


def test_progress_is_the_share_of_listed_documents_done() -> None:
    assert record().progress is None
    assert record(total=4, done=1).progress == 0.25
    assert record(total=0, state="succeeded").progress == 1.0


def test_the_eta_is_the_pace_of_the_documents_done_since_the_listing_times_those_left() -> None:
    job = record(total=10, done=4, pace_since=START, pace_done=0)
    # 4 documents in 60 s: 15 s each, 6 to go.
    assert job.eta_seconds(START + timedelta(seconds=60)) == 90.0


def test_a_resumed_job_paces_only_what_this_process_did() -> None:
    # 5 were done before the restart; 2 since the listing 30 s ago: 15 s each, 3 to go.
    job = record(total=10, done=7, pace_since=START, pace_done=5)
    assert job.eta_seconds(START + timedelta(seconds=30)) == 45.0


def test_no_eta_before_a_document_is_done_or_once_the_job_ended() -> None:
    assert record(total=10, done=5, pace_since=START, pace_done=5).eta_seconds(START + timedelta(seconds=9)) is None
    assert record(done=0).eta_seconds(START) is None
    finished = record(total=2, done=2, pace_since=START, pace_done=0, state="succeeded")
    assert finished.eta_seconds(START + timedelta(seconds=5)) is None


def test_the_pace_is_not_kept_in_the_state_file() -> None:
    job = record(total=10, done=4, pace_since=START, pace_done=0)
    resumed = ReindexRecord.model_validate_json(job.model_dump_json())
    assert (resumed.done, resumed.total) == (4, 10)
    assert resumed.eta_seconds(START + timedelta(seconds=60)) is None
