"""Extraction benchmark: every real document through POST /api/v1/extract, engines side by side.

    python -m benchmarks.extraction                       # kreuzberg on every file, pypdf on PDFs too
    python -m benchmarks.extraction --load                # also: /search latency while a 21-page scan is OCR'd

Per format and engine: documents read, pages, seconds per page; for OCR the character error rate
(CER) on the scans whose text was established by reading their page images
(benchmarks/extraction_truth.json), and the word quality (`text_quality.word_quality`) of each
reading, the measure of the garbage-text-layer rule. `--load` ingests a 21-page scan (the German scan's 3 pages
seven times) while 4 clients search another tenant, and reports /search p50/p95 before and during.
Results go to benchmarks/results/<stamp>-extraction-summary.json and are printed as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import json
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from benchmarks.client import ServiceClient
from benchmarks.quality import RESULTS_DIR, WORK_DIR, machine
from benchmarks.realdocs import DEFAULT_DOCS_DIR, doc_paths
from benchmarks.stack import Stack, running_stack
from ingestion_service.documents.text_quality import word_quality

TRUTH_PATH = Path(__file__).resolve().parent / "extraction_truth.json"
SCAN_SOURCE = "pdf/kreuzberg__image_only_german_pdf.pdf"
SCAN_REPEATS = 7
LOAD_TENANT = "bench-ocr-load"
SEARCH_CLIENTS = 4


def page_count(path: Path) -> int:
    """Pages of a PDF or multi-frame image; 1 for everything else."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        import pypdfium2 as pdfium

        try:
            document = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError:
            return 1
        try:
            return len(document)
        finally:
            document.close()
    if suffix in {".tif", ".tiff"}:
        from PIL import Image

        with Image.open(path) as image:
            return int(getattr(image, "n_frames", 1))
    return 1


def normalise(text: str) -> str:
    """Whitespace collapsed, Markdown escapes and markup dropped: what CER compares."""
    text = re.sub(r"\\(.)", r"\1", text)
    text = re.sub(r"[#*_`|>]", " ", text)
    return " ".join(text.split())


def levenshtein(first: str, second: str) -> int:
    previous = list(range(len(second) + 1))
    for i, char_a in enumerate(first, start=1):
        current = [i]
        for j, char_b in enumerate(second, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def cer(found: str, truth: str) -> float:
    reference = normalise(truth)
    return levenshtein(normalise(found), reference) / max(len(reference), 1)


async def extract(client: httpx.AsyncClient, path: Path, engines: list[str]) -> dict[str, Any]:
    response = await client.post(
        "/api/v1/extract",
        data={"engines": ",".join(engines)} if len(engines) > 1 else {"engine": engines[0]},
        files={"file": (path.name, path.read_bytes())},
    )
    if response.status_code != 200:
        code = (
            response.json().get("code", "")
            if response.headers.get("content-type", "").startswith("application/json")
            else ""
        )
        return {"results": [{"engine": engines[0], "error": {"code": code or str(response.status_code)}, "seconds": 0}]}
    body: dict[str, Any] = response.json()
    if body.get("results") is None:
        body["results"] = [
            {key: body[key] for key in ("engine", "seconds", "characters", "pages", "documents")} | {"error": None}
        ]
    return body


async def run_extraction(stack: Stack, docs_dir: Path) -> dict[str, Any]:
    truth: dict[str, str] = json.loads(TRUTH_PATH.read_text())
    rows: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        base_url=stack.ingestion_url, headers={"Authorization": f"Bearer {stack.ingestion_key}"}, timeout=600
    ) as client:
        for relative in doc_paths(docs_dir):
            path = docs_dir / relative
            engines = ["kreuzberg", "pypdf"] if path.suffix.lower() == ".pdf" else ["kreuzberg"]
            body = await extract(client, path, engines)
            pages = page_count(path)
            for result in body["results"]:
                documents = result.get("documents") or []
                text = "\n\n".join(document["content"] for document in documents)
                row = {
                    "file": relative,
                    "format": relative.split("/")[0],
                    "engine": result["engine"],
                    "ok": result.get("error") is None,
                    "error": (result.get("error") or {}).get("code"),
                    "seconds": result.get("seconds", 0.0),
                    "characters": result.get("characters", 0),
                    "pages": pages,
                    "ocr": any(document["meta"].get("ocr") for document in documents),
                    "text_layer_replaced": any(
                        document["meta"].get("text_layer") == "replaced-by-ocr" for document in documents
                    ),
                }
                if row["ok"]:
                    # The measure behind the garbage-text-layer rule, on what the engine returned.
                    row["word_quality"] = round(word_quality(text), 3)
                    layer = next((d["meta"] for d in documents if "text_layer_quality" in d["meta"]), None)
                    if layer is not None:
                        row["text_layer_quality"] = layer["text_layer_quality"]
                        row["ocr_quality"] = layer["ocr_quality"]
                if relative in truth and row["ok"]:
                    row["cer"] = round(cer(text, truth[relative]), 4)
                rows.append(row)
                print(
                    f"{relative:70s} {row['engine']:10s} {'ok ' if row['ok'] else row['error']:18s} "
                    f"{row['seconds']:6.2f}s pages={pages} ocr={row['ocr']} cer={row.get('cer', '')}",
                    flush=True,
                )
    return {"rows": rows}


