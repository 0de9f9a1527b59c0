"""Per-document limits: unpack size, compression ratio, table cells, XML depth, extracted text, chunk count, wall time.

Each refusal has its code, writes nothing, and leaves the file's previous version live.
"""

from __future__ import annotations

import io
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient
from haystack import Document

from ingestion_service.documents import SourceFile
from ingestion_service.errors import CORRUPT_REASON
from ingestion_service.runtime import ServiceHooks
from rag_runtime.http import hint_for

from ...workbooks import sparse_xls_bomb, value, xlsx  # noqa: TID252

if TYPE_CHECKING:
    import httpx2

    from ...conftest import AppFactory, Points, Upload  # noqa: TID252
    from ..conftest import AssertKept, IngestBytes  # noqa: TID252

WIKI = "md/docling__wiki.md"  # 7 chunks with the default settings

_DOCX_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_DOCX_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="word/document.xml"/></Relationships>'
)


def docx_bomb(paragraphs: int = 200_000) -> bytes:
    """A well-formed DOCX of a few dozen KB whose one paragraph, repeated, unpacks to ~15 MB of XML."""
    paragraph = "<w:p><w:r><w:t>All work and no play makes Jack a dull boy.</w:t></w:r></w:p>"
    body = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
        + paragraph * paragraphs
        + "</w:body></w:document>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", _DOCX_TYPES)
        archive.writestr("_rels/.rels", _DOCX_RELS)
        archive.writestr("word/document.xml", body)
    return buffer.getvalue()


def xlsx_bomb() -> bytes:
    """An XLSX-shaped ZIP of a few KB with one 20 MB, highly compressible worksheet."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("xl/workbook.xml", "<workbook/>")
        archive.writestr("xl/worksheets/sheet1.xml", "<sheetData>" + "0" * 20_000_000 + "</sheetData>")
    return buffer.getvalue()


def sparse_xlsx_bomb() -> bytes:
    """A 1.2 KB XLSX whose only cells, A1 and IP10000, span a 250 × 10,000 grid (2.5 M cells, over the
    default MAX_TABLE_CELLS); the audit's IP100000 is ten times that, too much to risk should the check fail."""
    return xlsx(f'<row r="1">{value("A1")}</row><row r="10000">{value("IP10000")}</row>')


def deep_xml(depth: int = 1000) -> bytes:
    """Nested far past the XML readers' cap (the engine's memory grows with the square of the depth)."""
    return ('<?xml version="1.0"?>' + "<a>" * depth + "x" + "</a>" * depth).encode()


def _extract_bytes(client: TestClient, data: bytes, filename: str) -> httpx2.Response:
    return client.post("/api/v1/extract", files={"file": (filename, data)})


@pytest.fixture
def shared_index() -> str:
    """One collection for an app with default limits and one with tight limits (like two replicas)."""
    return f"limits_{uuid.uuid4().hex[:8]}"


def _ingest_good_then(
    app_client: Any, upload: Any, docs: Path, points: Any, shared_index: str, **limits: Any
) -> tuple[Any, list[Any]]:
    """Ingest the wiki with default settings, then return an app with ``limits`` on the same collection."""
    with app_client(qdrant_index=shared_index) as good:
        assert upload(good, docs / WIKI, file_id="f").status_code == 200
        before = points(good, file_id="f")
    return app_client(qdrant_index=shared_index, **limits), before


def test_archive_above_max_unpacked_bytes_is_413(app_client: AppFactory, docs: Path, ingest_bytes: IngestBytes) -> None:
    with app_client(max_unpacked_bytes=100_000) as client:
        data = (docs / "docx/docling__word_tables.docx").read_bytes()  # unpacks to 119,254 bytes
        response = ingest_bytes(client, data, "tables.docx", "unpacked")
    assert response.status_code == 413
    assert response.json() == {
        "status": False,
        "code": "DOCUMENT_TOO_LARGE",
        "hint": hint_for("DOCUMENT_TOO_LARGE"),
        "error": "The document unpacks to 119254 bytes, more than MAX_UNPACKED_BYTES (100000).",
        "request_id": response.headers["x-request-id"],
    }


