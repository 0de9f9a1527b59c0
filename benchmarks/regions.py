"""Chunk regions benchmark: do a PDF chunk's ``meta.regions`` boxes sit on its text, and only there?

    python -m benchmarks.regions [--docs-dir ../shared/eval/docs] [--out PATH] [--store DIR]

Every PDF under ``<docs-dir>/pdf/`` is ingested through a real ``rag dev`` stack (with
ENABLE_INSPECTION_API, on an embedded store in a temporary directory removed afterwards, unless
``--store`` names one to keep and reuse), and its stored chunks are read back with their meta
through GET /api/v1/documents/{file_id}/chunks.

Ground truth is pdfplumber's (pdfminer's) characters, independent of PDFium:

* The chunk's page (``meta.page``, 0-based) is opened with pdfplumber; duplicate overprinted
  characters (fake bold) are dropped (``dedupe_chars``). A char's box (x0, top, x1, bottom) is in
  the page's displayed space (pdfminer applies /Rotate clockwise; ``page.width``/``height`` are the
  turned size), origin top-left over ``page.bbox`` (the crop box), and is taken as fractions of it.
* Page and chunk are reduced to their case-folded letters and digits (each char's text case-folded,
  non-alphanumerics dropped; a ligature char gives all its letters the same box), the page in
  content-stream (pdfminer) order. ``difflib.SequenceMatcher`` (no autojunk) aligns the two
  sequences; matching blocks of >= 4 characters are the chunk's ground-truth characters on the
  page. Characters in no such block are not counted, on either side. Three such in-order passes
  are made, each on what the earlier ones left unmatched (text the page holds in another order,
  e.g. two columns), and the chunks of a page are taken in split order with the chars earlier
  placed chunks matched masked out (a paragraph the page repeats goes to the chunk that has not
  had it), unless masking loses over 10% of the match (overlapping chunks).

Metrics, per chunk that says ``geometry: text_layer``:

* coverage: the share of its ground-truth characters (distinct pdfplumber chars) whose box centre
  falls inside one of its recorded boxes grown by 0.002 of the page on every side;
* empty: the share of the recorded boxes' area (their union, rasterised at 2 cells per point) not
  covered by the chunk's text footprint. The footprint is one rectangle per run of consecutive
  matched characters (consecutive in the page's alnum sequence) on one line: from the run's first to
  its last character, spanning the chars' top to bottom, so word spaces count as text, as a highlight
  shows them. A run is cut where the next char's vertical centre leaves the run's height or it
  steps back left.

A chunk without regions is listed with a reason: ``ocr`` (its meta says OCR'd), ``no page``,
``no text layer`` (pdfplumber finds no chars on the page) or ``words not found`` (the service did
not place it; the share of its alnum chars the ground truth finds is kept). A PDF with no chunk
placed and every chunk OCR'd or on a page without a text layer is a scan, not measured here.
Every placed chunk's ``regions[0].page`` must equal its ``meta.page`` (counted as page mismatches).
Results go to benchmarks/results/regions-<stamp>.json and a Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import difflib
import json
import math
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np

from benchmarks.client import BenchmarkHTTPError
from benchmarks.quality import RESULTS_DIR, machine
from benchmarks.realdocs import COLLECTION, DEFAULT_DOCS_DIR, doc_file_id
from benchmarks.realdocs.__main__ import INSPECTION_ENV, PAGE_LIMIT, ingest_files
from benchmarks.stack import Stack, StackError, attached_stack, running_stack

Box = tuple[float, float, float, float]

MIN_BLOCK = 4  # chars: shorter matching blocks are taken for chance
PASSES = 3  # in-order alignments per chunk (text out of page order)
TOLERANCE = 0.002  # of the page, around each recorded box, for the coverage test
CELLS_PER_POINT = 2  # raster resolution of the empty-share test
TARGET_COVERAGE = 0.98
TARGET_DOC_COVERAGE = 0.9
TARGET_EMPTY = 0.15


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
    """``text`` case-folded, letters and digits only."""
    return "".join(ch for ch in text.casefold() if ch.isalnum())


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


def matched_positions(
    page_seq: str, chunk_text: str, min_block: int = MIN_BLOCK, claimed: frozenset[int] = frozenset()
) -> list[int]:
    """Sorted positions in ``page_seq`` of the chunk's alnum chars, from matching blocks >= ``min_block``.

    Up to PASSES in-order alignments, each on what the previous ones left unmatched on both sides,
    so text the page holds in another order (two columns read the other way) is found too.
    Positions in ``claimed`` (earlier chunks' chars) are left out first; when that finds under 90%
    of what the whole page gives (the chunks overlap), the whole page is used.
    """
    wanted = alnum(chunk_text)
    if not wanted or not page_seq:
        return []
    found = _aligned(page_seq, wanted, min_block, set())
    if claimed:
        fresh = _aligned(page_seq, wanted, min_block, set(claimed))
        if len(fresh) >= 0.9 * len(found):
            found = fresh
    return sorted(found)


def _aligned(page_seq: str, wanted: str, min_block: int, masked: set[int]) -> list[int]:
    page = list(page_seq)
    for position in masked:
        page[position] = "\x00"
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


def matched_share(page_seq: str, chunk_text: str) -> float:
    """The share of the chunk's alnum chars the ground truth finds on the page."""
    wanted = alnum(chunk_text)
    return len(matched_positions(page_seq, chunk_text)) / len(wanted) if wanted else 0.0


@dataclass
class Truth:
    """The chunk's ground-truth chars (distinct indexes into the page's chars) and its footprint."""

    chars: list[int]
    footprint: list[Box]
    positions: list[int] = field(default_factory=list)  # alnum positions, for ``claimed``


def ground_truth(chars: Sequence[Char], chunk_text: str, claimed: frozenset[int] = frozenset()) -> Truth:
    """The chunk's chars on the page; ``claimed`` are alnum positions earlier chunks took (see
    :func:`matched_positions`): a paragraph the page repeats goes to the chunk not placed yet."""
    page_seq, owners = alnum_sequence(chars)
    positions = matched_positions(page_seq, chunk_text, claimed=claimed)
    indexes: list[int] = []
    for position in positions:
        owner = owners[position]
        if not indexes or indexes[-1] != owner:
            indexes.append(owner)
    return Truth(sorted(set(indexes)), footprint(chars, positions, owners), positions)


def footprint(chars: Sequence[Char], positions: Sequence[int], owners: Sequence[int]) -> list[Box]:
    """One rectangle per run of consecutive matched alnum positions on one line."""
    boxes: list[list[float]] = []
    previous: int | None = None
    for position in positions:
        char = chars[owners[position]]
        if boxes and previous is not None and position == previous + 1:
            line = boxes[-1]
            middle = (char.y0 + char.y1) / 2
            if line[1] <= middle <= line[3] and char.x0 >= line[0] - (line[3] - line[1]) * 0.5:
                line[0], line[1] = min(line[0], char.x0), min(line[1], char.y0)
                line[2], line[3] = max(line[2], char.x1), max(line[3], char.y1)
                previous = position
                continue
        boxes.append([char.x0, char.y0, char.x1, char.y1])
        previous = position
    return [(b[0], b[1], b[2], b[3]) for b in boxes]


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


# --- per chunk and per document ----------------------------------------------------------------


@dataclass
class ChunkResult:
    split: int
    page: int | None
    placed: bool
    reason: str | None = None
    coverage: float | None = None
    empty: float | None = None
    truth_chars: int = 0
    boxes: int = 0
    page_mismatch: bool = False
    found_share: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {key: (round(value, 4) if isinstance(value, float) else value) for key, value in vars(self).items()}


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
        return (
            bool(self.chunks)
            and not self.placed
            and all(chunk.reason in ("ocr", "no text layer") for chunk in self.chunks)
        )

    def reasons(self) -> dict[str, int]:
        return dict(Counter(chunk.reason or "?" for chunk in self.chunks if not chunk.placed))

    def mean_coverage(self) -> float | None:
        values = [c.coverage for c in self.measured if c.coverage is not None]
        return statistics.fmean(values) if values else None

    def min_coverage(self) -> float | None:
        values = [c.coverage for c in self.measured if c.coverage is not None]
        return min(values) if values else None

    def mean_empty(self) -> float | None:
        values = [c.empty for c in self.placed if c.empty is not None]
        return statistics.fmean(values) if values else None

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
    split: int, content: str, meta: dict[str, Any], truth: PdfTruth, claimed: dict[int, set[int]] | None = None
) -> ChunkResult:
    """One chunk's result; ``claimed`` (page -> alnum positions) collects the placed chunks' truth."""
    page = meta.get("page")
    page_no = page if isinstance(page, int) and not isinstance(page, bool) else None
    result = ChunkResult(split=split, page=page_no, placed=meta.get("geometry") == "text_layer")
    chars, size = truth.page(page_no) if page_no is not None else ([], (1.0, 1.0))
    if not result.placed:
        if meta.get("ocr"):
            result.reason = "ocr"
        elif page_no is None:
            result.reason = "no page"
        elif not chars:
            result.reason = "no text layer"
        else:
            result.reason = "words not found"
            result.found_share = matched_share(alnum_sequence(chars)[0], content)
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
    taken = (claimed if claimed is not None else {}).setdefault(page_no, set()) if page_no is not None else set()
    gt = ground_truth(chars, content, frozenset(taken))
    taken.update(gt.positions)
    result.truth_chars = len(gt.chars)
    result.coverage = coverage([chars[i] for i in gt.chars], boxes)
    result.empty = empty_share(boxes, gt.footprint, size)
    return result


