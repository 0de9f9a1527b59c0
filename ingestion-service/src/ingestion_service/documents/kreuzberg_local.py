"""Kreuzberg in-process (the default engine): Markdown with tables, metadata, languages, pages, OCR.

OCR runs only where it is needed: image files and PDFs with pages that lack a text layer (a
pypdfium2 survey decides before kreuzberg runs), each holding one of OCR_CONCURRENCY slots so a
batch of scans cannot take every core. A scan whose text layer is measurably garbage is OCR'd
again and the better reading kept (``text_quality``). Each OCR'd page's Document carries
Tesseract's word boxes (``ocr_words``) for the chunks' regions. Formats kreuzberg rejects (ODP) fall back
to Gotenberg when configured, else to the in-process OpenDocument reader; chart and drawing
text kreuzberg skips in DOCX/XLSX/PPTX is added from the package XML.
"""

from __future__ import annotations

import io
import logging
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from haystack import Document

from ingestion_service.documents import _errors, plain_text, tessdata
from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.docx_package import DOCX_MIME_TYPE, restore_dropped_paragraphs
from ingestion_service.documents.email_attachments import MAX_ATTACHMENT_DEPTH, document_attachments
from ingestion_service.documents.email_attachments import section as attachment_section
from ingestion_service.documents.languages import to_iso639_1
from ingestion_service.documents.ocr_words import OCR_WORDS_KEY, image_frame, image_frames, page_words, pdf_frames
from ingestion_service.documents.page_split import (
    PAGE_MARKER_FORMAT,
    Page,
    alnum_key,
    split_by_page_text,
    split_markers,
    strip_markers,
)
from ingestion_service.documents.pdf_survey import PdfSurvey, survey_pdf
from ingestion_service.documents.pdf_tables import with_pdf_tables
from ingestion_service.documents.pdfium_lock import PDFIUM_LOCK
from ingestion_service.documents.rendering import render_page
from ingestion_service.documents.renderings import rendering_path
from ingestion_service.documents.rtl_order import in_reading_order
from ingestion_service.documents.sniffing import inspect_source
from ingestion_service.documents.text_quality import word_quality
from ingestion_service.errors import (
    UNSUPPORTED_REASON,
    DocumentTooLargeError,
    ExtractionError,
    UnsupportedContentError,
)
from ingestion_service.run_control import checkpoint
from ingestion_service.settings import Settings

logger = logging.getLogger(__name__)

ENGINE = "kreuzberg"


LANGUAGE_MIN_CONFIDENCE = 0.1
# Garbage-text-layer rule (measured on the eval PDFs, see text_quality): a scan's text layer
# scoring below this is OCR'd again, and the OCR replaces it only when it reads clearly better.
GARBAGE_TEXT_BELOW = 0.97
MIN_OCR_GAIN = 0.01
# Tesseract reads best at about 300 DPI (kreuzberg's own target for scans).
OCR_RENDER_DPI = 300
# kreuzberg 4.10 refuses to decode an image above 64,000,000 pixels (an OCR failure, 500): below
# 8000 pixels a side, a page rendered for OCR stays within it (PDFium rounds each side up).
OCR_MAX_SIDE_PX = 7999
# Formats whose pages (or slides) are meaningful for citations.
# kreuzberg's OSError for a file it reads as text by its name that is not UTF-8.
_NOT_UTF8 = "did not contain valid UTF-8"
_PAGED_PREFIXES = ("application/pdf", "image/")
_PAGED_TYPES = frozenset(
    {
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.ms-powerpoint",
        "application/vnd.oasis.opendocument.presentation",
    }
)
_OOXML_TYPES = frozenset(
    {
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    }
)
_ODF_SUFFIXES = frozenset({".odt", ".ods", ".odp", ".odg"})
EMAIL_MIME_TYPE = "message/rfc822"
HTML_MIME_TYPE = "text/html"
PPTX_MIME_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
NOTES_HEADING = "### Notes"
# kreuzberg writes an HTML page's <head> metadata (title, canonical link, meta tags) as a YAML front
# matter block before the text; a lone "title:" line comes out as "---", a blank line and "## title: ...".
_FRONT_MATTER = re.compile(r"\A---\n(?:[^\n]*\n){0,400}?---[ \t]*(?:\n|\Z)")
_LONE_TITLE_MATTER = re.compile(r"\A---\n\n## [\w-]+: [^\n]*(?:\n|\Z)")


