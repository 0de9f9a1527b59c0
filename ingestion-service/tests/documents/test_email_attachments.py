"""Which attachments of an e-mail are read as documents, and under what names."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

from ingestion_service.documents import email_attachments
from ingestion_service.documents.email_attachments import Attachment, document_attachments


def message_with(path: Path, *parts: tuple[bytes, str, str, str | None]) -> Path:
    message = EmailMessage()
    message["Subject"] = "Quarterly figures"
    message.set_content("See the attachments.")
    for data, maintype, subtype, name in parts:
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    path.write_bytes(message.as_bytes())
    return path


def test_documents_are_kept_in_order_and_images_audio_and_empty_parts_left_out(tmp_path: Path) -> None:
    path = message_with(
        tmp_path / "mail.eml",
        (b"%PDF-1.7 report", "application", "pdf", "report.pdf"),
        (b"\x89PNG logo", "image", "png", "logo.png"),
        (b"ID3 voice", "audio", "mpeg", "memo.mp3"),
        (b"   ", "text", "plain", "blank.txt"),
        (b"a,b\n1,2\n", "text", "csv", "figures.csv"),
    )
    assert document_attachments(path) == [
        Attachment("report.pdf", b"%PDF-1.7 report"),
        Attachment("figures.csv", b"a,b\n1,2\n"),
    ]


def test_a_nameless_attachment_gets_a_number_and_an_unsafe_suffix_is_left_off(tmp_path: Path) -> None:
    path = message_with(
        tmp_path / "mail.eml",
        (b"notes", "text", "plain", None),
        (b"more notes", "text", "plain", "odd name.t x t"),
    )
    first, second = document_attachments(path)
    assert (first.name, first.suffix) == ("attachment-1", "")
    assert (second.name, second.suffix) == ("odd name.t x t", "")
    assert Attachment("q3.xlsx", b"x").suffix == ".xlsx"


def test_at_most_max_attachments_are_read(tmp_path: Path) -> None:
    count = email_attachments.MAX_ATTACHMENTS + 3
    path = message_with(
        tmp_path / "mail.eml", *[(f"note {n}".encode(), "text", "plain", f"n{n}.txt") for n in range(count)]
    )
    assert [attachment.name for attachment in document_attachments(path)] == [
        f"n{n}.txt" for n in range(email_attachments.MAX_ATTACHMENTS)
    ]
