"""Hostile and malformed inputs: each is a clear 4xx with its code, stores nothing partial, and the
service stays healthy; the file's previous version stays live throughout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pypdf import PdfReader, PdfWriter

from rag_runtime.store import PointRecord

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252
    from ..conftest import AssertKept, IngestBytes  # noqa: TID252

WIKI = "md/docling__wiki.md"
SEARCHABLE_PDF = "pdf/kreuzberg__searchable.pdf"
# A minimal 64-bit little-endian ELF header, padded: what `file` calls an ELF executable.
ELF = b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x02\x00\x3e\x00" + bytes(4000)


@pytest.fixture
def previous(client: TestClient, upload: Upload, docs: Path, points: Points) -> list[Any]:
    """A committed version of file 'h' that every hostile request below must leave intact."""
    assert upload(client, docs / WIKI, file_id="h").status_code == 200
    return points(client, file_id="h")


def _error(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["code"]


# --- content that does not match its name -----------------------------------------------------


# Named as text, as a type the platform does not know (kreuzberg reads .U and .asm as source code),
# or as another type.
@pytest.mark.parametrize("filename", ["notes.txt", "scan.U", "listing.asm", "report.bin"])
def test_a_pdf_named_as_anything_else_is_extracted_as_pdf(
    client: TestClient, ingest_bytes: IngestBytes, docs: Path, points: Points, filename: str
) -> None:
    response = ingest_bytes(client, (docs / SEARCHABLE_PDF).read_bytes(), filename, "pdftxt")
    assert response.status_code == 200, response.text
    stored = points(client, file_id="pdftxt")
    text = " ".join(record.payload["content"] for record in stored)
    assert "Lorem" in text
    assert "%PDF" not in text
    assert "FlateDecode" not in text
    assert {record.payload["meta"]["mime_type"] for record in stored} == {"application/pdf"}
    assert {record.payload["meta"]["name"] for record in stored} == {filename}


@pytest.mark.parametrize(
    ("data", "filename", "fragment"),
    [
        (os.urandom(20_000), "random.txt", "named as text (.txt) but its content is binary or not UTF-8"),
        (os.urandom(20_000), "no-extension", "named as text (without an extension)"),
        (ELF, "program.txt", "an ELF executable"),
        (ELF, "program.pdf", "an ELF executable"),
        # Text with a binary tail: every part of the file is sampled, not only its start.
        (b"# Title\n\n" + b"plain words " * 10_000 + os.urandom(40_000), "tail.md", "content is binary"),
    ],
)
def test_binary_content_is_415_unsupported_content(
    client: TestClient,
    ingest_bytes: IngestBytes,
    assert_kept: AssertKept,
    previous: list[PointRecord],
    data: bytes,
    filename: str,
    fragment: str,
) -> None:
    response = ingest_bytes(client, data, filename, "h")
    assert _error(response) == (415, "UNSUPPORTED_CONTENT")
    assert fragment in response.json()["error"]
    assert_kept(client, "h", previous)


def test_binary_content_named_as_source_code_kreuzberg_reads_as_text_is_422(
    client: TestClient, ingest_bytes: IngestBytes, assert_kept: AssertKept, previous: list[PointRecord]
) -> None:
    # `.s` is unknown to the platform's types, so no content check claims it; kreuzberg reads it as text.
    response = ingest_bytes(client, b"\xff\xfe\xfa" * 5000, "boot.s", "h")
    assert _error(response) == (422, "EXTRACTION_FAILED")
    assert response.json()["error"] == "The document could not be parsed (damaged or not the format its name suggests)."
    assert_kept(client, "h", previous)


def _danish_excerpt(docs: Path) -> str:
    """The Danish sample's first lines (~2.5 KB): Danish text gets a second, slower vector per chunk."""
    lines = (docs / "txt/tika__danish_europarl_sample.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    excerpt = ""
    for line in lines:
        if len(excerpt) + len(line) > 2500:
            break
        excerpt += line
    return excerpt


@pytest.mark.parametrize("filename", ["README", "LICENSE", "noext"])
def test_text_without_an_extension_is_read_as_plain_text(
    client: TestClient, ingest_bytes: IngestBytes, docs: Path, points: Points, filename: str
) -> None:
    # Engines pick their parser by suffix: such a file passed the text check, then was refused.
    data = _danish_excerpt(docs).encode()
    response = ingest_bytes(client, data, filename, "noext")
    assert response.status_code == 200, response.text
    stored = points(client, file_id="noext")
    assert "Europa" in " ".join(record.payload["content"] for record in stored)
    assert {record.payload["meta"]["name"] for record in stored} == {filename}
    assert {record.payload["meta"]["format"] for record in stored} == {"txt"}
    # The staged name stays internal.
    assert not [record for record in stored if "source.txt" in str(record.payload["meta"])]


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("nginx.conf", b"server {\n  listen 80;\n  server_name llamas.example.org;\n}\n"),
        ("setup.ini", b"[llamas]\nherd = 12\n"),
        ("pyproject.toml", b'[project]\nname = "llamas"\n'),
        ("paper.tex", b"\\documentclass{article}\n\\begin{document}\nLlamas graze.\n\\end{document}\n"),
        ("talk.srt", b"1\n00:00:01,000 --> 00:00:02,000\nLlamas graze.\n"),
        ("herd.py", b'def count_llamas(herd):\n    """Count the llamas."""\n    return len(herd)\n'),
        ("main.rs", b'fn main() { println!("llamas"); }\n'),
    ],
)
def test_configuration_and_source_code_are_read_as_plain_text(
    client: TestClient, ingest_bytes: IngestBytes, points: Points, filename: str, data: bytes
) -> None:
    # Named like text, no engine has a parser for them: they passed the text check, then were refused.
    response = ingest_bytes(client, data, filename, "code")
    assert response.status_code == 200, response.text
    stored = points(client, file_id="code")
    assert "llamas" in " ".join(record.payload["content"] for record in stored).lower()
    assert {record.payload["meta"]["name"] for record in stored} == {filename}
    assert {record.payload["meta"]["format"] for record in stored} == {filename.rsplit(".", 1)[1]}


