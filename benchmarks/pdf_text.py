"""How much of each PDF's text layer the default engine keeps, and how many of its pages get cited.

    python -m benchmarks.pdf_text [--docs-dir ../shared/eval/docs]

For every PDF with a text layer (pypdf reads at least 50 words): the share of pypdf's words (letters
only, four or more, case-folded, counted with multiplicity) that the Markdown also holds (recall),
the words the Markdown holds beyond them (extra), and the pages the chunks would cite against the
PDF's page count. Two rows: kreuzberg with its defaults (running headers and footers left out)
and the ingestion service's kreuzberg converter as configured (``KreuzbergConverter.convert``).
In-process, no stack; scans, and PDFs whose text layer the converter replaces by OCR, are not
counted (their text is OCR's, measured by ``benchmarks.extraction``).
"""

from __future__ import annotations

import argparse
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.realdocs import DEFAULT_DOCS_DIR

MIN_REFERENCE_WORDS = 50
_WORD = re.compile(r"[^\W\d_]{4,}")


def words(text: str) -> Counter[str]:
    """Words of four letters or more, case-folded, with their counts."""
    return Counter(word.casefold() for word in _WORD.findall(text))


@dataclass
class Totals:
    """Summed over the PDFs of one row."""

    reference: int = 0
    kept: int = 0
    extra: int = 0
    pages: int = 0
    cited: int = 0
    rows: list[str] = field(default_factory=lambda: list[str]())

    def add(self, reference: Counter[str], text: str, pages: int, cited: int) -> tuple[float, int]:
        """Count one PDF; returns its recall and extra words."""
        found = words(text)
        kept = sum((reference & found).values())
        extra = sum((found - reference).values())
        self.reference += sum(reference.values())
        self.kept += kept
        self.extra += extra
        self.pages += pages
        self.cited += cited
        return kept / max(1, sum(reference.values())), extra

    @property
    def recall(self) -> float:
        return self.kept / max(1, self.reference)


def pdfs(docs_dir: Path) -> Iterable[Path]:
    return sorted((docs_dir / "pdf").glob("*.pdf"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # pypdf's notes on damaged fonts

    import kreuzberg
    from pypdf import PdfReader

    from ingestion_service.documents.base import SourceFile
    from ingestion_service.documents.kreuzberg_local import KreuzbergConverter
    from ingestion_service.documents.page_split import split_by_page_text
    from ingestion_service.settings import Settings

    converter = KreuzbergConverter(Settings(_env_file=None, api_key="b" * 40))
    defaults = kreuzberg.ExtractionConfig(
        use_cache=False,
        output_format="markdown",
        images=kreuzberg.ImageExtractionConfig(extract_images=False),
        pages=kreuzberg.PageConfig(extract_pages=True),
    )
    rows = {"kreuzberg defaults": Totals(), "the converter as configured": Totals()}
    print("| PDF | pages | recall (defaults / ours) | pages cited (defaults / ours) |")
    print("|---|---:|---:|---:|")
    for path in pdfs(args.docs_dir):
        reader = PdfReader(path)
        reference = words(" ".join(page.extract_text() or "" for page in reader.pages))
        if sum(reference.values()) < MIN_REFERENCE_WORDS:
            continue
        page_count = len(reader.pages)
        plain = kreuzberg.extract_file_sync(str(path), config=defaults)
        # kreuzberg's own page texts cut its Markdown as the converter does (page_split).
        default_pages = split_by_page_text(
            plain.content, [str(page.get("content") or "") for page in plain.pages or []]
        )
        documents = converter.convert(SourceFile(path, path.name, "application/pdf"))
        if any(document.meta.get("ocr") for document in documents):
            # The converter OCR'd it (a garbage text layer): pypdf's reading is no reference.
            print(f"| {path.name} | {page_count} | OCR'd by the converter, not counted | |")
            continue
        ours_text = "\n\n".join(document.content or "" for document in documents)
        ours_cited = len({document.meta.get("page", 0) for document in documents})
        recall_a, _ = rows["kreuzberg defaults"].add(reference, plain.content, page_count, len(default_pages) or 1)
        recall_b, _ = rows["the converter as configured"].add(reference, ours_text, page_count, ours_cited)
        print(
            f"| {path.name} | {page_count} | {recall_a:.3f} / {recall_b:.3f} "
            f"| {len(default_pages) or 1} / {ours_cited} |"
        )
    print()
    print("| row | word recall | extra words | pages cited / pages |")
    print("|---|---:|---:|---:|")
    for name, totals in rows.items():
        print(f"| {name} | {totals.recall:.4f} | {totals.extra} | {totals.cited} / {totals.pages} |")


if __name__ == "__main__":
    main()
