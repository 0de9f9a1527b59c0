"""The committed SciFact sample (fixtures/scifact-sample) and a small store built from it."""

from __future__ import annotations

from pathlib import Path

from benchmarks import quality

SAMPLE_DIR = Path(__file__).resolve().parent / "fixtures" / "scifact-sample"


def ingest_sample(work_dir: Path, results_dir: Path) -> None:
    """12 sample documents ingested through a real `rag dev` into ``work_dir``'s SciFact store (the
    layout every benchmark reads), by ``benchmarks.quality`` with one hybrid run of 3 queries."""
    code = quality.main(
        [
            "--dataset=scifact",
            "--configs=hybrid",
            "--limit-docs=12",
            "--limit-queries=3",
            f"--data-dir={SAMPLE_DIR}",
            f"--work-dir={work_dir}",
            f"--results-dir={results_dir}",
        ]
    )
    assert code == 0
