"""Chunk regions benchmark: do a chunk's ``meta.regions`` boxes sit on its text, and only there?

    python -m benchmarks.regions [--docs-dir ../shared/eval/docs] [--out PATH] [--store DIR]

Every PDF and image (``pdf/``, ``jpg/``, ``png/``, ``tif/``) under ``<docs-dir>`` is ingested
through a real ``rag dev`` stack (with ENABLE_INSPECTION_API, on an embedded store in a temporary
directory removed afterwards, unless ``--store`` names one to keep and reuse), and its stored
chunks are read back with their meta through GET /api/v1/documents/{file_id}/chunks.

Ground truth, independent of the service's geometry code:

* A text-layer chunk: pdfplumber's (pdfminer's) characters, independent of PDFium. The chunk's
  page (``meta.page``, 0-based) is opened with pdfplumber; duplicate overprinted characters (fake
  bold) are dropped (``dedupe_chars``). A char's box (x0, top, x1, bottom) is in the page's
  displayed space (pdfminer applies /Rotate clockwise), origin top-left over ``page.bbox`` (the
  crop box), and is taken as fractions of it.
* An OCR'd chunk (``meta.ocr``: a scan, an image, a replaced text layer): Tesseract's words,
  read here by kreuzberg on the page rendered anew (a PDF page unturned, then its boxes turned
  with its /Rotate; an image frame as it is), with its longer side OCR_SIDE_PX pixels, a size
  kreuzberg reads as it is (checked: a word outside the image stops the run). Each word becomes
  one char per letter, the word's box cut into equal slices.
* Page and chunk are reduced to their case-folded letters and digits (NFKC first: ligatures and
  Arabic presentation forms fold), the page in content-stream (pdfminer) or Tesseract order.
  ``difflib.SequenceMatcher`` (no autojunk) aligns the two sequences; matching blocks of >= 4
  characters are the chunk's ground-truth characters on the page. Characters in no such block are
  not counted, on either side. Three such in-order passes are made, each on what the earlier ones
  left unmatched (text the page holds in another order, e.g. two columns). A chunk with
  right-to-left letters is aligned with each line's characters reversed (pdfminer gives such lines
  in visual order). Chunks come in reading order: of the copies a page holds of a chunk's text (a
  repeated paragraph), the chunk's is the first one from where the previous chunk of the page
  starts that holds at least 90% of the best match (see ``matched_positions``).

Metrics, per chunk that says ``geometry: text_layer`` or ``geometry: ocr``:

* coverage: the share of its ground-truth characters whose box centre falls inside one of its
  recorded boxes grown by 0.002 of the page on every side;
* empty: the share of the recorded boxes' area (their union, rasterised at 2 cells per point) not
  covered by the chunk's text footprint. The footprint is one rectangle per run of consecutive
  matched characters (consecutive in the page's alnum sequence) on one line: from the run's first to
  its last character, spanning the chars' top to bottom, so word spaces count as text, as a highlight
  shows them. A run is cut where the next char's vertical centre leaves the run's height or it
  steps back left (back right in a right-to-left chunk's reversed lines).

A chunk without regions is listed with a reason: ``no page``, ``no text layer`` (pdfplumber finds
no chars on the page), ``no words on the page`` (Tesseract finds none), ``words not found`` or
``ocr words not found`` (the service did not place it; the share of its alnum chars the ground
truth finds is kept). Every placed chunk's ``regions[0].page`` must equal its ``meta.page``
(counted as page mismatches). Text-layer and OCR'd chunks are summed up apart. Results go to
benchmarks/results/regions-<stamp>.json and a Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import difflib
import json
import math
import os
import statistics
import sys
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np

from benchmarks.quality import RESULTS_DIR, machine
from benchmarks.realdocs import DEFAULT_DOCS_DIR, doc_file_id
from benchmarks.realdocs.__main__ import INSPECTION_ENV, ingest_files, stored_chunks
from benchmarks.stack import Stack, StackError, attached_stack, running_stack
from ingestion_service.documents.geometry import turned

Box = tuple[float, float, float, float]

MIN_BLOCK = 4  # chars: shorter matching blocks are taken for chance
PASSES = 3  # in-order alignments per chunk (text out of page order)
NEAR_SHARE = 0.9  # the copy after the previous chunk is the chunk's when it holds this share of the best
ANCHOR_CHARS = 16  # chars of the chunk looked up to find the copies a page holds of it
TOLERANCE = 0.002  # of the page, around each recorded box, for the coverage test
CELLS_PER_POINT = 2  # raster resolution of the empty-share test
TARGET_COVERAGE = 0.98
TARGET_OCR_COVERAGE = 0.9
TARGET_DOC_COVERAGE = 0.9
TARGET_EMPTY = 0.15
OCR_SIDE_PX = 4096  # the truth's own page images: kreuzberg OCRs an image this size as it is
# ``meta.geometry`` values (the service's contract, spelled out here, not imported).
TEXT_LAYER = "text_layer"
OCR = "ocr"
OCR_NOT_FOUND = "ocr words not found"
# Folders of ../shared/eval/docs measured here, and their files.
FORMATS = {"pdf": (".pdf",), "jpg": (".jpg", ".jpeg"), "png": (".png",), "tif": (".tif", ".tiff")}


# --- ground truth ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Char:
    """One page char: its box as fractions of the displayed page (top-left origin) and its text."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def centre(self) -> tuple[float, float]:
        return ((self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2)


def alnum(text: str) -> str:
    """``text`` case-folded, letters and digits only, compatibility forms folded (NFKC: ligatures,
    Arabic presentation forms)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def page_chars(raw: Sequence[dict[str, Any]], bbox: Sequence[float]) -> list[Char]:
    """pdfplumber chars (``x0``, ``x1``, ``top``, ``bottom``, ``text``) as fractions of ``bbox``."""
    left, top, right, bottom = (float(value) for value in bbox)
    width, height = right - left, bottom - top
    if width <= 0 or height <= 0:
        return []
    return [
        Char(
            str(char.get("text") or ""),
            (float(char["x0"]) - left) / width,
            (float(char["top"]) - top) / height,
            (float(char["x1"]) - left) / width,
            (float(char["bottom"]) - top) / height,
        )
        for char in raw
    ]


def alnum_sequence(chars: Sequence[Char]) -> tuple[str, list[int]]:
    """The page's alnum string and, per position, the index of the char it comes from."""
    letters: list[str] = []
    owners: list[int] = []
    for index, char in enumerate(chars):
        for letter in alnum(char.text):
            letters.append(letter)
            owners.append(index)
    return "".join(letters), owners


def matched_positions(page_seq: str, chunk_text: str, min_block: int = MIN_BLOCK, after: int = 0) -> list[int]:
    """Sorted positions in ``page_seq`` of the chunk's alnum chars, from matching blocks >= ``min_block``.

    Up to PASSES in-order alignments, each on what the previous ones left unmatched on both sides,
    so text the page holds in another order (two columns read the other way) is found too.
    Chunks come in reading order, and ``after`` is where the previous chunk of the page starts
    (+1): of the copies the page holds of the chunk's text (a repeated paragraph), the chunk's is
    the first from there that holds at least NEAR_SHARE of the best match; the page from ``after``
    on, then the whole page, when no copy does.
    """
    wanted = alnum(chunk_text)
    if not wanted or not page_seq:
        return []
    found = _aligned(page_seq, wanted, min_block)
    if 0 < after < len(page_seq):
        tail = [after + position for position in _aligned(page_seq[after:], wanted, min_block)]
        if len(tail) >= NEAR_SHARE * len(found):
            found = tail
    copies = [
        [start + position for position in _aligned(page_seq[start:end], wanted, min_block)]
        for start, end in _copies(page_seq, wanted, after)
    ]
    best = max([len(found), *(len(copy) for copy in copies)])
    chosen = next((copy for copy in copies if copy and len(copy) >= NEAR_SHARE * best), found)
    return sorted(chosen)


def _copies(page_seq: str, wanted: str, after: int) -> list[tuple[int, int]]:
    """Spans of ``page_seq`` from ``after`` on, in page order, each around one place where the first
    ANCHOR_CHARS-long piece of the chunk that the page holds at all recurs."""
    slack = len(wanted) // 10 + ANCHOR_CHARS
    for offset in range(0, max(1, len(wanted) - ANCHOR_CHARS + 1), ANCHOR_CHARS):
        anchor = wanted[offset : offset + ANCHOR_CHARS]
        places: list[int] = []
        at = page_seq.find(anchor, after)
        while at >= 0:
            places.append(at)
            at = page_seq.find(anchor, at + 1)
        if places:
            spans = [(max(after, place - offset - slack), place - offset + len(wanted) + slack) for place in places]
            return spans if len(spans) > 1 else []
    return []


def _aligned(page_seq: str, wanted: str, min_block: int) -> list[int]:
    page = list(page_seq)
    chunk = list(wanted)
    positions: list[int] = []
    for _ in range(PASSES):
        matcher = difflib.SequenceMatcher(None, page, chunk, autojunk=False)
        blocks = [block for block in matcher.get_matching_blocks() if block.size >= min_block]
        if not blocks:
            break
        for block in blocks:
            for offset in range(block.size):
                positions.append(block.a + offset)
                page[block.a + offset] = "\x00"
                chunk[block.b + offset] = "\x01"
    return positions


@dataclass
class Truth:
    """The chunk's ground-truth chars (distinct indexes into the page's chars) and its footprint."""

    chars: list[int]
    footprint: list[Box]
    positions: list[int] = field(default_factory=list)  # alnum positions, for the next chunk's ``after``


def ground_truth(chars: Sequence[Char], chunk_text: str, after: int = 0, *, right_to_left: bool = False) -> Truth:
    """The chunk's chars on the page; ``after``: where the previous chunk of the page starts, +1
    (see :func:`matched_positions`); ``right_to_left``: ``chars`` run right to left on a line."""
    page_seq, owners = alnum_sequence(chars)
    positions = matched_positions(page_seq, chunk_text, after=after)
    indexes: list[int] = []
    for position in positions:
        owner = owners[position]
        if not indexes or indexes[-1] != owner:
            indexes.append(owner)
    return Truth(sorted(set(indexes)), footprint(chars, positions, owners, right_to_left=right_to_left), positions)


def footprint(
    chars: Sequence[Char], positions: Sequence[int], owners: Sequence[int], *, right_to_left: bool = False
) -> list[Box]:
    """One rectangle per run of consecutive matched alnum positions on one line (read right to
    left when ``right_to_left``: a run is cut where it steps back right)."""
    boxes: list[list[float]] = []
    previous: int | None = None
    for position in positions:
        char = chars[owners[position]]
        if boxes and previous is not None and position == previous + 1:
            line = boxes[-1]
            middle = (char.y0 + char.y1) / 2
            slack = (line[3] - line[1]) * 0.5
            onward = char.x1 <= line[2] + slack if right_to_left else char.x0 >= line[0] - slack
            if line[1] <= middle <= line[3] and onward:
                line[0], line[1] = min(line[0], char.x0), min(line[1], char.y0)
                line[2], line[3] = max(line[2], char.x1), max(line[3], char.y1)
                previous = position
                continue
        boxes.append([char.x0, char.y0, char.x1, char.y1])
        previous = position
    return [(b[0], b[1], b[2], b[3]) for b in boxes]


def is_rtl(text: str) -> bool:
    """Whether ``text`` holds right-to-left letters (Arabic, Hebrew)."""
    return any(unicodedata.bidirectional(char) in ("R", "AL") for char in text)


def reversed_lines(chars: Sequence[Char]) -> list[int]:
    """Indexes of ``chars`` with each line's (a run of chars at one height) in the other order."""
    order: list[int] = []
    line: list[int] = []
    for index, char in enumerate(chars):
        if line:
            last = chars[line[-1]]
            if not last.y0 <= (char.y0 + char.y1) / 2 <= last.y1:
                order.extend(reversed(line))
                line = []
        line.append(index)
    order.extend(reversed(line))
    return order


# --- metrics -----------------------------------------------------------------------------------


def inside(point: tuple[float, float], box: Sequence[float], tolerance: float = TOLERANCE) -> bool:
    x, y = point
    return box[0] - tolerance <= x <= box[2] + tolerance and box[1] - tolerance <= y <= box[3] + tolerance


def coverage(chars: Sequence[Char], boxes: Sequence[Sequence[float]], tolerance: float = TOLERANCE) -> float | None:
    """The share of ``chars`` whose centre lies in one of ``boxes`` (None for no chars)."""
    if not chars:
        return None
    hits = sum(1 for char in chars if any(inside(char.centre, box, tolerance) for box in boxes))
    return hits / len(chars)


def _raster(boxes: Sequence[Sequence[float]], columns: int, rows: int) -> np.ndarray[Any, np.dtype[np.bool_]]:
    grid = np.zeros((rows, columns), dtype=bool)
    for x0, y0, x1, y1 in boxes:
        c0, c1 = max(0, round(x0 * columns)), min(columns, round(x1 * columns))
        r0, r1 = max(0, round(y0 * rows)), min(rows, round(y1 * rows))
        if c1 > c0 and r1 > r0:
            grid[r0:r1, c0:c1] = True
    return grid


def empty_share(
    boxes: Sequence[Sequence[float]],
    text: Sequence[Sequence[float]],
    page_size: tuple[float, float],
    cells_per_point: int = CELLS_PER_POINT,
) -> float | None:
    """The share of the union of ``boxes`` not covered by ``text`` (None when the boxes have no area)."""
    columns = max(1, math.ceil(page_size[0] * cells_per_point))
    rows = max(1, math.ceil(page_size[1] * cells_per_point))
    recorded = _raster(boxes, columns, rows)
    area = int(recorded.sum())
    if area == 0:
        return None
    covered = _raster(text, columns, rows)
    return int((recorded & ~covered).sum()) / area


# --- ground truth on scans: Tesseract's words on a page rendered here -----------------------------


def word_chars(words: Sequence[tuple[str, Box]], rotation: int = 0) -> list[Char]:
    """One Char per character of each OCR word (boxes in fractions of the unturned image): the
    word's box cut into equal slices along its line, then turned with the page."""
    chars: list[Char] = []
    for text, (x0, y0, x1, y1) in words:
        step = (x1 - x0) / max(1, len(text))
        for index, letter in enumerate(text):
            chars.append(Char(letter, *turned((x0 + index * step, y0, x0 + (index + 1) * step, y1), rotation)))
    return chars


def ocr_words(png: bytes, size: tuple[int, int], language: str) -> list[tuple[str, Box]]:
    """Tesseract's words (through kreuzberg) on an image whose longer side is OCR_SIDE_PX, which
    kreuzberg reads as it is, as fractions of it."""
    import kreuzberg

    config = kreuzberg.ExtractionConfig(
        use_cache=False,
        ocr=kreuzberg.OcrConfig(
            backend="tesseract",
            language=language,
            element_config={"include_elements": True, "min_level": "word"},  # type: ignore[arg-type]  # a mapping in kreuzberg 4.10
        ),
    )
    result = kreuzberg.extract_bytes_sync(png, "image/png", config=config)
    width, height = size
    words: list[tuple[str, Box]] = []
    for element in result.ocr_elements or []:
        geometry: dict[str, Any] = dict(element.get("geometry") or {})
        text = str(element.get("text") or "")
        if element.get("level") != "word" or geometry.get("type") != "rectangle" or not text.strip():
            continue
        left, top = float(geometry["left"]), float(geometry["top"])
        right, bottom = left + float(geometry["width"]), top + float(geometry["height"])
        if right > width * 1.01 or bottom > height * 1.01:
            raise RuntimeError(f"OCR word {text!r} lies outside the {width}x{height} image: kreuzberg rescaled it")
        words.append((text, (left / width, top / height, right / width, bottom / height)))
    return words


class OcrTruth:
    """The words Tesseract reads on each page of a scan (PDF page or image frame), rendered here
    with its longer side OCR_SIDE_PX pixels, read once each."""

    def __init__(self, path: Path, language: str) -> None:
        self._path = path
        self._language = language
        self._pages: dict[int, tuple[list[Char], tuple[float, float]]] = {}
        self._is_pdf = path.read_bytes()[:1024].lstrip().startswith(b"%PDF-")

    def page(self, number: int) -> tuple[list[Char], tuple[float, float]]:
        if number not in self._pages:
            self._pages[number] = self._read(number)
        return self._pages[number]

    def _read(self, number: int) -> tuple[list[Char], tuple[float, float]]:
        import io

        if self._is_pdf:
            import pypdfium2 as pdfium

            document = pdfium.PdfDocument(str(self._path))
            try:
                if not 0 <= number < len(document):
                    return [], (1.0, 1.0)
                page = document[number]
                rotation = page.get_rotation()
                shown = page.get_size()
                left, bottom, right, top = page.get_cropbox()
                # Unturned, as the page's scan lies: Tesseract reads it upright.
                scale = OCR_SIDE_PX / max(right - left, top - bottom)
                image = page.render(scale=scale, rotation=(360 - rotation) % 360).to_pil().convert("RGB")
            finally:
                document.close()
        else:
            from PIL import Image

            with Image.open(self._path) as opened:
                if number >= int(getattr(opened, "n_frames", 1)):
                    return [], (1.0, 1.0)
                opened.seek(number)
                frame = opened.convert("RGB")
            rotation, shown = 0, (float(frame.width), float(frame.height))
            factor = OCR_SIDE_PX / max(frame.size)
            image = frame.resize((round(frame.width * factor), round(frame.height * factor)), Image.Resampling.LANCZOS)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        words = ocr_words(buffer.getvalue(), image.size, self._language)
        return word_chars(words, rotation), (float(shown[0]), float(shown[1]))


# --- per chunk and per document ----------------------------------------------------------------


class PageTruth(Protocol):
    def page(self, number: int) -> tuple[list[Char], tuple[float, float]]: ...


@dataclass
class ChunkResult:
    split: int
    page: int | None
    placed: bool
    geometry: str = "none"
    reason: str | None = None
    coverage: float | None = None
    empty: float | None = None
    truth_chars: int = 0
    boxes: int = 0
    page_mismatch: bool = False
    found_share: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {key: (round(value, 4) if isinstance(value, float) else value) for key, value in vars(self).items()}


def _mean(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.fmean(present) if present else None


@dataclass
class DocResult:
    path: str
    pages: int
    chunks: list[ChunkResult] = field(default_factory=list)
    error: str | None = None

    @property
    def placed(self) -> list[ChunkResult]:
        return [chunk for chunk in self.chunks if chunk.placed]

    @property
    def measured(self) -> list[ChunkResult]:
        return [chunk for chunk in self.placed if chunk.coverage is not None]

    @property
    def scan(self) -> bool:
        """Every chunk OCR'd (a scan or an image), so measured against Tesseract's words."""
        return bool(self.chunks) and all(
            chunk.geometry == OCR or chunk.reason == OCR_NOT_FOUND for chunk in self.chunks
        )

    def of(self, geometry: str) -> list[ChunkResult]:
        return [chunk for chunk in self.measured if chunk.geometry == geometry]

    def reasons(self) -> dict[str, int]:
        return dict(Counter(chunk.reason or "?" for chunk in self.chunks if not chunk.placed))

    def mean_coverage(self) -> float | None:
        return _mean([c.coverage for c in self.measured])

    def min_coverage(self) -> float | None:
        values = [c.coverage for c in self.measured if c.coverage is not None]
        return min(values) if values else None

    def mean_empty(self) -> float | None:
        return _mean([c.empty for c in self.placed])

    def as_dict(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "path": self.path,
            "pages": self.pages,
            "chunks": len(self.chunks),
            "placed": len(self.placed),
            "measured": len(self.measured),
            "not_placed": self.reasons(),
            "scan": self.scan,
            "mean_coverage": r(self.mean_coverage()),
            "min_coverage": r(self.min_coverage()),
            "mean_empty": r(self.mean_empty()),
            "page_mismatches": sum(1 for c in self.chunks if c.page_mismatch),
            "error": self.error,
            "per_chunk": [chunk.as_dict() for chunk in self.chunks],
        }


class PdfTruth:
    """pdfplumber's chars of one PDF's pages, read once each."""

    def __init__(self, path: Path) -> None:
        import pdfplumber

        self._pdf = pdfplumber.open(str(path))
        self._pages: dict[int, tuple[list[Char], tuple[float, float]]] = {}

    @property
    def page_count(self) -> int:
        return len(self._pdf.pages)

    def page(self, number: int) -> tuple[list[Char], tuple[float, float]]:
        if number not in self._pages:
            if not 0 <= number < len(self._pdf.pages):
                self._pages[number] = ([], (1.0, 1.0))
            else:
                page = self._pdf.pages[number]
                raw = page.dedupe_chars().chars
                self._pages[number] = (page_chars(raw, page.bbox), (float(page.width), float(page.height)))
        return self._pages[number]

    def close(self) -> None:
        self._pdf.close()


def measure_chunk(
    split: int, content: str, meta: dict[str, Any], truth: PageTruth, after: dict[int, int] | None = None
) -> ChunkResult:
    """One chunk's result against ``truth`` (the text layer's, or Tesseract's words for an OCR'd
    chunk); ``after`` (page -> where the previous chunk's truth starts, +1) is read and updated."""
    page = meta.get("page")
    page_no = page if isinstance(page, int) and not isinstance(page, bool) else None
    geometry = str(meta.get("geometry") or "none")
    result = ChunkResult(split=split, page=page_no, placed=geometry in (TEXT_LAYER, OCR), geometry=geometry)
    if page_no is None:
        result.reason = "no page"
        return result
    chars, size = truth.page(page_no)
    starts = after if after is not None else {}
    if is_rtl(content):
        # pdfminer gives right-to-left script in visual order (each line's letters reversed); the
        # chunk holds it in logical order, so its lines are read the other way too.
        order = reversed_lines(chars)
        turned = ground_truth([chars[i] for i in order], content, starts.get(-page_no - 1, 0), right_to_left=True)
        if turned.positions:
            starts[-page_no - 1] = turned.positions[0] + 1
        gt = Truth(sorted(order[i] for i in turned.chars), turned.footprint, turned.positions)
    else:
        gt = ground_truth(chars, content, starts.get(page_no, 0))
        if gt.positions:
            starts[page_no] = gt.positions[0] + 1
    if not result.placed:
        if not chars:
            result.reason = "no words on the page" if meta.get("ocr") else "no text layer"
        else:
            result.reason = OCR_NOT_FOUND if meta.get("ocr") else "words not found"
            wanted = alnum(content)
            result.found_share = len(gt.positions) / len(wanted) if wanted else 0.0
        return result
    regions = meta.get("regions") or []
    boxes: list[list[float]] = []
    for region in regions:
        if region.get("page") != page_no:
            result.page_mismatch = True
        boxes.extend([float(v) for v in box] for box in region.get("boxes") or [])
    if len(regions) != 1:
        result.page_mismatch = result.page_mismatch or not regions
    result.boxes = len(boxes)
    result.truth_chars = len(gt.chars)
    result.coverage = coverage([chars[i] for i in gt.chars], boxes)
    result.empty = empty_share(boxes, gt.footprint, size)
    return result


def _uses_ocr(meta: dict[str, Any]) -> bool:
    return meta.get("geometry") == OCR or bool(meta.get("ocr"))


def measure_document(path: Path, rel: str, chunks: Sequence[dict[str, Any]]) -> DocResult:
    """Each chunk against the text layer (pdfplumber), or, for one OCR'd, Tesseract's words."""
    ordered = sorted(enumerate(chunks), key=lambda item: int((item[1].get("meta") or {}).get("split_id", item[0])))
    metas = [chunk.get("meta") or {} for _, chunk in ordered]
    pdf: PdfTruth | None = None
    if not all(_uses_ocr(meta) for meta in metas):
        try:
            pdf = PdfTruth(path)
        except Exception as exc:  # pdfplumber could not open it: listed, not fatal
            return DocResult(rel, 0, error=f"{type(exc).__name__}: {exc}")
    scans: dict[str, OcrTruth] = {}
    try:
        doc = DocResult(rel, pdf.page_count if pdf is not None else 0)
        after: dict[str, dict[int, int]] = {"text": {}, "ocr": {}}
        for (index, chunk), meta in zip(ordered, metas, strict=True):
            split = int(meta.get("split_id", index))
            content = str(chunk.get("content") or "")
            truth: PageTruth
            if _uses_ocr(meta):
                language = str(meta.get("ocr_languages") or "eng")
                truth = scans.setdefault(language, OcrTruth(path, language))
                kind = "ocr"
            else:
                assert pdf is not None
                truth, kind = pdf, "text"
            doc.chunks.append(measure_chunk(split, content, meta, truth, after[kind]))
        if pdf is None:
            doc.pages = len({chunk.page for chunk in doc.chunks if chunk.page is not None})
        return doc
    finally:
        if pdf is not None:
            pdf.close()


# --- the stack ---------------------------------------------------------------------------------


async def fetch_chunks_with_meta(stack: Stack, file_id: str) -> list[dict[str, Any]]:
    """Every stored chunk of the file ({content, meta}), in the API's (split id) order."""
    async with httpx.AsyncClient(
        base_url=stack.ingestion_url, headers={"Authorization": f"Bearer {stack.ingestion_key}"}, timeout=120.0
    ) as http:
        return await stored_chunks(http, file_id)


@contextmanager
def store_dir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="bench-regions-") as tmp:
        yield Path(tmp)


def collect(docs_dir: Path, rel_paths: Sequence[str], keep: Path | None, concurrency: int) -> dict[str, Any]:
    """Ingest the PDFs and read back each one's chunks: rel path -> chunks, plus the ingest failures."""
    with store_dir(keep) as root:
        env = None if attached_stack() is not None else INSPECTION_ENV
        with running_stack(root / "qdrant", env, log_path=root / "stack.log") as stack:
            ingest = asyncio.run(ingest_files(stack, docs_dir, rel_paths, root / "done.tsv", concurrency))
            failed = {failure["path"] for failure in ingest.failures}
            chunks = {
                rel: asyncio.run(fetch_chunks_with_meta(stack, doc_file_id(rel)))
                for rel in rel_paths
                if rel not in failed
            }
    return {"chunks": chunks, "ingest": ingest.as_dict()}


# --- report ------------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _block(docs: Sequence[DocResult], geometry: str, target_coverage: float) -> dict[str, Any]:
    """The figures of one kind of chunk (``text_layer`` or ``ocr``) over the documents holding any."""
    chunks = [chunk for doc in docs for chunk in doc.measured if chunk.geometry == geometry]
    placed = [chunk for doc in docs for chunk in doc.placed if chunk.geometry == geometry]
    doc_means = [m for m in (_mean([c.coverage for c in doc.of(geometry)]) for doc in docs) if m is not None]
    mean_coverage = _mean([c.coverage for c in chunks])
    min_doc = min(doc_means) if doc_means else None
    mean_empty = _mean([c.empty for c in placed])
    return {
        "placed": len(placed),
        "measured": len(chunks),
        "placed_without_truth": len(placed) - len(chunks),
        "mean_coverage": mean_coverage,
        "min_doc_mean_coverage": min_doc,
        "mean_empty": mean_empty,
        "targets": {
            f"mean_coverage>={target_coverage}": mean_coverage is not None and mean_coverage >= target_coverage,
            f"min_doc_mean_coverage>={TARGET_DOC_COVERAGE}": min_doc is not None and min_doc >= TARGET_DOC_COVERAGE,
            f"mean_empty<={TARGET_EMPTY}": mean_empty is not None and mean_empty <= TARGET_EMPTY,
        },
    }


def summarise(docs: Sequence[DocResult]) -> dict[str, Any]:
    read = [doc for doc in docs if doc.error is None]
    doc_means = [m for m in (doc.mean_coverage() for doc in read) if m is not None]
    min_doc = min(doc_means) if doc_means else None
    return {
        "documents": len(docs),
        "scans": sum(1 for doc in read if doc.scan),
        "chunks": sum(len(doc.chunks) for doc in read),
        "placed": sum(len(doc.placed) for doc in read),
        "min_doc_mean_coverage": min_doc,
        "page_mismatches": sum(1 for doc in read for c in doc.placed if c.page_mismatch),
        "text_layer": _block(read, TEXT_LAYER, TARGET_COVERAGE),
        "ocr": _block(read, OCR, TARGET_OCR_COVERAGE),
        "targets": {
            f"min_doc_mean_coverage>={TARGET_DOC_COVERAGE}": min_doc is not None and min_doc >= TARGET_DOC_COVERAGE
        },
    }


def _badness(doc: DocResult) -> tuple[int, float, float]:
    if doc.error:
        return (2, 0.0, 0.0)
    mean = doc.mean_coverage()
    if mean is None:
        return (1, 0.0, 0.0)
    return (0, mean, -(doc.mean_empty() or 0.0))


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def markdown(docs: Sequence[DocResult], summary: dict[str, Any]) -> str:
    lines = [
        "| document | truth | pages | chunks | placed | not placed (reason) | mean cov | min cov | mean empty |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for doc in sorted(docs, key=_badness):
        name = doc.path.removeprefix("pdf/")
        if doc.error:
            lines.append(f"| {name} | - | - | - | - | error: {doc.error[:80]} | - | - | - |")
            continue
        kinds = sorted({chunk.geometry for chunk in doc.measured}) or ["-"]
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(doc.reasons().items())) or "-"
        lines.append(
            f"| {name} | {'+'.join(kinds)} | {doc.pages} | {len(doc.chunks)} | {len(doc.placed)} | {reasons} | "
            f"{_fmt(doc.mean_coverage())} | {_fmt(doc.min_coverage())} | {_fmt(doc.mean_empty())} |"
        )
    lines.append("")
    for geometry, target in ((TEXT_LAYER, TARGET_COVERAGE), (OCR, TARGET_OCR_COVERAGE)):
        block = summary[geometry]
        t = block["targets"]
        lines.append(
            f"{geometry}: {block['placed']} placed chunks; mean coverage {_fmt(block['mean_coverage'])} "
            f"(target >= {target}: {_verdict(t[f'mean_coverage>={target}'])}), "
            f"min per-document mean coverage {_fmt(block['min_doc_mean_coverage'])} "
            f"(target >= {TARGET_DOC_COVERAGE}: {_verdict(t[f'min_doc_mean_coverage>={TARGET_DOC_COVERAGE}'])}), "
            f"mean empty {_fmt(block['mean_empty'])} (target <= {TARGET_EMPTY}: {_verdict(t[f'mean_empty<={TARGET_EMPTY}'])})"
        )
    ok = summary["targets"][f"min_doc_mean_coverage>={TARGET_DOC_COVERAGE}"]
    lines.append(
        f"overall: {summary['placed']} placed chunks of {summary['chunks']} in {summary['documents']} documents "
        f"({summary['scans']} scans); min per-document mean coverage {_fmt(summary['min_doc_mean_coverage'])} "
        f"(target >= {TARGET_DOC_COVERAGE}: {_verdict(ok)}); regions page != meta.page: {summary['page_mismatches']}"
    )
    return "\n".join(lines)


def use_service_tessdata() -> None:
    """TESSDATA_PREFIX for the truth's own OCR: the language data the service would use."""
    from ingestion_service.documents import tessdata

    if "TESSDATA_PREFIX" not in os.environ:
        tessdata.resolve(enabled=True, configured=None)


def documents(docs_dir: Path) -> list[str]:
    """The PDFs and images under ``docs_dir`` (``<format>/<name>``)."""
    found: list[str] = []
    for folder, suffixes in FORMATS.items():
        directory = docs_dir / folder
        if directory.is_dir():
            found += sorted(f"{folder}/{path.name}" for path in directory.iterdir() if path.suffix.lower() in suffixes)
    return found


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.regions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON path (default benchmarks/results/regions-<stamp>.json)"
    )
    parser.add_argument("--store", type=Path, default=None, help="keep and reuse the store here (default: a temp dir)")
    parser.add_argument("--ingest-concurrency", type=int, default=2)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rel_paths = documents(args.docs_dir)
    if not rel_paths:
        raise SystemExit(f"no PDFs or images under {args.docs_dir} (pass --docs-dir)")
    print(f"regions: {len(rel_paths)} PDFs and images from {args.docs_dir}", flush=True)
    try:
        collected = collect(args.docs_dir, rel_paths, args.store, args.ingest_concurrency)
    except StackError as exc:
        print(f"stack failed: {exc}", file=sys.stderr)
        return 1
    use_service_tessdata()
    docs = [measure_document(args.docs_dir / rel, rel, chunks) for rel, chunks in collected["chunks"].items()]
    summary = summarise(docs)
    print(markdown(docs, summary))
    out = args.out or RESULTS_DIR / f"regions-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "regions",
        "machine": machine(),
        "docs_dir": str(args.docs_dir),
        "rule": {
            "min_block_chars": MIN_BLOCK,
            "tolerance": TOLERANCE,
            "cells_per_point": CELLS_PER_POINT,
            "ocr_side_px": OCR_SIDE_PX,
        },
        "summary": summary,
        "ingest": collected["ingest"],
        "documents": [doc.as_dict() for doc in sorted(docs, key=_badness)],
    }
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
