"""The in-process kreuzberg engine on hostile inputs built here: page renders for OCR stay within
the size cap, a stopped run stops between pages and attachments, damaged documents are 422."""

from __future__ import annotations

import io
from email.message import EmailMessage
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kreuzberg
import pytest
from PIL import Image

from ingestion_service import run_control
from ingestion_service.documents import SourceFile, rendering
from ingestion_service.documents.email_attachments import MAX_ATTACHMENT_DEPTH
from ingestion_service.documents.kreuzberg_local import KreuzbergConverter
from ingestion_service.errors import CORRUPT_REASON, ClientDisconnectedError, ExtractionError, IngestTimeoutError
from ingestion_service.run_control import RunControl

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..conftest import MakeSettings  # noqa: TID252

TEXT_PAGE = b"BT /F1 12 Tf 72 720 Td (Quarterly figures for the board, page one.) Tj ET"
# The largest image kreuzberg 4.10 decodes for OCR (it names the limit when it refuses one).
KREUZBERG_MAX_PIXELS = 64_000_000


def pdf_bytes(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (object 1 the catalog) with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def mixed_pdf(blank_pages: list[tuple[int, int]]) -> bytes:
    """A text page, then pages of the given (width, height) in points without any text."""
    count = 1 + len(blank_pages)
    page_ids = range(4, 4 + count)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % n for n in page_ids), count),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
        b" /Contents %d 0 R >>" % (4 + count),
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] >>" % size for size in blank_pages]
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(TEXT_PAGE), TEXT_PAGE))
    return pdf_bytes(objects)


def source(path: Path, data: bytes) -> SourceFile:
    path.write_bytes(data)
    return SourceFile(path=path, filename=path.name)


def message(subject: str, body: str, *attachments: tuple[bytes, str]) -> bytes:
    mail = EmailMessage()
    mail["Subject"] = subject
    mail.set_content(body)
    for data, name in attachments:
        mail.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return mail.as_bytes()


@pytest.fixture(scope="module")
def converter(make_test_settings_module: MakeSettings) -> KreuzbergConverter:
    return KreuzbergConverter(make_test_settings_module())