def test_zip_behind_leading_junk_is_checked_against_max_unpacked_bytes(
    app_client: AppFactory,
    upload: Upload,
    docs: Path,
    points: Points,
    ingest_bytes: IngestBytes,
    assert_kept: AssertKept,
    shared_index: str,
) -> None:
    # The engines find a ZIP by its end record, so junk before its first header hid it from the check.
    data = b"JUNK" * 4 + (docs / "docx/docling__word_tables.docx").read_bytes()  # unpacks to 119,254 bytes
    message = "The document unpacks to 119254 bytes, more than MAX_UNPACKED_BYTES (100000)."
    limited, before = _ingest_good_then(app_client, upload, docs, points, shared_index, max_unpacked_bytes=100_000)
    with limited as client:
        for response in (ingest_bytes(client, data, "tables.docx", "f"), _extract_bytes(client, data, "tables.docx")):
            assert response.status_code == 413, response.text
            assert response.json()["code"] == "DOCUMENT_TOO_LARGE"
            assert response.json()["error"] == message
        assert_kept(client, "f", before)


def spanning_docx_bomb() -> bytes:
    """A 1.7 KB DOCX whose 2,001 rows each span 1,000 columns (2 M cells, just over the default
    MAX_TABLE_CELLS: the engine writes a spanning cell once per column; 20 M of them took 3.7 GB)."""
    cell = '<w:tc><w:tcPr><w:gridSpan w:val="1000"/></w:tcPr><w:p><w:r><w:t>x</w:t></w:r></w:p></w:tc>'
    body = (
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:tbl>'
        + f"<w:tr>{cell}</w:tr>" * 2001
        + "</w:tbl></w:body></w:document>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", body)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("build", "filename", "limit"),
    [
        (docx_bomb, "report.docx", "MAX_COMPRESSION_RATIO"),
        (xlsx_bomb, "sheet.xlsx", "MAX_COMPRESSION_RATIO"),
        (sparse_xlsx_bomb, "sheet.xlsx", "more than MAX_TABLE_CELLS (2000000) cells"),
        (spanning_docx_bomb, "report.docx", "more than MAX_TABLE_CELLS (2000000) cells"),
        (sparse_xls_bomb, "sheet.xls", "more than MAX_TABLE_CELLS (2000000) cells"),
    ],
)
def test_a_bomb_is_413_before_extraction_and_keeps_the_stored_version(
    client: TestClient,
    upload: Upload,
    docs: Path,
    points: Points,
    ingest_bytes: IngestBytes,
    assert_kept: AssertKept,
    build: Callable[[], bytes],
    filename: str,
    limit: str,
) -> None:
    assert upload(client, docs / WIKI, file_id="bomb").status_code == 200
    before = points(client, file_id="bomb")
    data = build()
    assert len(data) < 100_000
    for response in (ingest_bytes(client, data, filename, "bomb"), _extract_bytes(client, data, filename)):
        assert response.status_code == 413, response.text
        body = response.json()
        assert body["code"] == "DOCUMENT_TOO_LARGE"
        assert body["hint"] == hint_for("DOCUMENT_TOO_LARGE")
        assert limit in body["error"]
    assert_kept(client, "bomb", before)


def test_xml_nested_past_the_cap_is_422_unparseable(
    client: TestClient, upload: Upload, docs: Path, points: Points, ingest_bytes: IngestBytes, assert_kept: AssertKept
) -> None:
    assert upload(client, docs / WIKI, file_id="deep").status_code == 200
    before = points(client, file_id="deep")
    data = deep_xml()
    for response in (ingest_bytes(client, data, "deep.xml", "deep"), _extract_bytes(client, data, "deep.xml")):
        assert response.status_code == 422, response.text
        assert response.json()["code"] == "EXTRACTION_FAILED"
        assert response.json()["error"] == CORRUPT_REASON
    assert_kept(client, "deep", before)


