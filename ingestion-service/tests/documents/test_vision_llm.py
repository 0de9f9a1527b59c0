"""vision-llm through real loopback servers standing in for the vision endpoint and Gotenberg."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest
from PIL import Image
from pypdf import PdfReader, PdfWriter

from ingestion_service.documents import SourceFile
from ingestion_service.documents.registry import ConverterRegistry
from ingestion_service.documents.vision_llm import VisionLlmConverter
from ingestion_service.documents.vision_profiles import PROFILES, prompt_for
from ingestion_service.errors import (
    ENCRYPTED_REASON,
    UNSUPPORTED_REASON,
    ExtractionError,
    InvalidRequestError,
    NoExtractableTextError,
)

from ..conftest import free_port  # noqa: TID252
from ..scripted_servers import (  # noqa: TID252
    GotenbergStandIn,
    ScriptedVisionServer,
    VisionReply,
    images,
    prompt_text,
    self_signed_context,
)

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

TWO_PAGES = "pdf/unstructured__list-item-example.pdf"  # two US Letter pages (612 x 792 pt)
DOCX = "docx/docling__word_tables.docx"
JPEG = "jpg/unstructured__double-column-A.jpg"
KEY = "vision-secret-key"


class VisionFactory(Protocol):
    """The ``vision`` fixture."""

    def __call__(self, **overrides: Any) -> VisionLlmConverter: ...


@pytest.fixture
def vision(make_test_settings: MakeSettings, vision_server: ScriptedVisionServer) -> Iterator[VisionFactory]:
    """``vision(**settings_overrides)`` -> a VisionLlmConverter aimed at the scripted server, closed after."""
    built: list[VisionLlmConverter] = []

    def factory(**overrides: Any) -> VisionLlmConverter:
        values: dict[str, Any] = {
            "vision_llm_api_base_url": vision_server.base_url,
            "vision_llm_api_key": KEY,
            "vision_llm_dpi": 72,
            "vision_llm_max_tokens": 4096,
            **overrides,
        }
        converter = VisionLlmConverter(make_test_settings(**values))
        built.append(converter)
        return converter

    yield factory
    for converter in built:
        converter.close()


def _source(path: Path, filename: str | None = None) -> SourceFile:
    return SourceFile(path=path, filename=filename or path.name)


def _sizes(pngs: list[bytes]) -> list[tuple[int, int]]:
    sizes = []
    for png in pngs:
        with Image.open(io.BytesIO(png)) as image:
            assert image.format == "PNG"
            sizes.append(image.size)
    return sizes


@contextmanager
def _extraction_failure() -> Iterator[pytest.ExceptionInfo[ExtractionError]]:
    """Expects an engine/dependency fault: 500 EXTRACTION_FAILED, not the document's fault."""
    with pytest.raises(ExtractionError) as caught:
        yield caught
    assert caught.value.code == "EXTRACTION_FAILED"
    assert caught.value.status_code == 500
    assert not caught.value.document_problem