PYTHON_SOURCE = b'''# Herd bookkeeping.
import sys


class Herd:
    """Llamas in one paddock."""

    def count(self, llamas):
        # Only grazing llamas count.
        return sum(1 for llama in llamas if llama.grazing)
'''


def test_source_code_keeps_its_lines_and_indentation_and_its_comments_are_not_headings(
    client: TestClient, ingest_bytes: IngestBytes, points: Points
) -> None:
    response = ingest_bytes(client, PYTHON_SOURCE, "herd.py", "herd")
    assert response.status_code == 200, response.text
    [chunk] = points(client, file_id="herd")
    assert chunk.payload["content"] == "```python\n" + PYTHON_SOURCE.decode().rstrip("\n") + "\n```"
    # "# Herd bookkeeping." is a comment inside the fence, so no heading path comes from it.
    assert chunk.payload["meta"]["headers"] == []
    assert chunk.payload["meta"]["reader"] == "verbatim"


def test_a_log_keeps_one_event_per_line(client: TestClient, ingest_bytes: IngestBytes, points: Points) -> None:
    log = b"2026-11-28 10:00:01 INFO llamas fed\r\n2026-11-28 10:00:02 ERROR paddock gate open\r\n"
    response = ingest_bytes(client, log, "farm.log", "log")
    assert response.status_code == 200, response.text
    [chunk] = points(client, file_id="log")
    assert (
        chunk.payload["content"] == "2026-11-28 10:00:01 INFO llamas fed\n2026-11-28 10:00:02 ERROR paddock gate open"
    )
    assert chunk.payload["meta"]["format"] == "log"


# Latin-1 stays below the undecodable share, so such files are text; engines read text as UTF-8, so
# it is stored as the characters it holds, not as U+FFFD.
def test_legacy_encoded_text_is_stored_as_its_characters(
    client: TestClient, ingest_bytes: IngestBytes, docs: Path, points: Points
) -> None:
    excerpt = _danish_excerpt(docs)
    danish = excerpt.encode("latin-1", "replace")
    response = ingest_bytes(client, danish, "danish.txt", "latin1")
    assert response.status_code == 200, response.text
    stored = " ".join(record.payload["content"] for record in points(client, file_id="latin1"))
    assert "\ufffd" not in stored
    accented = [word for word in excerpt.split() if any(letter in word for letter in "æøåÆØÅ")]
    assert accented
    assert all(word in stored for word in accented[:20])