def measure_document(path: Path, rel: str, chunks: Sequence[dict[str, Any]]) -> DocResult:
    try:
        truth = PdfTruth(path)
    except Exception as exc:  # pdfplumber could not open it: listed, not fatal
        return DocResult(rel, 0, error=f"{type(exc).__name__}: {exc}")
    try:
        doc = DocResult(rel, truth.page_count)
        claimed: dict[int, set[int]] = {}
        ordered = sorted(enumerate(chunks), key=lambda item: int((item[1].get("meta") or {}).get("split_id", item[0])))
        for index, chunk in ordered:
            meta = chunk.get("meta") or {}
            split = int(meta.get("split_id", index))
            doc.chunks.append(measure_chunk(split, str(chunk.get("content") or ""), meta, truth, claimed))
        return doc
    finally:
        truth.close()


# --- the stack ---------------------------------------------------------------------------------


async def fetch_chunks_with_meta(stack: Stack, file_id: str) -> list[dict[str, Any]]:
    """Every stored chunk of the file ({content, meta}), in the API's (split id) order."""
    chunks: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        base_url=stack.ingestion_url, headers={"Authorization": f"Bearer {stack.ingestion_key}"}, timeout=120.0
    ) as http:
        offset: str | None = None
        while True:
            params: dict[str, str | int] = {
                "include_content": "full",
                "limit": PAGE_LIMIT,
                "collection_name": COLLECTION,
            }
            if offset:
                params["offset"] = offset
            response = await http.get(f"/api/v1/documents/{quote(file_id, safe='')}/chunks", params=params)
            if response.status_code != 200:
                raise BenchmarkHTTPError(f"chunks of {file_id}", response.status_code, response.text)
            body = response.json()
            chunks.extend(body["chunks"])
            offset = body.get("next_offset")
            if not offset:
                return chunks


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


