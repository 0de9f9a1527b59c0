"""Real-document retrieval benchmark: hand-written questions over ../shared/eval/docs.

The pure parts live here (question file, hit rule, metrics, a plain Okapi BM25, tables) so they are
unit-tested without a stack; ``python -m benchmarks.realdocs`` (``__main__``) runs the benchmark.

Hit rules. *Passage* (the score that counts): a retrieved chunk is a hit for a question when its
``file_id`` maps to the question's ``source`` (or one of its optional ``alt_sources``: files holding
the same content, e.g. the same table saved as .ods and .xlsx) AND its own text (what search shows,
not the context it was indexed with) contains ``answer`` (case-insensitively, Unicode NFC,
whitespace runs collapsed). *Document*: the source alone, whatever the chunk holds. hit@1 / hit@5:
a hit at rank 1 / within the top 5; MRR@10: 1 / rank of the first hit within the top 10, else 0.
Means are over every question.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.beir import REPO_ROOT
from benchmarks.ingest import file_id_for

PACKAGE_DIR = Path(__file__).resolve().parent
QUESTIONS_PATH = PACKAGE_DIR / "questions.jsonl"
# Named question files: the original set, and the context set's tuning and held-out splits.
QUESTION_SETS = {
    "original": QUESTIONS_PATH,
    "tune": PACKAGE_DIR / "questions-context-tune.jsonl",
    "test": PACKAGE_DIR / "questions-context-test.jsonl",
}
DEFAULT_DOCS_DIR = REPO_ROOT.parent / "shared" / "eval" / "docs"
COLLECTION = "bench-realdocs"
FILE_ID_PREFIX = "realdocs"
SEARCH_K = 10

# Not documents: the corpus' own bookkeeping and docling's reference conversions.
SKIP_FILES = frozenset({"MANIFEST.md", "manifest.json", "SHA256SUMS"})
SKIP_DIRS = frozenset({"expected"})

KINDS = frozenset({"factoid", "table", "multilingual", "email", "slide", "spreadsheet", "list", "heading", "diagram"})
REQUIRED_FIELDS = ("id", "question", "answer", "source", "kind", "format")
OPTIONAL_FIELDS = ("alt_sources", "split")
SPLITS = frozenset({"tune", "test"})

# Okapi BM25 as in Robertson & Zaragoza (2009), with Lucene's non-negative idf.
BM25_K1 = 1.2
BM25_B = 0.75
_TOKEN = re.compile(r"\w+")


# --- questions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answer: str
    source: str  # path relative to the docs dir, e.g. "pdf/kreuzberg__sample_contract.pdf"
    kind: str
    format: str
    alt_sources: tuple[str, ...] = ()
    split: str | None = None  # "tune" or "test" in the context sets; None in the original set

    @property
    def sources(self) -> frozenset[str]:
        """Every file a hit may come from."""
        return frozenset((self.source, *self.alt_sources))


class QuestionFileError(ValueError):
    """The questions file is malformed; the message names the line."""


def parse_question(row: Mapping[str, Any]) -> Question:
    """One questions.jsonl object; raises ValueError naming what is wrong."""
    missing = [name for name in REQUIRED_FIELDS if not isinstance(row.get(name), str) or not row[name].strip()]
    if missing:
        raise ValueError(f"missing or empty field(s): {', '.join(missing)}")
    unknown = sorted(set(row) - {*REQUIRED_FIELDS, *OPTIONAL_FIELDS})
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(unknown)}")
    if row["kind"] not in KINDS:
        raise ValueError(f"kind {row['kind']!r} is not one of {sorted(KINDS)}")
    alt = row.get("alt_sources", [])
    if not isinstance(alt, list) or not all(isinstance(item, str) and item for item in alt):
        raise ValueError("alt_sources must be a list of paths")
    split = row.get("split")
    if split is not None and split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {sorted(SPLITS)}")
    source = str(row["source"])
    if source.startswith("/") or ".." in Path(source).parts:
        raise ValueError(f"source {source!r} must be relative to the docs dir")
    if row["format"] != Path(source).parts[0]:
        raise ValueError(f"format {row['format']!r} does not match the source's folder {Path(source).parts[0]!r}")
    if not normalise(str(row["answer"])):
        raise ValueError("answer is blank after normalisation")
    return Question(
        id=str(row["id"]),
        question=str(row["question"]),
        answer=str(row["answer"]),
        source=source,
        kind=str(row["kind"]),
        format=str(row["format"]),
        alt_sources=tuple(alt),
        split=split,
    )


def parse_questions(lines: Iterable[str]) -> list[Question]:
    """Every non-blank line as a Question; ids must be unique."""
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            question = parse_question(row)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise QuestionFileError(f"line {number}: {exc}") from exc
        if question.id in seen:
            raise QuestionFileError(f"line {number}: duplicate id {question.id!r}")
        seen.add(question.id)
        questions.append(question)
    return questions


def load_questions(path: Path = QUESTIONS_PATH) -> list[Question]:
    return parse_questions(path.read_text(encoding="utf-8").splitlines())


def question_paths(names: Sequence[str]) -> list[Path]:
    """Each name of QUESTION_SETS as its file; anything else is a path."""
    return [QUESTION_SETS.get(name, Path(name)) for name in names]


def load_question_sets(paths: Sequence[Path]) -> list[Question]:
    """The questions of several files in order; ids must be unique across them."""
    questions: list[Question] = []
    seen: set[str] = set()
    for path in paths:
        for question in load_questions(path):
            if question.id in seen:
                raise QuestionFileError(f"{path}: id {question.id!r} is also in an earlier file")
            seen.add(question.id)
            questions.append(question)
    return questions


# --- documents ---------------------------------------------------------------------------------


def doc_paths(docs_dir: Path) -> list[str]:
    """Every document under ``docs_dir`` as a sorted POSIX path relative to it."""
    paths: list[str] = []
    for path in docs_dir.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(docs_dir)
        if rel.name in SKIP_FILES or rel.parts[0] in SKIP_DIRS or rel.name.startswith("."):
            continue
        paths.append(rel.as_posix())
    return sorted(paths)


def doc_file_id(rel_path: str) -> str:
    """A stable, API-safe file id for a document path (sanitised and hashed by ingest.file_id_for)."""
    return file_id_for(FILE_ID_PREFIX, rel_path)


def file_id_map(rel_paths: Iterable[str]) -> dict[str, str]:
    """file id -> relative path."""
    return {doc_file_id(rel): rel for rel in rel_paths}


# --- hit rule and metrics ----------------------------------------------------------------------


def normalise(text: str) -> str:
    """Case-folded, NFC, whitespace runs collapsed to one space, stripped."""
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def contains_answer(text: str, answer: str) -> bool:
    return normalise(answer) in normalise(text)


def is_hit(file_id: str, text: str, question: Question, id_to_path: Mapping[str, str]) -> bool:
    return id_to_path.get(file_id) in question.sources and contains_answer(text, question.answer)


def first_hit_rank(
    ranked: Sequence[tuple[str, str]], question: Question, id_to_path: Mapping[str, str], k: int = SEARCH_K
) -> int | None:
    """1-based rank of the first passage hit among the top ``k`` (file id, chunk text) pairs, else None."""
    for rank, (file_id, text) in enumerate(ranked[:k], start=1):
        if is_hit(file_id, text, question, id_to_path):
            return rank
    return None


def first_source_rank(
    ranked: Sequence[tuple[str, str]], question: Question, id_to_path: Mapping[str, str], k: int = SEARCH_K
) -> int | None:
    """1-based rank of the first chunk from the question's source among the top ``k``, else None."""
    for rank, (file_id, _) in enumerate(ranked[:k], start=1):
        if id_to_path.get(file_id) in question.sources:
            return rank
    return None


