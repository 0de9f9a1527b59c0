from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.beir import load_dataset, load_qrels
from benchmarks.tests.sample import SAMPLE_DIR

# A committed sample of the real SciFact data (see fixtures/scifact-sample/README.md).


def write_tiny(root: Path, newline: str) -> None:
    (root / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "d1", "title": "Aspirin", "text": "Aspirin thins blood.", "metadata": {}},
        {"_id": "d2", "title": "", "text": "No title here.", "metadata": {}},
    ]
    queries = [
        {"_id": "q1", "text": "what thins blood", "metadata": {"answer": "leak"}},
        {"_id": "q2", "text": "other split", "metadata": {}},
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries), encoding="utf-8")
    lines = ["query-id\tcorpus-id\tscore", "q1\td1\t1", "q1\td2\t2", ""]
    (root / "qrels" / "test.tsv").write_bytes(newline.join(lines).encode())


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_tiny_dataset_loads_with_either_line_ending(tmp_path: Path, newline: str) -> None:
    write_tiny(tmp_path / "tiny", newline)
    dataset = load_dataset("tiny", "test", tmp_path)
    assert [doc.doc_id for doc in dataset.corpus] == ["d1", "d2"]
    assert dataset.corpus[0].as_file_text() == "Aspirin\n\nAspirin thins blood."
    assert dataset.corpus[1].as_file_text() == "No title here."
    assert dataset.qrels == {"q1": {"d1": 1, "d2": 2}}
    assert dataset.split_queries() == {"q1": "what thins blood"}  # only this split, text only


def test_missing_split_names_the_available_ones(tmp_path: Path) -> None:
    write_tiny(tmp_path / "tiny", "\n")
    with pytest.raises(FileNotFoundError, match="available: test"):
        load_dataset("tiny", "train", tmp_path)


def test_bad_header_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_text("a\tb\tc\nq\td\t1\n")
    with pytest.raises(ValueError, match="expected header"):
        load_qrels(path)


def test_scifact_sample_loads_like_the_real_set() -> None:
    qrels_bytes = (SAMPLE_DIR / "scifact" / "qrels" / "test.tsv").read_bytes()
    assert qrels_bytes.count(b"\r\n") == qrels_bytes.count(b"\n") == 12  # SciFact's CRLF qrels, header + 11
    dataset = load_dataset("scifact", "test", SAMPLE_DIR)
    assert len(dataset.corpus) == 40
    assert len(dataset.queries) == 12  # queries.jsonl holds other splits' queries too ("0", "2": train)
    assert list(dataset.split_queries()) == ["1", "3", "5", "13", "36", "42", "48", "49", "50", "51"]
    assert sum(len(judged) for judged in dataset.qrels.values()) == 11
    assert all(grade == 1 for judged in dataset.qrels.values() for grade in judged.values())
    # Every judged document is in the sampled corpus, so the smoke runs can reach recall 1.
    corpus_ids = {doc.doc_id for doc in dataset.corpus}
    assert {doc_id for judged in dataset.qrels.values() for doc_id in judged} <= corpus_ids
    assert all(doc.title and doc.text for doc in dataset.corpus)