def test_pdf_pages_go_in_one_call_with_prompt_hint_max_tokens_and_key(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    converter = vision(vision_llm_language_hint="Danish", vision_llm_profile="general")
    [document] = converter.convert(_source(docs / TWO_PAGES))
    [request] = vision_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json()
    assert body["model"] == "gemma4-nvfp4"  # the bare name, sent to the OpenAI-compatible endpoint
    assert body["max_tokens"] == 4096
    assert prompt_text(request) == prompt_for("general", "Danish")
    assert _sizes(images(request)) == [(612, 792), (612, 792)]
    assert document.content == "# Vision answer\n\nimages: 2"
    assert document.meta == {
        "vision_profile": "general",
        "vision_model": "gemma4-nvfp4",
        "pages": 2,
        "mime_type": "application/pdf",
    }


def test_dpi_sets_the_image_size(vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path) -> None:
    vision(vision_llm_dpi=144).convert(_source(docs / "pdf/kreuzberg__searchable.pdf"))
    assert _sizes(images(vision_server.requests[-1])) == [(1224, 1584)]


def test_max_pages_sends_the_first_pages_and_marks_the_document(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    [document] = vision(vision_llm_max_pages=1).convert(_source(docs / TWO_PAGES))
    assert len(images(vision_server.requests[-1])) == 1
    assert document.content == "# Vision answer\n\nimages: 1"
    assert document.meta["pages"] == 1
    assert document.meta["pages_truncated"] is True
    assert document.meta["total_pages"] == 2


def test_answer_cut_at_max_tokens_fails(vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path) -> None:
    vision_server.script(VisionReply(content="# Half a transcri", finish_reason="length"))
    with _extraction_failure() as caught:
        vision().convert(_source(docs / TWO_PAGES))
    assert "VISION_LLM_MAX_TOKENS (4096)" in str(caught.value)


def test_unreachable_endpoint_is_named(vision: VisionFactory, docs: Path) -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    with _extraction_failure() as caught:
        vision(vision_llm_api_base_url=base_url).convert(_source(docs / TWO_PAGES))
    assert str(caught.value).startswith(f"vision-llm: vision endpoint {base_url} is unreachable")


@pytest.mark.parametrize(
    ("status", "says"), [(500, "answered HTTP 500"), (503, "answered HTTP 503"), (401, "rejected the API key")]
)
def test_error_status_is_named(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path, status: int, says: str
) -> None:
    vision_server.script(VisionReply(status=status))
    with _extraction_failure() as caught:
        vision().convert(_source(docs / TWO_PAGES))
    assert str(caught.value).startswith(f"vision-llm: vision endpoint {vision_server.base_url} {says}")
    # The body keeps the status and a fixed phrase; what the endpoint said is for the log only.
    assert caught.value.detail().startswith(f"Document extraction failed: the vision endpoint {says}")
    assert "scripted failure" not in caught.value.detail()
    assert len(vision_server.requests) == 1  # no retries


def test_read_timeout_applies(vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path) -> None:
    vision_server.script(VisionReply(delay=10.0))
    with _extraction_failure() as caught:
        vision(vision_llm_read_timeout=0.5).convert(_source(docs / TWO_PAGES))
    assert str(caught.value).startswith(f"vision-llm: vision endpoint {vision_server.base_url} timed out")


def test_docx_goes_through_gotenberg_and_its_pdf_pages_are_sent(
    vision: VisionFactory, vision_server: ScriptedVisionServer, gotenberg_server: GotenbergStandIn, docs: Path
) -> None:
    converter = vision(gotenberg_url=gotenberg_server.url)
    [document] = converter.convert(_source(docs / DOCX, "Kvartalsrapport.docx"))
    [upload] = gotenberg_server.uploads
    assert upload.filename == "Kvartalsrapport.docx"
    assert upload.content == (docs / DOCX).read_bytes()
    # The stand-in's PDF has two 200 x 100 pt pages: those are what reached the model.
    assert _sizes(images(vision_server.requests[-1])) == [(200, 100), (200, 100)]
    assert document.meta["mime_type"] == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_office_file_named_by_its_detected_type_keeps_the_real_suffix(
    vision: VisionFactory, gotenberg_server: GotenbergStandIn, docs: Path, tmp_path: Path
) -> None:
    # content.inspect_source renames a document named like text to its real suffix.
    path = tmp_path / "upload.docx"
    path.write_bytes((docs / DOCX).read_bytes())
    source = SourceFile(
        path=path,
        filename="notes.txt",
        media_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    )
    vision(gotenberg_url=gotenberg_server.url).convert(source)
    assert [upload.filename for upload in gotenberg_server.uploads] == ["notes.docx"]


def test_gotenberg_failure_is_named(
    vision: VisionFactory, vision_server: ScriptedVisionServer, gotenberg_server: GotenbergStandIn, docs: Path
) -> None:
    gotenberg_server.status = 500
    with _extraction_failure() as caught:
        vision(gotenberg_url=gotenberg_server.url).convert(_source(docs / DOCX))
    assert str(caught.value).startswith(f"Gotenberg at {gotenberg_server.url} answered HTTP 500")
    # The wire body names the dependency and the setting, not the internal URL.
    assert caught.value.detail() == "Document extraction failed: Gotenberg answered HTTP 500 (check GOTENBERG_URL)."
    assert vision_server.requests == []


def test_office_file_without_gotenberg_url_fails(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    with _extraction_failure() as caught:
        vision(gotenberg_url="").convert(_source(docs / "odt/docling__text_document_01.odt"))
    assert "Gotenberg is needed for office formats (.odt)" in str(caught.value)
    assert "(check GOTENBERG_URL)" in caught.value.detail()
    assert vision_server.requests == []


def test_jpeg_is_sent_as_one_page(vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path) -> None:
    [document] = vision().convert(_source(docs / JPEG))
    with Image.open(docs / JPEG) as original:
        assert _sizes(images(vision_server.requests[-1])) == [original.size]
    assert document.meta["pages"] == 1
    assert document.meta["mime_type"] == "image/jpeg"


def test_multi_page_tiff_sends_every_page(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    [document] = vision().convert(_source(docs / "tif/docling__2206.01062.tif"))
    assert len(images(vision_server.requests[-1])) == 2
    assert document.meta["pages"] == 2


def test_profile_argument_picks_the_prompt(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    converter = vision(vision_llm_language_hint="Swedish")
    [document] = converter.convert(_source(docs / JPEG), profile="ocr")
    assert prompt_text(vision_server.requests[-1]) == prompt_for("ocr", "Swedish")
    assert document.meta["vision_profile"] == "ocr"


def test_converter_lists_every_profile(vision: VisionFactory) -> None:
    assert vision().profiles == PROFILES


def test_unknown_profile_is_rejected(vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path) -> None:
    with pytest.raises(InvalidRequestError, match="Unknown vision profile 'poster'"):
        vision().convert(_source(docs / JPEG), profile="poster")
    assert vision_server.requests == []


def test_empty_answer_is_no_extractable_text(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    vision_server.script(VisionReply(content="  \n"))
    with pytest.raises(NoExtractableTextError) as caught:
        vision().convert(_source(docs / JPEG))
    assert caught.value.status_code == 422


@pytest.mark.parametrize(
    ("answer", "content"),
    [
        ("```markdown\n# Titel\n\nTekst\n```", "# Titel\n\nTekst"),
        (
            "```markdown\n# Flow\n\n```mermaid\nflowchart TD\n  A --> B\n```\n```",
            "# Flow\n\n```mermaid\nflowchart TD\n  A --> B\n```",
        ),
        # Two separate blocks: the first and last fences do not wrap the answer.
        (
            "```markdown\n# A\n```\n\ntext\n\n```mermaid\nflowchart TD\n```",
            "```markdown\n# A\n```\n\ntext\n\n```mermaid\nflowchart TD\n```",
        ),
        ("```mermaid\nflowchart TD\n  A --> B\n```", "```mermaid\nflowchart TD\n  A --> B\n```"),
    ],
)
def test_wrapping_markdown_fence_is_removed(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path, answer: str, content: str
) -> None:
    vision_server.script(VisionReply(content=answer))
    [document] = vision().convert(_source(docs / JPEG))
    assert document.content == content


def test_bare_model_without_endpoint_is_not_configured(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    with _extraction_failure() as caught:
        vision(vision_llm_api_base_url="").convert(_source(docs / JPEG))
    assert "the vision endpoint is not configured" in str(caught.value)
    assert "VISION_LLM_API_BASE_URL" in str(caught.value)


def test_model_with_a_non_provider_prefix_goes_to_the_endpoint(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    vision(vision_llm_model="google/gemma-3-27b-it").convert(_source(docs / JPEG))
    assert vision_server.requests[-1].json()["model"] == "google/gemma-3-27b-it"


def test_provider_prefixed_model_goes_through_that_provider(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    # hosted_vllm is a LiteLLM provider speaking the OpenAI protocol, so the stand-in can answer it.
    [document] = vision(vision_llm_model="hosted_vllm/gemma").convert(_source(docs / JPEG))
    request = vision_server.requests[-1]
    assert request.json()["model"] == "gemma"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert document.meta["vision_model"] == "hosted_vllm/gemma"


@pytest.mark.parametrize("model", ["gemma4-nvfp4", "hosted_vllm/gemma"])
@pytest.mark.parametrize("verify", [True, False])
def test_tls_verify_setting_reaches_the_http_client(
    make_test_settings: MakeSettings, docs: Path, model: str, verify: bool
) -> None:
    with ScriptedVisionServer(ssl_context=self_signed_context()) as server:
        settings = make_test_settings(
            vision_llm_api_base_url=server.base_url, vision_llm_model=model, vision_llm_tls_verify=verify
        )
        converter = VisionLlmConverter(settings)
        try:
            if verify:
                # Nobody trusts the stand-in's self-signed certificate.
                with _extraction_failure() as caught:
                    converter.convert(_source(docs / JPEG))
                assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
                assert server.requests == []
            else:
                [document] = converter.convert(_source(docs / JPEG))
                assert document.content == "# Vision answer\n\nimages: 1"
        finally:
            converter.close()


def test_describe_pages_adds_the_extra_context(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    converter = vision(vision_llm_language_hint="Danish")
    pages = converter.render(_source(docs / TWO_PAGES)).images
    labels = "Labels, verbatim:\n- Modtag ansøgning\n- Godkend?"
    answer = converter.describe_pages(pages, profile="diagram-topology", extra_context=labels)
    assert answer == "# Vision answer\n\nimages: 2"
    request = vision_server.requests[-1]
    assert prompt_text(request) == f"{prompt_for('diagram-topology', 'Danish')}\n\n{labels}"
    assert images(request) == pages


def test_encrypted_pdf_is_a_document_problem(
    vision: VisionFactory, vision_server: ScriptedVisionServer, docs: Path, tmp_path: Path
) -> None:
    writer = PdfWriter(clone_from=PdfReader(docs / "pdf/kreuzberg__searchable.pdf"))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    locked = tmp_path / "locked.pdf"
    writer.write(locked)
    with pytest.raises(ExtractionError) as caught:
        vision().convert(_source(locked))
    assert caught.value.status_code == 422
    assert caught.value.detail() == ENCRYPTED_REASON
    assert vision_server.requests == []


def test_format_without_pages_is_unsupported(vision: VisionFactory, docs: Path) -> None:
    with pytest.raises(ExtractionError) as caught:
        vision().convert(_source(docs / "md/unstructured__simple-table.md"))
    assert caught.value.status_code == 422
    assert caught.value.detail() == UNSUPPORTED_REASON


def test_registry_builds_the_engine_by_name(
    make_test_settings: MakeSettings, vision_server: ScriptedVisionServer, docs: Path
) -> None:
    registry = ConverterRegistry(make_test_settings(vision_llm_api_base_url=vision_server.base_url))
    engine = registry.get("vision-llm")
    assert engine.name == "vision-llm"
    [document] = engine.convert(_source(docs / JPEG))
    assert document.content == "# Vision answer\n\nimages: 1"
    registry.close()