def test_extracted_text_above_max_extracted_chars_is_413(
    app_client: AppFactory,
    upload: Upload,
    docs: Path,
    points: Points,
    assert_kept: AssertKept,
    shared_index: str,
    ingest_bytes: IngestBytes,
) -> None:
    limited, before = _ingest_good_then(app_client, upload, docs, points, shared_index, max_extracted_chars=1000)
    with limited as client:
        response = upload(client, docs / WIKI, file_id="f")
        assert response.status_code == 413
        body = response.json()
        assert body["code"] == "DOCUMENT_TOO_LARGE"
        assert "exceeds MAX_EXTRACTED_CHARS (1000)" in body["error"]
        # A table's values are counted from the file, before the engine prints the table.
        table = "id;note\n" + "".join(f"{row:03};some text {row:04}\n" for row in range(100))
        response = ingest_bytes(client, table.encode(), "table.csv", "f")
        assert response.status_code == 413
        assert response.json()["code"] == "DOCUMENT_TOO_LARGE"
        assert "(at least 1506 characters: its values) exceeds MAX_EXTRACTED_CHARS (1000)" in response.json()["error"]
        assert_kept(client, "f", before)


def test_extract_probe_applies_max_extracted_chars(app_client: AppFactory, docs: Path) -> None:
    with app_client(max_extracted_chars=1000) as client, (docs / WIKI).open("rb") as handle:
        response = client.post("/api/v1/extract", files={"file": ("wiki.md", handle)})
    assert response.status_code == 413
    assert response.json()["code"] == "DOCUMENT_TOO_LARGE"


def test_more_chunks_than_max_chunks_per_document_is_413(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, assert_kept: AssertKept, shared_index: str
) -> None:
    limited, before = _ingest_good_then(app_client, upload, docs, points, shared_index, max_chunks_per_document=3)
    with limited as client:
        # force: MAX_CHUNKS_PER_DOCUMENT is a limit, not a chunking setting, so the bytes count as unchanged.
        response = upload(client, docs / WIKI, file_id="f", force="true")
        assert response.status_code == 413
        assert response.json() == {
            "status": False,
            "code": "DOCUMENT_TOO_LARGE",
            "hint": hint_for("DOCUMENT_TOO_LARGE"),
            "error": "The document produces more than MAX_CHUNKS_PER_DOCUMENT (3) chunks.",
            "request_id": response.headers["x-request-id"],
        }
        assert_kept(client, "f", before)
        assert "ingest_chunks_count 0.0" in client.get("/metrics").text


class SlowConverter:
    """An engine that knows nothing of deadlines and takes 0.5 s for a short text."""

    name = "kreuzberg"
    profiles: frozenset[str] = frozenset()

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        time.sleep(0.5)
        return [Document(content=source.path.read_text(), meta={})]


def test_run_longer_than_ingest_timeout_is_504_and_keeps_the_previous_version(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, assert_kept: AssertKept, shared_index: str
) -> None:
    hooks = ServiceHooks(converter_factories={"kreuzberg": lambda _settings: SlowConverter()})
    limited, before = _ingest_good_then(
        app_client, upload, docs, points, shared_index, ingest_timeout_seconds=0.1, hooks=hooks
    )
    with limited as client:
        response = upload(client, docs / WIKI, file_id="f", force="true")
        assert response.status_code == 504
        assert response.json() == {
            "status": False,
            "code": "INGEST_TIMEOUT",
            "hint": hint_for("INGEST_TIMEOUT"),
            "error": "Ingesting the document took longer than INGEST_TIMEOUT_SECONDS (0.1 s); "
            "nothing was stored and the previous version is unchanged.",
            "request_id": response.headers["x-request-id"],
        }
        assert_kept(client, "f", before)
        assert 'ingest_requests_total{code="INGEST_TIMEOUT",outcome="failure"} 1.0' in client.get("/metrics").text