@pytest.fixture
def ocr_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every image the engine hands kreuzberg to OCR (the call itself still runs)."""
    sizes: list[tuple[int, int]] = []
    real = kreuzberg.extract_bytes_sync

    def recording(data: bytes, mime_type: str, **kwargs: Any) -> Any:
        if mime_type.startswith("image/"):
            sizes.append(Image.open(io.BytesIO(data)).size)
        return real(data, mime_type, **kwargs)

    monkeypatch.setattr(kreuzberg, "extract_bytes_sync", recording)
    return sizes


def in_run(control: RunControl, call: Callable[[], Any]) -> Any:
    control.start()
    with run_control.active(control):
        return call()


# --- rendering a text-less page for OCR --------------------------------------------------------


def test_poster_sized_pages_without_text_are_rendered_for_ocr_within_the_size_caps(
    converter: KreuzbergConverter, ocr_calls: list[tuple[int, int]], tmp_path: Path
) -> None:
    # At the OCR's 300 DPI: a 28-inch square is 8,334 pixels a side, 69 million pixels (kreuzberg
    # refuses to decode more than 64 million); a 100-inch banner is 30,000 pixels wide. Outside a
    # run (as the /extract probe calls it) the run checkpoints let everything through.
    documents = converter.convert(source(tmp_path / "posters.pdf", mixed_pdf([(2000, 2000), (7200, 100)])))
    assert "Quarterly figures" in (documents[0].content or "")
    square, banner = ocr_calls
    for width, height in ocr_calls:
        assert max(width, height) <= rendering.MAX_SIDE_PX
        assert width * height <= KREUZBERG_MAX_PIXELS
    assert square[0] == square[1]
    assert banner[0] > 50 * banner[1]  # scaled down whole, not cropped


# --- stopping a run between pages and attachments ----------------------------------------------


def test_an_aborted_run_stops_ocr_at_the_next_page(
    converter: KreuzbergConverter, ocr_calls: list[tuple[int, int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    control = RunControl(timeout_seconds=600)
    recording = kreuzberg.extract_bytes_sync

    def abort_after_the_first_page(data: bytes, mime_type: str, **kwargs: Any) -> Any:
        control.abort(ClientDisconnectedError())
        return recording(data, mime_type, **kwargs)

    monkeypatch.setattr(kreuzberg, "extract_bytes_sync", abort_after_the_first_page)
    pdf = source(tmp_path / "pages.pdf", mixed_pdf([(200, 200)] * 4))
    with pytest.raises(ClientDisconnectedError):
        in_run(control, lambda: converter.convert(pdf))
    assert len(ocr_calls) == 1


def test_a_run_past_its_deadline_ocrs_no_page(
    converter: KreuzbergConverter, ocr_calls: list[tuple[int, int]], tmp_path: Path
) -> None:
    pdf = source(tmp_path / "pages.pdf", mixed_pdf([(200, 200)] * 3))
    with pytest.raises(IngestTimeoutError):
        in_run(RunControl(timeout_seconds=0), lambda: converter.convert(pdf))
    assert ocr_calls == []


def test_an_aborted_run_stops_at_the_next_attachment(
    converter: KreuzbergConverter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    control = RunControl(timeout_seconds=600)
    read: list[str] = []
    real = kreuzberg.extract_file_sync

    def abort_after_the_first_attachment(path: str, **kwargs: Any) -> Any:
        read.append(Path(path).name)
        if len(read) == 2:  # the message, then its first attachment
            control.abort(ClientDisconnectedError())
        return real(path, **kwargs)

    monkeypatch.setattr(kreuzberg, "extract_file_sync", abort_after_the_first_attachment)
    attachments = [(f"Notes number {n}.".encode(), f"notes-{n}.txt") for n in range(3)]
    mail = source(tmp_path / "mail.eml", message("Notes", "Three notes attached.", *attachments))
    with pytest.raises(ClientDisconnectedError):
        in_run(control, lambda: converter.convert(mail))
    assert len(read) == 2


# --- attachments within attachments ------------------------------------------------------------


def attached_chain(depth: int) -> bytes:
    """A message with a message attached (sent as application/octet-stream), ``depth`` messages in all."""
    data = message(f"Level {depth}", f"Message at level {depth}.")
    for level in range(depth - 1, 0, -1):
        data = message(f"Level {level}", f"Message at level {level}.", (data, f"level-{level + 1}.eml"))
    return data


def test_attached_messages_are_read_to_the_depth_cap_and_deeper_ones_named(
    converter: KreuzbergConverter, tmp_path: Path
) -> None:
    depth = MAX_ATTACHMENT_DEPTH + 2
    [document] = converter.convert(source(tmp_path / "source.eml", attached_chain(depth)))
    text = document.content or ""
    for level in range(1, MAX_ATTACHMENT_DEPTH + 2):
        assert f"Message at level {level}." in text
    assert f"Message at level {depth}." not in text
    assert document.meta["email_attachments"] == ["level-2.eml"]
    assert document.meta["email_attachments_skipped"] == [
        "level-2.eml > level-3.eml > level-4.eml > level-5.eml: attached more than 3 levels deep"
    ]
    assert sorted(tmp_path.iterdir()) == [tmp_path / "source.eml"]  # nothing staged is left behind


def test_an_attachment_is_staged_under_a_short_name_whatever_the_message_is_called(
    converter: KreuzbergConverter, tmp_path: Path
) -> None:
    mail = message("Notes", "One note attached.", (b"The attached note.", "note.txt"))
    [document] = converter.convert(source(tmp_path / f"{'m' * 245}.eml", mail))
    assert "The attached note." in (document.content or "")
    assert document.meta["email_attachments"] == ["note.txt"]


# --- damaged documents are the document's problem (422) ----------------------------------------


def assert_damaged(error: ExtractionError) -> None:
    assert error.status_code == 422
    assert error.reason == CORRUPT_REASON


def test_a_message_nested_thousands_of_levels_deep_is_422(converter: KreuzbergConverter, tmp_path: Path) -> None:
    level = b"MIME-Version: 1.0\r\nSubject: forwarded\r\nContent-Type: message/rfc822\r\n\r\n"
    data = level * 3000 + b"Subject: innermost\r\n\r\nThe innermost text.\r\n"
    with pytest.raises(ExtractionError) as raised:
        converter.convert(source(tmp_path / "deep.eml", data))
    assert_damaged(raised.value)


def test_a_pdf_whose_page_tree_is_a_cycle_is_422(converter: KreuzbergConverter, tmp_path: Path) -> None:
    data = pdf_bytes([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>"])
    with pytest.raises(ExtractionError) as raised:
        converter.convert(source(tmp_path / "cycle.pdf", data))
    assert_damaged(raised.value)
    assert "page 1" in str(raised.value)
