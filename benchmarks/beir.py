"""Load a BEIR-format dataset: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "eval" / "data"

# qrels: query id -> {doc id -> graded relevance}
Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True)
class BeirDoc:
    doc_id: str
    title: str
    text: str

    def as_file_text(self) -> str:
        """What we upload: title and body, as BEIR's 'index title + text' asks."""
        return f"{self.title}\n\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus: list[BeirDoc]
    queries: dict[str, str]
    qrels: Qrels
    split: str

    def split_queries(self) -> dict[str, str]:
        """Only the queries judged in this split's qrels (queries.jsonl holds every split)."""
        return {qid: self.queries[qid] for qid in self.qrels if qid in self.queries}


def load_corpus(path: Path) -> list[BeirDoc]:
    docs: list[BeirDoc] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            docs.append(BeirDoc(doc_id=str(row["_id"]), title=str(row.get("title") or ""), text=str(row["text"])))
    return docs


def load_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                # Only the text: metadata holds the answers/evidence and would leak them.
                queries[str(row["_id"])] = str(row["text"])
    return queries


def load_qrels(path: Path) -> Qrels:
    """Read a qrels TSV with a header line; CRLF endings (SciFact) are handled by the csv module."""
    qrels: Qrels = {}
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        header = next(reader, None)
        if header is None:
            return qrels
        if [cell.strip() for cell in header][:3] != ["query-id", "corpus-id", "score"]:
            raise ValueError(f"{path}: expected header 'query-id<TAB>corpus-id<TAB>score', got {header!r}")
        for row in reader:
            if not row or not "".join(row).strip():
                continue
            qid, doc_id, score = (cell.strip() for cell in row[:3])
            qrels.setdefault(qid, {})[doc_id] = int(score)
    return qrels


def load_dataset(name: str, split: str, data_dir: Path = DEFAULT_DATA_DIR) -> BeirDataset:
    root = data_dir / name
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        available = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        raise FileNotFoundError(f"{name}: no split {split!r} (available: {', '.join(available)})")
    return BeirDataset(
        name=name,
        corpus=load_corpus(root / "corpus.jsonl"),
        queries=load_queries(root / "queries.jsonl"),
        qrels=load_qrels(qrels_path),
        split=split,
    )
