"""Staged uploads never outlive their request, and a crashed process's leftovers go at the next start."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from ingestion_service.adapters.scratch import ScratchSpace
from shared_contract import ContractConfigError

if TYPE_CHECKING:
    from ..conftest import AppFactory, Upload  # noqa: TID252


def test_start_up_removes_uploads_left_by_a_dead_process_only(app_client: AppFactory, tmp_path: Path) -> None:
    dead = tmp_path / "proc-dead1234"
    (dead / "ingest-abc").mkdir(parents=True)
    (dead / "ingest-abc" / "source.pdf").write_bytes(b"%PDF-1.7 half an upload")
    live = tmp_path / "proc-live5678"
    (live / "ingest-def").mkdir(parents=True)
    holder = os.open(live, os.O_RDONLY)  # another running process's lock on its own directory
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        # The sweep runs in the background start-up, which readiness (awaited by app_client) follows.
        with app_client(scratch_dir=tmp_path):
            assert not dead.exists()
            assert (live / "ingest-def").is_dir()
        # The app's own directory goes with it; the other process's stays.
        assert sorted(path.name for path in tmp_path.glob("proc-*")) == ["proc-live5678"]
    finally:
        os.close(holder)


def test_request_directories_are_removed_after_success_and_failure(
    app_client: AppFactory, upload: Upload, docs: Path, tmp_path: Path
) -> None:
    # Without OCR the scan is a 422: a failure after the upload was staged.
    with app_client(scratch_dir=tmp_path, enable_ocr=False) as client:
        assert upload(client, docs / "md/docling__wiki.md").status_code == 200
        assert upload(client, docs / "pdf/kreuzberg__non_searchable.pdf").status_code == 422
        assert (
            client.put(
                "/api/v1/ingest",
                data={"file_id": "r", "filename": "r.txt", "collection_name": "file-r", "user_id": "u"},
                files={"file": ("r.txt", os.urandom(5000))},
            ).json()["code"]
            == "UNSUPPORTED_CONTENT"
        )
        [own] = tmp_path.glob("proc-*")
        assert list(own.iterdir()) == []


def test_a_scratch_dir_that_is_a_file_is_a_setting_error(tmp_path: Path) -> None:
    in_the_way = tmp_path / "file"
    in_the_way.write_text("x")
    space = ScratchSpace(in_the_way, max_bytes=1)
    with pytest.raises(ContractConfigError, match=r"^SCRATCH_DIR: ") as caught:
        anyio.run(space.claim)
    assert caught.value.variable == "SCRATCH_DIR"
