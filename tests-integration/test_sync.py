"""`rag sync` as a person runs it (a subprocess) against the real stack: a folder, an S3 prefix, --watch."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
from integration_support import BUCKET, FIXTURES, Stack

CONTRACT_PDF = FIXTURES / "kreuzberg__sample_contract.pdf"
TABLES_DOCX = FIXTURES / "docling__word_tables.docx"
WIKI_MD = FIXTURES / "docling__wiki.md"
DANISH_TXT = FIXTURES / "tika__danish_europarl_sample.txt"
# Appended to the Markdown file between syncs; nothing else in the fixtures says it.
EDIT = "\n\nIn 2031 the Zebra Quartz accord moved IBM's archive to the harbour of Tromsø.\n"
SUMMARY = re.compile(r"(\d+) added, (\d+) changed, (\d+) unchanged, (\d+) removed, (\d+) failed")
# Only a guard against a hung command; no assertion depends on how long a sync takes.
COMMAND_GUARD_S = 600
RAG_SYNC = (sys.executable, "-m", "rag_cli", "sync")


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


WATCH_GUARD_S = 180


def rag_env(stack: Stack) -> dict[str, str]:
    return {
        **os.environ,
        "RAG_INGESTION_URL": stack.ingestion_url,
        "INGESTION_API_KEY": stack.ingestion_key,
        "AWS_ACCESS_KEY_ID": stack.s3.access_key,
        "AWS_SECRET_ACCESS_KEY": stack.s3.secret_key,
        "AWS_DEFAULT_REGION": stack.s3.region,
        "COLUMNS": "200",
    }


def rag_sync(stack: Stack, *args: str) -> tuple[int, dict[str, int], str]:
    """Run `rag sync ...`: exit code, the counts of its summary line, and its output."""
    result = subprocess.run(
        [*RAG_SYNC, *args],
        env=rag_env(stack),
        capture_output=True,
        text=True,
        timeout=COMMAND_GUARD_S,
        check=False,
    )
    output = result.stdout + result.stderr
    found = SUMMARY.findall(output)
    names = ("added", "changed", "unchanged", "removed", "failed")
    summary = dict(zip(names, map(int, found[-1]), strict=True)) if found else {}
    return result.returncode, summary, output


def counts(added: int = 0, changed: int = 0, unchanged: int = 0, removed: int = 0, failed: int = 0) -> dict[str, int]:
    return {"added": added, "changed": changed, "unchanged": unchanged, "removed": removed, "failed": failed}


def documents(stack: Stack, kb: str) -> dict[str, dict[str, Any]]:
    """The knowledge base's documents by name, from the service's own listing."""
    response = stack.ingestion().get("/api/v1/documents", params={"collection_name": kb, "limit": 1000})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["next_offset"] is None
    return {doc["name"]: doc for doc in body["documents"]}


def ingest_requests(stack: Stack) -> float:
    """Every ingest request the service has counted, whatever its outcome."""
    metrics = stack.ingestion().get("/metrics")
    assert metrics.status_code == 200, metrics.text
    prefix = "ingest_requests_total{"
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.text.splitlines() if line.startswith(prefix))


def top_file_id(stack: Stack, query: str, kb: str) -> str:
    response = stack.retrieval().post(
        f"{stack.retrieval_url}/search", json={"queries": [query], "collection_names": [kb], "k": 3}
    )
    assert response.status_code == 200, response.text
    file_id: str = response.json()["metadatas"][0][0]["file_id"]
    return file_id


def test_folder_sync_adds_skips_unchanged_without_ingesting_then_follows_edits(
    stack: Stack, unique: str, tmp_path: Path
) -> None:
    kb = f"kb-sync-{unique}"
    folder = tmp_path / "kb folder"  # a space: the root URI is percent-encoded, ids stay stable
    (folder / "contracts").mkdir(parents=True)
    shutil.copy(CONTRACT_PDF, folder / "contracts" / CONTRACT_PDF.name)
    shutil.copy(TABLES_DOCX, folder / TABLES_DOCX.name)
    shutil.copy(WIKI_MD, folder / WIKI_MD.name)
    (folder / ".notes.md").write_text("hidden: never synced")
    # Someone else's document in the same knowledge base (an Open WebUI upload): sync must leave it.
    foreign_id = str(uuid.uuid4())
    with TABLES_DOCX.open("rb") as handle:
        uploaded = stack.ingestion().put(
            "/api/v1/ingest",
            files={"file": ("uploaded.docx", handle, "application/octet-stream")},
            data={"file_id": foreign_id, "filename": "uploaded.docx", "collection_name": kb, "user_id": "webui"},
        )
    assert uploaded.status_code == 200, uploaded.text

    code, summary, output = rag_sync(stack, str(folder), "--collection", kb)
    assert code == 0, output
    assert summary == counts(added=3), output
    first = documents(stack, kb)
    assert sorted(first) == sorted([CONTRACT_PDF.name, TABLES_DOCX.name, WIKI_MD.name, "uploaded.docx"])
    root = folder.resolve().as_uri()
    wiki = first[WIKI_MD.name]
    assert wiki["file_id"] == str(uuid.uuid5(uuid.NAMESPACE_URL, f"{root}/{WIKI_MD.name}"))
    assert wiki["attributes"] == {"sync_source": root, "sync_path": WIKI_MD.name}
    assert first[CONTRACT_PDF.name]["attributes"]["sync_path"] == f"contracts/{CONTRACT_PDF.name}"

    before = ingest_requests(stack)
    code, summary, output = rag_sync(stack, str(folder), "--collection", kb)
    assert code == 0, output
    assert summary == counts(unchanged=3), output
    # Skipped by hash on the client: the service did not even receive the files again.
    assert ingest_requests(stack) == before
    again = documents(stack, kb)
    assert {name: doc["ingested_at"] for name, doc in again.items()} == {
        name: doc["ingested_at"] for name, doc in first.items()
    }

    with (folder / WIKI_MD.name).open("a", encoding="utf-8") as handle:
        handle.write(EDIT)
    (folder / TABLES_DOCX.name).unlink()
    shutil.copy(DANISH_TXT, folder / "contracts" / DANISH_TXT.name)
    code, summary, output = rag_sync(stack, str(folder), "--collection", kb)
    assert code == 0, output
    assert summary == counts(added=1, changed=1, unchanged=1, removed=1), output
    last = documents(stack, kb)
    assert sorted(last) == sorted([CONTRACT_PDF.name, WIKI_MD.name, DANISH_TXT.name, "uploaded.docx"])
    assert last[WIKI_MD.name]["file_id"] == wiki["file_id"]
    assert last[WIKI_MD.name]["content_hash"] != wiki["content_hash"]
    assert last[CONTRACT_PDF.name]["ingested_at"] == first[CONTRACT_PDF.name]["ingested_at"]
    assert last["uploaded.docx"]["file_id"] == foreign_id
    assert top_file_id(stack, "Where did the Zebra Quartz accord move the archive?", kb) == wiki["file_id"]


def test_dry_run_changes_nothing_and_a_bad_folder_is_a_usage_error(stack: Stack, unique: str, tmp_path: Path) -> None:
    kb = f"kb-sync-dry-{unique}"
    shutil.copy(WIKI_MD, tmp_path / WIKI_MD.name)
    before = ingest_requests(stack)
    code, summary, output = rag_sync(stack, str(tmp_path), "--collection", kb, "--dry-run")
    assert code == 0, output
    assert summary == counts(added=1), output
    assert "dry run" in output
    assert ingest_requests(stack) == before
    assert documents(stack, kb) == {}
    code, _, output = rag_sync(stack, str(tmp_path / "missing"), "--collection", kb)
    assert code == 2, output


def test_s3_prefix_sync_skips_unchanged_objects_by_etag(stack: Stack, unique: str) -> None:
    kb, prefix = f"kb-sync-s3-{unique}", f"sync-{unique}"
    stack.s3.put(BUCKET, f"{prefix}/{WIKI_MD.name}", WIKI_MD)
    stack.s3.put(BUCKET, f"{prefix}/tables/{TABLES_DOCX.name}", TABLES_DOCX)
    s3 = boto3.client(
        "s3",
        endpoint_url=stack.s3.url,
        aws_access_key_id=stack.s3.access_key,
        aws_secret_access_key=stack.s3.secret_key,
        region_name=stack.s3.region,
    )
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/empty/", Body=b"")  # a folder marker: skipped
    source = f"s3://{BUCKET}/{prefix}/"
    sync_args = (source, "--collection", kb, "--s3-endpoint-url", stack.s3.url)

    code, summary, output = rag_sync(stack, *sync_args)
    assert code == 0, output
    assert summary == counts(added=2), output
    first = documents(stack, kb)
    assert sorted(first) == sorted([WIKI_MD.name, TABLES_DOCX.name])
    assert first[TABLES_DOCX.name]["s3_key"] == f"{prefix}/tables/{TABLES_DOCX.name}"
    assert first[TABLES_DOCX.name]["attributes"] == {
        "sync_source": f"s3://{BUCKET}/{prefix}",
        "sync_path": f"tables/{TABLES_DOCX.name}",
    }

    before = ingest_requests(stack)
    code, summary, output = rag_sync(stack, *sync_args)
    assert code == 0, output
    assert summary == counts(unchanged=2), output
    assert ingest_requests(stack) == before  # the ETags matched: no object was read, nothing sent

    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{WIKI_MD.name}", Body=WIKI_MD.read_bytes() + EDIT.encode())
    s3.delete_object(Bucket=BUCKET, Key=f"{prefix}/tables/{TABLES_DOCX.name}")
    code, summary, output = rag_sync(stack, *sync_args)
    assert code == 0, output
    assert summary == counts(changed=1, removed=1), output
    last = documents(stack, kb)
    assert sorted(last) == [WIKI_MD.name]
    assert last[WIKI_MD.name]["content_hash"] != first[WIKI_MD.name]["content_hash"]
    assert (
        top_file_id(stack, "Where did the Zebra Quartz accord move the archive?", kb) == first[WIKI_MD.name]["file_id"]
    )


def test_watch_follows_a_new_file_and_ctrl_c_stops_it(stack: Stack, unique: str, tmp_path: Path) -> None:
    kb = f"kb-sync-watch-{unique}"
    shutil.copy(WIKI_MD, tmp_path / WIKI_MD.name)
    log = tmp_path.parent / f"{tmp_path.name}-watch.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*RAG_SYNC, str(tmp_path), "--collection", kb, "--watch", "--debounce-ms", "300"],
            env=rag_env(stack),
            stdout=sink,
            stderr=subprocess.STDOUT,
            # As a terminal starts it: a test run launched in the background ignores SIGINT, and a
            # child would inherit that (and rightly keep ignoring Ctrl-C).
            preexec_fn=_interruptible,
        )
    try:
        deadline = time.monotonic() + WATCH_GUARD_S

        def wait_for(names: list[str]) -> None:
            while sorted(documents(stack, kb)) != sorted(names):
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)

        wait_for([WIKI_MD.name])
        while "watching" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        shutil.copy(TABLES_DOCX, tmp_path / TABLES_DOCX.name)
        wait_for([WIKI_MD.name, TABLES_DOCX.name])
        (tmp_path / WIKI_MD.name).unlink()
        wait_for([TABLES_DOCX.name])
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
    output = log.read_text()
    assert code == 0, output
    assert "rag sync: stopped" in output
    assert "Traceback" not in output