@dataclass(frozen=True)
class Scores:
    n: int
    hit_1: float
    hit_5: float
    mrr_10: float

    def as_dict(self) -> dict[str, float | int]:
        return {"n": self.n, "hit@1": self.hit_1, "hit@5": self.hit_5, "mrr@10": self.mrr_10}


def score_ranks(ranks: Sequence[int | None]) -> Scores:
    """Means over every question; None (no hit in the top 10) scores 0 everywhere."""
    n = len(ranks)
    if n == 0:
        return Scores(0, 0.0, 0.0, 0.0)
    return Scores(
        n=n,
        hit_1=sum(1 for r in ranks if r is not None and r <= 1) / n,
        hit_5=sum(1 for r in ranks if r is not None and r <= 5) / n,
        mrr_10=sum(1.0 / r for r in ranks if r is not None and r <= SEARCH_K) / n,
    )


def scores_by(questions: Sequence[Question], ranks: Mapping[str, int | None], field: str) -> dict[str, Scores]:
    """Scores per value of ``field`` ("kind" or "format"), over the questions that have a rank entry."""
    groups: dict[str, list[int | None]] = {}
    for question in questions:
        if question.id in ranks:
            groups.setdefault(getattr(question, field), []).append(ranks[question.id])
    return {key: score_ranks(values) for key, values in sorted(groups.items())}


