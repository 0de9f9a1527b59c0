"""GotenbergClient against the loopback Gotenberg stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ingestion_service.adapters.gotenberg import GotenbergClient, GotenbergError

from ..conftest import free_port  # noqa: TID252
from ..scripted_servers import GotenbergStandIn, self_signed_context  # noqa: TID252

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

DOCX = "docx/docling__word_tables.docx"


def test_to_pdf_uploads_the_file_and_returns_the_pdf(
    make_test_settings: MakeSettings, gotenberg_server: GotenbergStandIn, docs: Path
) -> None:
    client = GotenbergClient(make_test_settings(gotenberg_url=gotenberg_server.url))
    try:
        pdf = client.to_pdf(docs / DOCX, "report.docx")
    finally:
        client.close()
    assert pdf == gotenberg_server.pdf
    [request] = gotenberg_server.requests
    assert request.path == "/forms/libreoffice/convert"
    [upload] = gotenberg_server.uploads
    assert upload.filename == "report.docx"
    assert upload.content == (docs / DOCX).read_bytes()
    assert upload.content_type == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_error_status_names_gotenberg(
    make_test_settings: MakeSettings, gotenberg_server: GotenbergStandIn, docs: Path
) -> None:
    gotenberg_server.status = 503
    client = GotenbergClient(make_test_settings(gotenberg_url=gotenberg_server.url))
    with pytest.raises(GotenbergError) as caught:
        client.to_pdf(docs / DOCX, "report.docx")
    client.close()
    assert str(caught.value).startswith(f"Gotenberg at {gotenberg_server.url} answered HTTP 503")
    assert caught.value.status == 503
    assert caught.value.code == "EXTRACTION_FAILED"
    assert caught.value.status_code == 500
    assert not caught.value.document_problem


def test_answer_that_is_not_a_pdf_fails(
    make_test_settings: MakeSettings, gotenberg_server: GotenbergStandIn, docs: Path
) -> None:
    gotenberg_server.pdf = b"<html>proxy login</html>"
    client = GotenbergClient(make_test_settings(gotenberg_url=gotenberg_server.url))
    with pytest.raises(GotenbergError, match="without a PDF"):
        client.to_pdf(docs / DOCX, "report.docx")
    client.close()


def test_unreachable_gotenberg_is_named(make_test_settings: MakeSettings, docs: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = GotenbergClient(make_test_settings(gotenberg_url=url))
    with pytest.raises(GotenbergError, match=rf"^Gotenberg at {url} is unreachable"):
        client.to_pdf(docs / DOCX, "report.docx")
    client.close()


def test_credentials_in_the_url_never_reach_a_message(
    make_test_settings: MakeSettings, gotenberg_server: GotenbergStandIn, docs: Path
) -> None:
    gotenberg_server.status = 503
    host = gotenberg_server.url.removeprefix("http://")
    client = GotenbergClient(make_test_settings(gotenberg_url=f"http://convert:s3cret@{host}"))
    with pytest.raises(GotenbergError) as caught:
        client.to_pdf(docs / DOCX, "report.docx")
    client.close()
    assert str(caught.value).startswith(f"Gotenberg at http://***@{host} answered HTTP 503")
    assert "s3cret" not in str(caught.value)


def test_read_timeout_applies(make_test_settings: MakeSettings, gotenberg_server: GotenbergStandIn, docs: Path) -> None:
    gotenberg_server.delay = 5.0
    client = GotenbergClient(make_test_settings(gotenberg_url=gotenberg_server.url, gotenberg_read_timeout=0.3))
    with pytest.raises(GotenbergError, match=rf"^Gotenberg at {gotenberg_server.url} timed out"):
        client.to_pdf(docs / DOCX, "report.docx")
    client.close()


def test_empty_url_is_refused(make_test_settings: MakeSettings) -> None:
    with pytest.raises(GotenbergError, match="GOTENBERG_URL"):
        GotenbergClient(make_test_settings(gotenberg_url=""))


@pytest.mark.parametrize("verify", [True, False])
def test_tls_verify_setting_reaches_the_client(make_test_settings: MakeSettings, docs: Path, verify: bool) -> None:
    with GotenbergStandIn(ssl_context=self_signed_context()) as server:
        client = GotenbergClient(make_test_settings(gotenberg_url=server.url, gotenberg_tls_verify=verify))
        try:
            if verify:
                # Nobody trusts the stand-in's self-signed certificate.
                with pytest.raises(GotenbergError, match=r"unreachable.*CERTIFICATE_VERIFY_FAILED"):
                    client.to_pdf(docs / DOCX, "report.docx")
            else:
                assert client.to_pdf(docs / DOCX, "report.docx") == server.pdf
        finally:
            client.close()