def strip_front_matter(content: str) -> str:
    """An HTML page's text without the metadata block kreuzberg puts first (its title is in the metadata)."""
    stripped = _FRONT_MATTER.sub("", content, count=1)
    if stripped == content:
        stripped = _LONE_TITLE_MATTER.sub("", content, count=1)
    return stripped.lstrip("\n")


def document_metadata(metadata: Any, languages: list[str] | None) -> dict[str, Any]:
    """title / authors / languages from a kreuzberg result (in-process or over HTTP)."""
    meta: dict[str, Any] = {}
    if isinstance(metadata, dict):
        title = metadata.get("title")
        if isinstance(title, str) and title.strip():
            meta["title"] = title.strip()
        authors = metadata.get("authors")
        if isinstance(authors, str):
            authors = [authors]
        if isinstance(authors, list):
            cleaned = [str(author).strip() for author in authors if str(author).strip()]
            if cleaned:
                meta["authors"] = cleaned
    codes = to_iso639_1(languages)
    if codes:
        meta["languages"] = codes
    return meta


def ocr_reading(result: Any, text_layer: Any) -> str:
    """A forced OCR's Markdown without the tables kreuzberg still detects in the PDF's text layer
    (the garbage the OCR replaces): those the text layer's own reading (``text_layer``) has too, so a
    table Tesseract found in the image stays. The Markdown escapes what a table's own Markdown does
    not (``\\*``, ``\\&``) and drops control characters, so tables and rows are matched by their
    letters and digits."""
    layer_tables = {alnum_key(table.markdown) for table in text_layer.tables or []}
    lines = str(result.content).split("\n")
    for table in result.tables or []:
        if alnum_key(table.markdown) not in layer_tables:
            continue
        rows = [alnum_key(row) for row in str(table.markdown).strip().split("\n")]
        plain = [alnum_key(line) for line in lines]
        start = next((at for at in range(len(lines)) if plain[at : at + len(rows)] == rows), None)
        if start is not None:
            del lines[start : start + len(rows)]
    return "\n".join(lines)