# --- plain BM25 --------------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Lower-cased ``\\w+`` runs (Unicode-aware); no stemming, no stop words."""
    return _TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 over an in-memory list of texts.

    score(q, d) = sum over query terms t (each occurrence in the query counts) of
    idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl)),
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)).
    """

    def __init__(self, texts: Sequence[str], *, k1: float = BM25_K1, b: float = BM25_B) -> None:
        self.k1 = k1
        self.b = b
        self.term_freqs: list[Counter[str]] = [Counter(tokenize(text)) for text in texts]
        self.lengths = [sum(tf.values()) for tf in self.term_freqs]
        self.n_docs = len(texts)
        self.avgdl = (sum(self.lengths) / self.n_docs) if self.n_docs else 0.0
        df: Counter[str] = Counter()
        for tf in self.term_freqs:
            df.update(tf.keys())
        self.idf = {term: math.log(1.0 + (self.n_docs - n + 0.5) / (n + 0.5)) for term, n in df.items()}
        self.postings: dict[str, list[int]] = {}
        for index, tf in enumerate(self.term_freqs):
            for term in tf:
                self.postings.setdefault(term, []).append(index)

    def scores(self, query: str) -> dict[int, float]:
        """Doc index -> score, for the docs sharing at least one term with the query."""
        totals: dict[int, float] = {}
        if not self.avgdl:
            return totals
        for term in tokenize(query):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for index in self.postings[term]:
                tf = self.term_freqs[index][term]
                norm = self.k1 * (1.0 - self.b + self.b * self.lengths[index] / self.avgdl)
                totals[index] = totals.get(index, 0.0) + idf * tf * (self.k1 + 1.0) / (tf + norm)
        return totals

    def search(self, query: str, k: int = SEARCH_K) -> list[tuple[int, float]]:
        """The top ``k`` (doc index, score), score descending, ties by index ascending."""
        ranked = sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        return ranked[:k]


# --- tables ------------------------------------------------------------------------------------


def markdown_table(rows: Mapping[str, Scores], documents: Mapping[str, Scores] | None = None) -> str:
    """One line per row: the passage scores, and the document rule's hit@1 / hit@5 when given."""
    header = "| row | hit@1 | hit@5 | MRR@10 |" + (" doc hit@1 | doc hit@5 |" if documents is not None else "") + " n |"
    lines = [header, "|---|---:|---:|---:|" + ("---:|---:|" if documents is not None else "") + "---:|"]
    for name, s in rows.items():
        doc = documents.get(name) if documents is not None else None
        extra = f" {doc.hit_1:.3f} | {doc.hit_5:.3f} |" if doc is not None else (" - | - |" if documents else "")
        lines.append(f"| {name} | {s.hit_1:.3f} | {s.hit_5:.3f} | {s.mrr_10:.3f} |{extra} {s.n} |")
    return "\n".join(lines)


def breakdown_table(
    label: str,
    groups: Mapping[str, Mapping[str, Scores]],
    documents: Mapping[str, Mapping[str, Scores]] | None = None,
) -> str:
    """Per group (rows of the table) and benchmark row (columns): passage hit@1 / hit@5, and the
    document rule's hit@5 in brackets when given; ``groups[row][group]``."""
    row_names = list(groups)
    keys = sorted({key for per_row in groups.values() for key in per_row})
    suffix = " (doc hit@5)" if documents is not None else ""
    lines = [
        f"| {label} | n | " + " | ".join(f"{name} hit@1 / hit@5{suffix}" for name in row_names) + " |",
        "|---|---:|" + "---:|" * len(row_names),
    ]
    for key in keys:
        n = max((groups[name][key].n for name in row_names if key in groups[name]), default=0)
        cells = []
        for name in row_names:
            if key not in groups[name]:
                cells.append("-")
                continue
            cell = f"{groups[name][key].hit_1:.3f} / {groups[name][key].hit_5:.3f}"
            doc = documents.get(name, {}).get(key) if documents is not None else None
            cells.append(cell + (f" ({doc.hit_5:.3f})" if doc is not None else ""))
        lines.append(f"| {key} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