def summarise(docs: Sequence[DocResult]) -> dict[str, Any]:
    measured = [doc for doc in docs if not doc.scan and doc.error is None]
    placed = [chunk for doc in measured for chunk in doc.placed]
    coverages = [c.coverage for c in placed if c.coverage is not None]
    empties = [c.empty for c in placed if c.empty is not None]
    doc_means = [m for m in (doc.mean_coverage() for doc in measured) if m is not None]
    mean_coverage = statistics.fmean(coverages) if coverages else None
    min_doc = min(doc_means) if doc_means else None
    mean_empty = statistics.fmean(empties) if empties else None
    return {
        "documents": len(docs),
        "scans": sum(1 for doc in docs if doc.scan),
        "chunks": sum(len(doc.chunks) for doc in measured),
        "placed": len(placed),
        "measured": len(coverages),
        "placed_without_truth": len(placed) - len(coverages),
        "mean_coverage": mean_coverage,
        "min_doc_mean_coverage": min_doc,
        "mean_empty": mean_empty,
        "page_mismatches": sum(1 for c in placed if c.page_mismatch),
        "targets": {
            "mean_coverage>=0.98": mean_coverage is not None and mean_coverage >= TARGET_COVERAGE,
            "min_doc_mean_coverage>=0.9": min_doc is not None and min_doc >= TARGET_DOC_COVERAGE,
            "mean_empty<=0.15": mean_empty is not None and mean_empty <= TARGET_EMPTY,
        },
    }