GREETING = "Grüße aus München: Smørrebrød für 15 € ÆØÅ"


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("windows.txt", f"{GREETING}\n".encode("cp1252")),
        ("excel.csv", f"city,greeting\nMünchen,{GREETING}\n".encode("utf-16")),
        ("unicode-text.txt", f"city\tgreeting\r\nMünchen\t{GREETING}\r\n".encode("utf-16")),
        ("notes.md", f"# Notes\n\n{GREETING}\n".encode("cp1252")),
        (
            "declared.html",
            f'<html><head><meta charset="iso-8859-15"><title>t</title></head><body><p>{GREETING}</p></body></html>'.encode(
                "iso-8859-15"
            ),
        ),
        ("undeclared.html", f"<html><body><p>{GREETING}</p></body></html>".encode("cp1252")),
    ],
    ids=["cp1252-txt", "utf16-csv", "utf16-txt", "cp1252-md", "declared-html", "cp1252-html"],
)
def test_text_that_is_not_utf8_is_stored_as_its_characters(
    client: TestClient, ingest_bytes: IngestBytes, points: Points, filename: str, data: bytes
) -> None:
    response = ingest_bytes(client, data, filename, "enc")
    assert response.status_code == 200, response.text
    stored = " ".join(record.payload["content"] for record in points(client, file_id="enc"))
    assert "Grüße aus München" in stored
    assert "Smørrebrød für 15 €" in stored
    assert "\ufffd" not in stored


# --- damaged and protected documents ------------------------------------------------------------


def test_truncated_pdf_is_422(
    client: TestClient, ingest_bytes: IngestBytes, assert_kept: AssertKept, docs: Path, previous: list[PointRecord]
) -> None:
    data = (docs / SEARCHABLE_PDF).read_bytes()
    response = ingest_bytes(client, data[: len(data) // 2], "cut.pdf", "h")
    assert _error(response) == (422, "EXTRACTION_FAILED")
    assert response.json()["error"] == "The document could not be parsed (damaged or not the format its name suggests)."
    assert_kept(client, "h", previous)


# A catalog whose page tree lists itself as its own kid: PDFium cannot load its page.
CYCLIC_PAGE_TREE_PDF = (
    b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
    b"2 0 obj\n<< /Type /Pages /Kids [2 0 R] /Count 1 >>\nendobj\n"
    b"xref\n0 3\n0000000000 65535 f \n0000000009 00000 n \n0000000058 00000 n \n"
    b"trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n115\n%%EOF\n"
)


def test_a_pdf_whose_page_tree_is_a_cycle_is_422(
    client: TestClient, ingest_bytes: IngestBytes, assert_kept: AssertKept, previous: list[PointRecord]
) -> None:
    response = ingest_bytes(client, CYCLIC_PAGE_TREE_PDF, "cycle.pdf", "h")
    assert _error(response) == (422, "EXTRACTION_FAILED")
    assert_kept(client, "h", previous)


def test_encrypted_pdf_is_422(
    client: TestClient,
    ingest_bytes: IngestBytes,
    assert_kept: AssertKept,
    docs: Path,
    previous: list[PointRecord],
    tmp_path: Path,
) -> None:
    writer = PdfWriter(clone_from=PdfReader(docs / SEARCHABLE_PDF))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    locked = tmp_path / "locked.pdf"
    writer.write(locked)
    response = ingest_bytes(client, locked.read_bytes(), "locked.pdf", "h")
    assert _error(response) == (422, "EXTRACTION_FAILED")
    assert "encrypted" in response.json()["error"]
    assert_kept(client, "h", previous)


# --- incomplete bodies ------------------------------------------------------------------------------


def _multipart(fields: dict[str, str], filename: str, data: bytes) -> tuple[bytes, str]:
    request = httpx.Request("PUT", "http://test/api/v1/ingest", data=fields, files={"file": (filename, data)})
    return request.read(), request.headers["Content-Type"]


@pytest.mark.parametrize("cut", ["before_closing_boundary", "mid_file"])
def test_multipart_body_without_its_closing_boundary_is_422(
    client: TestClient, assert_kept: AssertKept, docs: Path, previous: list[PointRecord], cut: str
) -> None:
    fields = {"file_id": "h", "filename": "wiki.md", "collection_name": "file-h", "user_id": "u1"}
    body, content_type = _multipart(fields, "wiki.md", (docs / WIKI).read_bytes())
    boundary = content_type.split("boundary=", 1)[1].encode()
    end = body.rindex(b"--" + boundary + b"--")
    truncated = body[:end] if cut == "before_closing_boundary" else body[: end // 2 + len(body) // 4]
    response = client.put("/api/v1/ingest", content=truncated, headers={"Content-Type": content_type})
    assert _error(response) == (422, "INVALID_REQUEST")
    assert "ends before its closing boundary" in response.json()["error"]
    assert_kept(client, "h", previous)


# --- names and request types -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "fragment"),
    [
        ("../../etc/passwd", "must be a file name, not a path"),
        ("..\\windows\\system.ini", "must be a file name, not a path"),
        ("..", "must be a file name, not a path"),
        ("report\x00.pdf", "must not contain control characters"),
        ("report\n.md", "must not contain control characters"),
        ("a" * 1000 + ".md", "at most 255 characters"),
    ],
)
def test_odd_filenames_are_422(
    client: TestClient,
    ingest_bytes: IngestBytes,
    assert_kept: AssertKept,
    docs: Path,
    previous: list[PointRecord],
    filename: str,
    fragment: str,
) -> None:
    response = ingest_bytes(client, (docs / WIKI).read_bytes(), filename, "h")
    assert _error(response) == (422, "INVALID_REQUEST")
    assert fragment in response.json()["error"]
    assert_kept(client, "h", previous)


@pytest.mark.parametrize("filename", ["../../etc/passwd", "..\\boot.ini", "b" * 1000])
def test_odd_filenames_on_the_extract_probe_are_422(client: TestClient, docs: Path, filename: str) -> None:
    response = client.post("/api/v1/extract", files={"file": (filename, (docs / WIKI).read_bytes())})
    assert _error(response) == (422, "INVALID_REQUEST")


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),
        ("application/xml", 415),
        ("application/pdf", 415),
        ("application/x-www-form-urlencoded", 415),
        ("", 415),
        ("multipart/form-data", 422),  # no boundary
    ],
)
def test_wrong_request_content_types(
    client: TestClient, assert_kept: AssertKept, docs: Path, previous: list[PointRecord], content_type: str, status: int
) -> None:
    response = client.put("/api/v1/ingest", content=(docs / WIKI).read_bytes(), headers={"Content-Type": content_type})
    assert _error(response) == (status, "INVALID_REQUEST")
    assert_kept(client, "h", previous)