def format_table(rows: list[dict[str, Any]]) -> str:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["format"], row["engine"])].append(row)
    lines = [
        "| format | engine | documents | read | pages | seconds | s/page |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (fmt, engine), items in sorted(groups.items()):
        read = [row for row in items if row["ok"]]
        pages = sum(row["pages"] for row in read)
        seconds = sum(row["seconds"] for row in read)
        per_page = f"{seconds / pages:.3f}" if pages else "-"
        lines.append(f"| {fmt} | {engine} | {len(items)} | {len(read)} | {pages} | {seconds:.1f} | {per_page} |")
    ocr = [row for row in rows if row["ocr"] and row["engine"] == "kreuzberg"]
    if ocr:
        pages = sum(row["pages"] for row in ocr)
        seconds = sum(row["seconds"] for row in ocr)
        lines.append(
            f"| **OCR'd (any format)** | kreuzberg | {len(ocr)} | {len(ocr)} | {pages} | {seconds:.1f} | {seconds / pages:.3f} |"
        )
    return "\n".join(lines)


def cer_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| scan | engine | pages | seconds | CER |", "|---|---|---:|---:|---:|"]
    for row in rows:
        if "cer" in row:
            lines.append(
                f"| {row['file']} | {row['engine']} | {row['pages']} | {row['seconds']:.2f} | {row['cer']:.3f} |"
            )
    return "\n".join(lines)


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def _search_loop(client: ServiceClient, stop: asyncio.Event, latencies: list[float]) -> None:
    queries = ["duck habitat", "IBM history", "table of results", "what is a neural network"]
    index = 0
    while not stop.is_set():
        result = await client.search(queries[index % len(queries)], [LOAD_TENANT], 10)
        latencies.append(result.seconds * 1000)
        index += 1


async def run_load(stack: Stack, docs_dir: Path) -> dict[str, Any]:
    """/search p50/p95 with 4 searching clients: idle, then while a 21-page scan is ingested."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for _ in range(SCAN_REPEATS):
        writer.append(PdfReader(docs_dir / SCAN_SOURCE))
    buffer = io.BytesIO()
    writer.write(buffer)
    scan = buffer.getvalue()
    async with ServiceClient(
        stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key
    ) as client:
        for name in ("md/docling__wiki.md", "html/docling__wiki_duck.html", "pdf/kreuzberg__searchable.pdf"):
            path = docs_dir / name
            await client.ingest(
                file_id=f"load-{path.stem}", filename=path.name, content=path.read_bytes(), collection_name=LOAD_TENANT
            )
        phases: dict[str, Any] = {}
        for phase in ("idle", "during_ocr"):
            latencies: list[float] = []
            stop = asyncio.Event()
            searchers = [asyncio.create_task(_search_loop(client, stop, latencies)) for _ in range(SEARCH_CLIENTS)]
            started = time.perf_counter()
            if phase == "idle":
                await asyncio.sleep(20)
                ingest_seconds = None
            else:
                result = await client.ingest(
                    file_id="load-scan", filename="scan-21-pages.pdf", content=scan, collection_name="bench-ocr-scan"
                )
                ingest_seconds = result.seconds
            stop.set()
            await asyncio.gather(*searchers)
            elapsed = time.perf_counter() - started
            phases[phase] = {
                "searches": len(latencies),
                "seconds": round(elapsed, 1),
                "p50_ms": round(statistics.median(latencies), 1),
                "p95_ms": round(_percentile(latencies, 0.95), 1),
                "max_ms": round(max(latencies), 1),
                "scan_ingest_seconds": None if ingest_seconds is None else round(ingest_seconds, 1),
                "scan_pages": 3 * SCAN_REPEATS,
            }
            print(phase, phases[phase], flush=True)
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument("--load", action="store_true", help="also measure /search while a 21-page scan is OCR'd")
    parser.add_argument("--no-extract", action="store_true", help="skip the per-document extraction run")
    args = parser.parse_args(argv)
    work = WORK_DIR / "extraction"
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    summary: dict[str, Any] = {"date": stamp, "machine": machine(), "docs_dir": str(args.docs_dir)}
    started = time.perf_counter()
    with running_stack(work / "store") as stack:
        if not args.no_extract:
            summary.update(asyncio.run(run_extraction(stack, args.docs_dir)))
        if args.load:
            summary["load"] = asyncio.run(run_load(stack, args.docs_dir))
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"{stamp}-extraction-summary.json"
    out.write_text(json.dumps(summary, indent=1))
    if "rows" in summary:
        print(format_table(summary["rows"]))
        print()
        print(cer_table(summary["rows"]))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