def _badness(doc: DocResult) -> tuple[int, float, float]:
    if doc.scan or doc.error:
        return (2, 0.0, 0.0)
    mean = doc.mean_coverage()
    if mean is None:
        return (1, 0.0, 0.0)
    return (0, mean, -(doc.mean_empty() or 0.0))


def markdown(docs: Sequence[DocResult], summary: dict[str, Any]) -> str:
    lines = [
        "| document | pages | chunks | placed | not placed (reason) | mean cov | min cov | mean empty |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for doc in sorted(docs, key=_badness):
        name = doc.path.removeprefix("pdf/")
        if doc.error:
            lines.append(f"| {name} | - | - | - | error: {doc.error[:80]} | - | - | - |")
            continue
        if doc.scan:
            lines.append(f"| {name} | {doc.pages} | {len(doc.chunks)} | - | scan, not measured here | - | - | - |")
            continue
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(doc.reasons().items())) or "-"
        lines.append(
            f"| {name} | {doc.pages} | {len(doc.chunks)} | {len(doc.placed)} | {reasons} | "
            f"{_fmt(doc.mean_coverage())} | {_fmt(doc.min_coverage())} | {_fmt(doc.mean_empty())} |"
        )
    t = summary["targets"]
    lines += [
        "",
        f"overall: {summary['placed']} placed chunks of {summary['chunks']} ({summary['scans']} scans left out); "
        f"mean coverage {_fmt(summary['mean_coverage'])} (target >= 0.98: {'ok' if t['mean_coverage>=0.98'] else 'MISSED'}), "
        f"min per-document mean coverage {_fmt(summary['min_doc_mean_coverage'])} "
        f"(target >= 0.9: {'ok' if t['min_doc_mean_coverage>=0.9'] else 'MISSED'}), "
        f"mean empty {_fmt(summary['mean_empty'])} (target <= 0.15: {'ok' if t['mean_empty<=0.15'] else 'MISSED'}); "
        f"regions page != meta.page: {summary['page_mismatches']}",
    ]
    return "\n".join(lines)


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
    pdf_dir = args.docs_dir / "pdf"
    if not pdf_dir.is_dir():
        raise SystemExit(f"no PDFs at {pdf_dir} (pass --docs-dir)")
    rel_paths = sorted(f"pdf/{path.name}" for path in pdf_dir.iterdir() if path.suffix.lower() == ".pdf")
    print(f"regions: {len(rel_paths)} PDFs from {pdf_dir}", flush=True)
    try:
        collected = collect(args.docs_dir, rel_paths, args.store, args.ingest_concurrency)
    except StackError as exc:
        print(f"stack failed: {exc}", file=sys.stderr)
        return 1
    docs = [measure_document(args.docs_dir / rel, rel, chunks) for rel, chunks in collected["chunks"].items()]
    summary = summarise(docs)
    print(markdown(docs, summary))
    out = args.out or RESULTS_DIR / f"regions-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "regions",
        "machine": machine(),
        "docs_dir": str(args.docs_dir),
        "rule": {"min_block_chars": MIN_BLOCK, "tolerance": TOLERANCE, "cells_per_point": CELLS_PER_POINT},
        "summary": summary,
        "ingest": collected["ingest"],
        "documents": [doc.as_dict() for doc in sorted(docs, key=_badness)],
    }
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