class KreuzbergConverter:
    """``kreuzberg.extract_file_sync`` with configurations built once at start-up."""

    name = ENGINE
    profiles: frozenset[str] = frozenset()

    def __init__(self, settings: Settings) -> None:
        import kreuzberg

        self._settings = settings
        self._ocr = tessdata.resolve(
            enabled=settings.enable_ocr, configured=settings.ocr_languages, extra_dirs=settings.tessdata_dirs
        )
        self._ocr_slots = threading.BoundedSemaphore(settings.ocr_concurrency)
        self._text_config = self._config(ocr=False, force=False)
        self._ocr_config = self._config(ocr=True, force=False) if self._ocr.enabled else None
        self._force_ocr_config = self._config(ocr=True, force=True) if self._ocr.enabled else None
        self._kreuzberg = kreuzberg

    @property
    def ocr(self) -> tessdata.OcrLanguages:
        """The resolved OCR set-up."""
        return self._ocr

    def _config(self, *, ocr: bool, force: bool) -> Any:
        import kreuzberg

        ocr_config = None
        if ocr:
            # kreuzberg's defaults already turn rotated pages upright (osd.traineddata). An explicit
            # ImagePreprocessingConfig (auto_rotate/deskew) corrupted the heap in kreuzberg 4.10
            # within a few scans (reproduced in a plain loop), so it is left at the default.
            ocr_config = kreuzberg.OcrConfig(
                backend="tesseract",
                language=self._ocr.tesseract_language,
                # Each word's box as Tesseract read it, for the chunks' regions (``ocr_words``).
                # kreuzberg 4.10's stub names an OcrElementConfig class it does not export; it takes a mapping.
                element_config={"include_elements": True, "min_level": "word"},  # type: ignore[arg-type]
            )
        return kreuzberg.ExtractionConfig(
            # The result cache writes to disk and could serve a stale extraction for a reused path.
            use_cache=False,
            output_format="markdown",  # tables come out as Markdown tables, headings as '#'
            ocr=ocr_config,
            force_ocr=force,
            images=kreuzberg.ImageExtractionConfig(extract_images=False),
            pdf_options=kreuzberg.PdfConfig(extract_metadata=True),
            # Per-page text (extract_pages) only without OCR: with OCR'd images, reading kreuzberg
            # 4.10's page list corrupted the heap (reproduced with a JPEG then a TIFF). OCR output
            # carries the page markers instead.
            pages=kreuzberg.PageConfig(
                extract_pages=not ocr, insert_page_markers=True, marker_format=PAGE_MARKER_FORMAT
            ),
            concurrency=kreuzberg.ConcurrencyConfig(max_threads=self._settings.ocr_threads) if ocr else None,
            # kreuzberg's default leaves out what it takes for running headers and footers; on the
            # eval PDFs that dropped body lines at page tops (a table caption, an author line, page
            # starts the page split needs), word recall 0.963 against 0.969 kept in (`benchmarks.pdf_text`).
            content_filter=kreuzberg.ContentFilterConfig(include_headers=True, include_footers=True),
            # One primary language: multi-language detection tags most long documents with
            # several spurious languages (measured on ../shared/eval/docs), which would make the
            # meta.languages filter match wrongly.
            # kreuzberg's default confidence bar left 12 of 30 Norwegian news passages without a
            # language; the language picks the chunk's stemmed BM25 field, so accept lower confidence.
            language_detection=kreuzberg.LanguageDetectionConfig(
                enabled=True, detect_multiple=False, min_confidence=LANGUAGE_MIN_CONFIDENCE
            ),
        )

    def _extract(self, path: Path, config: Any, *, ocr: bool) -> Any:
        return self._run(lambda: self._kreuzberg.extract_file_sync(str(path), config=config), ocr=ocr)

    def _extract_png(self, png: bytes) -> Any:
        """OCR one rendered page (a mixed PDF's page without a text layer)."""
        return self._run(
            lambda: self._kreuzberg.extract_bytes_sync(png, "image/png", config=self._ocr_config), ocr=True
        )

    def _run(self, extraction: Callable[[], Any], *, ocr: bool) -> Any:
        """One kreuzberg call (holding an OCR slot when it OCRs), its errors typed."""
        from kreuzberg.exceptions import (
            KreuzbergError,
            MissingDependencyError,
            OCRError,
            ParsingError,
            ValidationError,
        )

        try:
            if ocr:
                with self._ocr_slots:
                    return extraction()
            return extraction()
        except OCRError as exc:
            if self._ocr.enabled:
                raise _errors.engine_fault(ENGINE, f"OCR failed: {exc.message}") from exc
            raise _errors.needs_ocr(ENGINE, "image content needs OCR, which is disabled (ENABLE_OCR=false)") from exc
        except ParsingError as exc:
            raise _errors.unparseable(ENGINE, exc.message) from exc
        except ValidationError as exc:
            # kreuzberg reports an unreadable MIME type as a validation error naming the type.
            raise _errors.unsupported(ENGINE, f"unsupported format {exc.message}") from exc
        except MissingDependencyError as exc:
            raise _errors.engine_fault(ENGINE, exc.message) from exc
        except KreuzbergError as exc:
            raise _errors.engine_fault(ENGINE, f"{type(exc).__name__}: {exc.message}") from exc
        except OSError as exc:
            if _NOT_UTF8 in str(exc):
                # A name kreuzberg reads as source code (x.s, x.vb) on content that is not UTF-8 text.
                raise _errors.unparseable(
                    ENGINE, "the name's extension says text, but the content is not UTF-8"
                ) from exc
            raise

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:  # noqa: ARG002 - protocol signature; text engines take no profile
        return self._convert_at(source, depth=0)

    def _convert_at(self, source: SourceFile, *, depth: int) -> list[Document]:
        """``source``, an upload (``depth`` 0) or an e-mail attachment ``depth`` levels down."""
        mime = source.mime_type or ""
        if source.path.suffix.lower() in _ODF_SUFFIXES or Path(source.filename).suffix.lower() in _ODF_SUFFIXES:
            try:
                return self._convert(source, mime, depth=depth)
            except ExtractionError as exc:
                if exc.reason != UNSUPPORTED_REASON:
                    raise
                return self._opendocument_fallback(source, exc)
        return self._convert(source, mime, depth=depth)

    def _convert(self, source: SourceFile, mime: str, *, depth: int = 0) -> list[Document]:
        reading = plain_text.reading_for(source.filename, source.path)
        if reading is not None:
            return self._verbatim(source, reading)
        survey = survey_pdf(source.path, engine=ENGINE) if mime == "application/pdf" else None
        ocr_on = self._ocr_config is not None
        if not ocr_on and mime.startswith("image/"):
            # kreuzberg OCRs images even without an OCR config once language data is found.
            raise _errors.needs_ocr(ENGINE, "an image needs OCR, which is disabled (ENABLE_OCR=false)")
        ocr_meta: dict[str, Any] = {}
        blank_pages: list[int] = []
        if ocr_on and (mime.startswith("image/") or (survey is not None and survey.all_pages_need_ocr)):
            result = self._extract(source.path, self._ocr_config, ocr=True)
            ocr_meta = self._ocr_meta()
        else:
            result = self._extract(source.path, self._text_config, ocr=False)
            if survey is not None and survey.needs_ocr and ocr_on:
                # A mixed PDF: kreuzberg reads the text layer; only the pages without one are OCR'd.
                blank_pages = [index for index, page in enumerate(survey.pages) if not page.has_text]
            elif ocr_on and not strip_markers(result.content):
                # Nothing readable without OCR although the survey saw no scan (a format it does not survey).
                retried = self._extract(source.path, self._ocr_config, ocr=True)
                if strip_markers(retried.content):
                    result, ocr_meta = retried, self._ocr_meta()
        text_layer = result
        result, replaced = self._maybe_replace_text_layer(source, survey, result)
        content = result.content
        if replaced is not None:
            ocr_meta = {**self._ocr_meta(), **replaced}
            content = ocr_reading(result, text_layer)
        meta = document_metadata(result.metadata, result.detected_languages)
        meta["mime_type"] = result.mime_type
        meta.update(ocr_meta)
        if result.mime_type == DOCX_MIME_TYPE:
            content = self._restore_docx_paragraphs(source, content, meta)
        elif result.mime_type == EMAIL_MIME_TYPE:
            content = self._with_attachments(source, content, meta, depth=depth)
        extras, extras_error = self._office_extras(source, result.mime_type, content)
        if extras_error is not None:
            meta["office_extras_skipped"] = extras_error
        notes = self._speaker_notes(source, result.mime_type)
        if result.mime_type == HTML_MIME_TYPE:
            content = strip_front_matter(content)
        documents = self._documents(
            content, result.pages, meta, paged=self._paged(result.mime_type), extras=extras, notes=notes
        )
        if ocr_meta:
            documents = self._with_ocr_words(source.path, result, documents)
        if blank_pages:
            documents = self._with_ocr_pages(source.path, documents, blank_pages, meta)
        if survey is not None:
            documents = self._text_layer_fixes(source, documents, survey, ocr=bool(ocr_meta))
        return documents

    @staticmethod
    def _text_layer_fixes(
        source: SourceFile, documents: list[Document], survey: PdfSurvey, *, ocr: bool
    ) -> list[Document]:
        """A PDF's pages with what kreuzberg misread in its text layer read again."""
        if not ocr:
            # Right-to-left lines kreuzberg wrote backwards, read again from PDFium.
            documents = in_reading_order(source.path, documents)
        # Ruled tables kreuzberg flattened into runs of words, on the text-layer pages only.
        return with_pdf_tables(source.path, documents, survey, file_name=source.filename)

    def _verbatim(self, source: SourceFile, reading: plain_text.Reading) -> list[Document]:
        """Code, configuration, logs: the lines as they are; kreuzberg's reading gives the language."""
        result = self._extract(source.path, self._text_config, ocr=False)
        meta = document_metadata(result.metadata, result.detected_languages)
        meta["mime_type"] = result.mime_type
        meta["reader"] = plain_text.READER
        return [Document(content=plain_text.read(source.path, reading), meta=meta)]

    def _ocr_meta(self) -> dict[str, Any]:
        return {"ocr": True, "ocr_languages": self._ocr.tesseract_language}

    @staticmethod
    def _with_ocr_words(path: Path, result: Any, documents: list[Document]) -> list[Document]:
        """Each OCR'd page's words with their boxes on its Document (``ocr_words``), for ChunkRegions."""
        is_pdf = result.mime_type == "application/pdf"
        words = page_words(result.ocr_elements, pdf_frames(path) if is_pdf else image_frames(path))
        for document in documents:
            page = document.meta.get("page")
            if isinstance(page, int) and page in words:
                document.meta[OCR_WORDS_KEY] = words[page]
        return documents

    def _with_ocr_pages(
        self, path: Path, documents: list[Document], page_numbers: list[int], meta: dict[str, Any]
    ) -> list[Document]:
        """Insert OCR'd text for the pages of a mixed PDF that have no text layer."""
        import pypdfium2 as pdfium

        added: list[Document] = []
        with PDFIUM_LOCK:
            pdf = pdfium.PdfDocument(str(path))
        try:
            for number in page_numbers:
                # Each page costs a render and an OCR run: a long PDF of text-less pages would hold
                # the OCR slot far past INGEST_TIMEOUT_SECONDS.
                checkpoint()
                with PDFIUM_LOCK:
                    try:
                        page = pdf[number]
                        try:
                            # Capped as the vision engines' pages are: a poster page at 300 DPI is gigabytes.
                            image = render_page(page, dpi=OCR_RENDER_DPI, max_side=OCR_MAX_SIDE_PX)
                        finally:
                            page.close()
                    except pdfium.PdfiumError as exc:
                        raise _errors.unparseable(ENGINE, f"PDFium cannot render page {number + 1}: {exc}") from exc
                buffer = io.BytesIO()
                image.save(buffer, format="PNG")
                result = self._extract_png(buffer.getvalue())
                text = strip_markers(result.content)
                if text:
                    page_meta = {**meta, **self._ocr_meta(), "page": number}
                    # The PNG is the page as shown: its words need no turning.
                    words = page_words(result.ocr_elements, {0: image_frame(*image.size)}).get(0)
                    if words is not None:
                        page_meta[OCR_WORDS_KEY] = words
                    added.append(Document(content=text, meta=page_meta))
        finally:
            with PDFIUM_LOCK:
                pdf.close()
        if not added:
            return documents
        if len(documents) == 1 and "page" not in documents[0].meta:
            documents = [Document(content=documents[0].content, meta={**documents[0].meta, "page": 0})]
        return sorted([*documents, *added], key=lambda document: int(document.meta["page"]))

    def _maybe_replace_text_layer(
        self, source: SourceFile, survey: PdfSurvey | None, result: Any
    ) -> tuple[Any, dict[str, Any] | None]:
        if (
            survey is None
            or self._force_ocr_config is None
            or not self._settings.ocr_garbage_text_layer
            or not survey.scanned_with_text_layer
        ):
            return result, None
        layer_quality = word_quality(strip_markers(result.content))
        if layer_quality >= GARBAGE_TEXT_BELOW:
            return result, None
        ocr_result = self._extract(source.path, self._force_ocr_config, ocr=True)
        ocr_quality = word_quality(strip_markers(ocr_reading(ocr_result, result)))
        logger.info(
            "scan with a text layer: quality %.3f, OCR %.3f",
            layer_quality,
            ocr_quality,
            extra={"file_name": source.filename, "text_layer_quality": layer_quality, "ocr_quality": ocr_quality},
        )
        if ocr_quality < layer_quality + MIN_OCR_GAIN:
            return result, None
        return ocr_result, {
            "text_layer": "replaced-by-ocr",
            "text_layer_quality": round(layer_quality, 3),
            "ocr_quality": round(ocr_quality, 3),
        }

    @staticmethod
    def _paged(mime: str) -> bool:
        return mime.startswith(_PAGED_PREFIXES) or mime in _PAGED_TYPES

    def _office_extras(self, source: SourceFile, mime: str, content: str) -> tuple[str, str | None]:
        """Chart/drawing/SmartArt Markdown kreuzberg skipped, and why it could not be read (if so)."""
        if mime not in _OOXML_TYPES:
            return "", None
        from ingestion_service.documents.office_extras import (
            OfficeExtrasError,
            dedupe_against,
            office_extra_markdown,
        )

        try:
            return dedupe_against(content, office_extra_markdown(source.path, mime)), None
        except OfficeExtrasError as exc:
            # The main text is already read; a damaged chart part costs only the chart's text, and
            # the chunks say so (meta.office_extras_skipped) besides the log line.
            logger.warning(
                "chart and drawing text skipped: %s", exc, extra={"file_name": source.filename, "error": str(exc)}
            )
            return "", str(exc)

    @staticmethod
    def _speaker_notes(source: SourceFile, mime: str) -> dict[int, str]:
        """A PPTX deck's notes by slide (kreuzberg leaves them out); a damaged notes part costs only its notes."""
        if mime != PPTX_MIME_TYPE:
            return {}
        from ingestion_service.documents.office_extras import OfficeExtrasError
        from ingestion_service.documents.slide_notes import speaker_notes

        try:
            return speaker_notes(source.path)
        except OfficeExtrasError as exc:
            logger.warning("speaker notes skipped: %s", exc, extra={"file_name": source.filename, "error": str(exc)})
            return {}

    def _with_attachments(self, source: SourceFile, content: str, meta: dict[str, Any], *, depth: int) -> str:
        """The message, then the text of each document attached to it (``email_attachments``).

        Each attachment passes the same content checks as an upload (executables refused, archive
        limits) and is read by this engine; one that cannot be read, or holds no text, is named in
        ``meta.email_attachments_skipped`` and costs only its own text. Attached messages are read
        down to MAX_ATTACHMENT_DEPTH levels; what their own attachments skipped is named here too,
        under ``<attachment> > ``.
        """
        sections: list[str] = []
        read: list[str] = []
        skipped: list[str] = []
        level = depth + 1
        for index, attachment in enumerate(document_attachments(source.path, engine=ENGINE)):
            if level > MAX_ATTACHMENT_DEPTH:
                skipped.append(f"{attachment.name}: attached more than {MAX_ATTACHMENT_DEPTH} levels deep")
                continue
            checkpoint()
            # A fresh directory and a fixed name: a name built on the message's own grew with every
            # nesting level until the file system refused it.
            with tempfile.TemporaryDirectory(prefix="attachment-", dir=source.path.parent) as staging:
                staged = Path(staging) / f"attachment-{index}{attachment.suffix}"
                staged.write_bytes(attachment.data)
                try:
                    inspected = inspect_source(staged, attachment.name, self._settings)
                    documents = self._convert_at(inspected, depth=level)
                except (ExtractionError, UnsupportedContentError, DocumentTooLargeError) as exc:
                    skipped.append(f"{attachment.name}: {exc}")
                    continue
            # An attached message's own skips would otherwise vanish with its metadata.
            nested = documents[0].meta.get("email_attachments_skipped", []) if documents else []
            skipped.extend(f"{attachment.name} > {entry}" for entry in nested)
            text = "\n\n".join(strip_markers(document.content or "") for document in documents).strip()
            if text:
                sections.append(attachment_section(attachment.name, text))
                read.append(attachment.name)
            else:
                skipped.append(f"{attachment.name}: no extractable text")
        if read:
            meta["email_attachments"] = read
        if skipped:
            meta["email_attachments_skipped"] = skipped
        return "\n\n".join([content.rstrip(), *sections]) if sections else content

    @staticmethod
    def _restore_docx_paragraphs(source: SourceFile, content: str, meta: dict[str, Any]) -> str:
        """kreuzberg's DOCX Markdown with the paragraphs it left out put back (``docx_package``)."""
        try:
            restored, count = restore_dropped_paragraphs(source.path, content)
        except (ExtractionError, DocumentTooLargeError) as exc:
            # kreuzberg read the file; the package reader's refusal costs only the left-out paragraphs.
            logger.warning("left-out DOCX paragraphs not restored: %s", exc, extra={"file_name": source.filename})
            meta["docx_paragraphs_restore_skipped"] = str(exc)
            return content
        if count:
            meta["docx_paragraphs_restored"] = count
        return restored

    @staticmethod
    def _documents(
        content: str,
        result_pages: Any,
        meta: dict[str, Any],
        *,
        paged: bool,
        extras: str = "",
        notes: dict[int, str] | None = None,
    ) -> list[Document]:
        pages: list[Page] | None = None
        if paged:
            pages = split_markers(content)
            if pages is None:
                page_texts = [str(page.get("content") or "") for page in (result_pages or [])]
                pages = split_by_page_text(content, page_texts)
        if not pages:
            text = strip_markers(content)
            if extras:
                text = f"{text}\n\n{extras}".strip()
            return [Document(content=text, meta=meta)]
        if notes:
            # Each slide's notes after its own text, as the OpenDocument reader writes them.
            pages = [
                Page(page.number, f"{page.markdown}\n\n{NOTES_HEADING}\n\n{notes[page.number]}")
                if page.number in notes
                else page
                for page in pages
            ]
        if extras:
            last = pages[-1]
            pages[-1] = Page(last.number, f"{last.markdown}\n\n{extras}")
        return [Document(content=page.markdown, meta={**meta, "page": page.number}) for page in pages]

    def _opendocument_fallback(self, source: SourceFile, rejected: ExtractionError) -> list[Document]:
        """An OpenDocument file kreuzberg rejects: Gotenberg to PDF when configured, else read in-process."""
        if self._settings.gotenberg_url:
            from ingestion_service.adapters.gotenberg import GotenbergClient

            client = GotenbergClient(self._settings)
            try:
                pdf = client.to_pdf(source.path, source.filename)
            finally:
                client.close()
            # Kept where the page rendering goes: ChunkRegions places the chunks on it, and it is kept
            # with the original, so the document is converted once.
            pdf_path = rendering_path(source.path)
            pdf_path.write_bytes(pdf)
            documents = self._convert(SourceFile(pdf_path, source.filename, "application/pdf"), "application/pdf")
            for document in documents:
                document.meta["converted_by"] = "gotenberg"
            return documents
        from ingestion_service.documents.opendocument import read_opendocument, read_opendocument_title

        pages = read_opendocument(source.path)
        if not pages:
            raise rejected
        meta: dict[str, Any] = {
            "mime_type": source.mime_type or "application/vnd.oasis.opendocument",
            "reader": "opendocument",
        }
        title = read_opendocument_title(source.path)
        if title:
            meta["title"] = title
        # The language as kreuzberg would have detected it (it picks the chunks' stemmed BM25 field).
        text = "\n\n".join(page.markdown for page in pages).encode()
        detected = self._run(
            lambda: self._kreuzberg.extract_bytes_sync(text, "text/plain", config=self._text_config), ocr=False
        )
        meta.update(document_metadata(None, detected.detected_languages))
        paged = len(pages) > 1 or source.path.suffix.lower() == ".odp"
        return [
            Document(content=page.markdown, meta={**meta, "page": page.number} if paged else dict(meta))
            for page in pages
            if page.markdown.strip()
        ]