def test_json_body_over_its_cap_reports_the_json_limit(client: TestClient) -> None:
    body = b'{"file_id": "' + b"x" * 70_000 + b'"}'
    response = client.put("/api/v1/ingest", content=body, headers={"Content-Type": "application/json"})
    assert _error(response) == (413, "PAYLOAD_TOO_LARGE")
    message = response.json()["error"]
    assert "65536 bytes" in message
    assert "MAX_UPLOAD_BYTES" not in message


@pytest.mark.parametrize(
    "bucket",
    ["My_Bucket", "ab", "a" * 64, "-leading", "trailing-", "two..dots", "192.168.0.1", "xn--punycode", "x--ol-s3"],
)
def test_malformed_bucket_names_are_422_before_any_s3_call(app_client: AppFactory, bucket: str) -> None:
    # Nothing listens on the endpoint: any S3 call would be a 502.
    with app_client(s3_endpoint_url="http://127.0.0.1:9") as client:
        response = client.put(
            "/api/v1/ingest",
            json={
                "s3_bucket": bucket,
                "s3_key": "k",
                "file_id": "b1",
                "filename": "a.md",
                "collection_name": "file-b1",
                "user_id": "u1",
            },
        )
    assert _error(response) == (422, "INVALID_REQUEST")
    assert "not a valid S3 bucket name" in response.json()["error"]


@pytest.mark.parametrize(
    "data", [b"\xef\xbb\xbf", "\u200b\u200b\n\u2060".encode(), b"  \n\t\n"], ids=["bom-only", "zero-width", "blank"]
)
def test_a_file_of_invisible_characters_is_422_no_extractable_text(
    client: TestClient, ingest_bytes: IngestBytes, points: Points, previous: list[Any], data: bytes
) -> None:
    response = ingest_bytes(client, data, "empty.md", "h")
    assert _error(response) == (422, "EXTRACTION_FAILED")
    assert "no extractable text" in response.json()["error"]
    assert sorted(record.point_id for record in points(client, file_id="h")) == sorted(
        record.point_id for record in previous
    )
