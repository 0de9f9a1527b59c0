"""The real-document benchmark's pure parts: questions file, hit rule, metrics, BM25, output.

Fast and stack-free; nothing here reads the evaluation data beside the checkout (a fresh clone has none).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import Counter
from pathlib import Path

import httpx
import pytest

from benchmarks.realdocs import (
    BM25,
    KINDS,
    QUESTIONS_PATH,
    Question,
    QuestionFileError,
    Scores,
    breakdown_table,
    contains_answer,
    doc_file_id,
    doc_paths,
    file_id_map,
    first_hit_rank,
    load_questions,
    markdown_table,
    normalise,
    parse_questions,
    score_ranks,
    scores_by,
    tokenize,
)
from benchmarks.realdocs.__main__ import (
    BM25_ROW,
    DEFAULT_CONFIGS,
    IngestReport,
    InspectionUnavailableError,
    Row,
    StoredChunk,
    answerable,
    bm25_ranked,
    fetch_chunks,
    main,
    parse_args,
    rank_row,
    report_text,
    row_env,
    write_per_question,
)
from benchmarks.stack import Stack


def _q(qid: str = "q1", answer: str = "Sala Baker", source: str = "pdf/a.pdf", **extra: object) -> Question:
    fields: dict[str, object] = {
        "id": qid,
        "question": "who played the villain?",
        "answer": answer,
        "source": source,
        "kind": "factoid",
        "format": source.split("/")[0],
    }
    fields.update(extra)
    return parse_questions([json.dumps(fields)])[0]


def _stack() -> Stack:
    return Stack("http://ingest.test", "http://search.test", "k" * 32, "r" * 32)


# --- the committed questions file --------------------------------------------------------------


def test_questions_file_parses_with_unique_ids() -> None:
    lines = [line for line in QUESTIONS_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = load_questions()
    assert len(questions) == len(lines) >= 60
    assert len({q.id for q in questions}) == len(questions)
    assert all(re.fullmatch(r"q\d{3}", q.id) for q in questions)


def test_questions_file_spreads_over_kinds_formats_and_documents() -> None:
    questions = load_questions()
    kinds = Counter(q.kind for q in questions)
    assert set(kinds) <= KINDS
    assert len(kinds) >= 6
    assert len({q.format for q in questions}) >= 8
    assert max(Counter(q.source for q in questions).values()) <= 4
    assert kinds["multilingual"] >= 5


def test_questions_are_paraphrased_and_well_formed() -> None:
    for q in load_questions():
        assert normalise(q.answer) not in normalise(q.question), q.id
        assert q.source.split("/")[0] == q.format
        assert q.source not in q.alt_sources
        assert not q.source.startswith("expected/")


# --- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "trivia"}, "kind"),
        ({"answer": "  "}, "missing or empty"),
        ({"format": "docx"}, "does not match"),
        ({"source": "../x/a.pdf"}, "relative"),
        ({"extra": 1}, "unknown field"),
        ({"alt_sources": "pdf/b.pdf"}, "alt_sources"),
    ],
)
def test_parse_rejects_bad_rows(change: dict[str, object], message: str) -> None:
    row: dict[str, object] = {
        "id": "q1",
        "question": "?",
        "answer": "x",
        "source": "pdf/a.pdf",
        "kind": "factoid",
        "format": "pdf",
    }
    row.update(change)
    with pytest.raises(QuestionFileError, match=message):
        parse_questions([json.dumps(row)])


def test_parse_rejects_duplicates_and_bad_json_with_line_numbers() -> None:
    row = json.dumps(
        {"id": "q1", "question": "?", "answer": "x", "source": "pdf/a.pdf", "kind": "table", "format": "pdf"}
    )
    with pytest.raises(QuestionFileError, match="line 3: duplicate id 'q1'"):
        parse_questions([row, "", row])
    with pytest.raises(QuestionFileError, match="line 1"):
        parse_questions(["{not json"])
    with pytest.raises(QuestionFileError, match="not a JSON object"):
        parse_questions(["[1, 2]"])


def test_alt_sources_are_kept() -> None:
    q = _q(alt_sources=["xlsx/b.xlsx"])
    assert q.sources == {"pdf/a.pdf", "xlsx/b.xlsx"}


# --- matching ----------------------------------------------------------------------------------


def test_contains_answer_ignores_case_whitespace_and_unicode_form() -> None:
    assert contains_answer("the actor SALA\n  Baker is best known", "Sala Baker")
    assert contains_answer("| Nespresso |\t3128 |", "nespresso | 3128")
    assert contains_answer("Caf\u00e9 au lait", "cafe\u0301 au")  # NFC: é == e + combining acute
    assert contains_answer("Straße", "STRASSE")  # casefold
    assert not contains_answer("Sala Bak", "Sala Baker")
    assert not contains_answer("SalaBaker", "Sala Baker")


def test_first_hit_needs_the_right_file_and_the_answer() -> None:
    id_to_path = {"f-a": "pdf/a.pdf", "f-b": "pdf/b.pdf", "f-c": "xlsx/c.xlsx"}
    q = _q()
    ranked = [
        ("f-b", "Sala Baker in the wrong file"),
        ("f-a", "the right file without the name"),
        ("unknown", "Sala Baker from a file we did not ingest"),
        ("f-a", "played by sala   baker"),
        ("f-a", "Sala Baker again"),
    ]
    assert first_hit_rank(ranked, q, id_to_path) == 4
    assert first_hit_rank(ranked, q, id_to_path, k=3) is None
    assert first_hit_rank([], q, id_to_path) is None
    alt = _q(source="pdf/a.pdf", alt_sources=["xlsx/c.xlsx"])
    assert first_hit_rank([("f-c", "Sala Baker")], alt, id_to_path) == 1


def test_scores_follow_the_definitions() -> None:
    s = score_ranks([1, 3, None, 7, 2])
    assert s.n == 5
    assert s.hit_1 == pytest.approx(1 / 5)
    assert s.hit_5 == pytest.approx(3 / 5)
    assert s.mrr_10 == pytest.approx((1 + 1 / 3 + 1 / 7 + 1 / 2) / 5)
    assert score_ranks([11]).mrr_10 == 0.0  # beyond the top 10
    assert score_ranks([]) == Scores(0, 0.0, 0.0, 0.0)


def test_scores_by_kind() -> None:
    questions = [_q("a"), _q("b", kind="table"), _q("c", kind="table")]
    groups = scores_by(questions, {"a": 1, "b": None, "c": 5}, "kind")
    assert list(groups) == ["factoid", "table"]
    assert groups["table"].n == 2
    assert groups["table"].hit_5 == 0.5


# --- documents ---------------------------------------------------------------------------------


def test_doc_paths_skip_corpus_bookkeeping(tmp_path: Path) -> None:
    for rel in ["pdf/a.pdf", "eml/b.eml", "MANIFEST.md", "manifest.json", "SHA256SUMS", "expected/a.md", "md/.hidden"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert doc_paths(tmp_path) == ["eml/b.eml", "pdf/a.pdf"]


def test_file_ids_are_stable_safe_and_distinct() -> None:
    paths = ["pdf/kreuzberg__sample_contract.pdf", "pdf/kreuzberg__sample_contract.PDF", "csv/x-y.csv"]
    ids = [doc_file_id(p) for p in paths]
    assert ids[0] == doc_file_id("pdf/kreuzberg__sample_contract.pdf")
    assert len(set(ids)) == 3
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,256}", i) for i in ids)
    assert file_id_map(paths)[ids[2]] == "csv/x-y.csv"


# --- BM25 --------------------------------------------------------------------------------------


def test_tokenize_is_lowercase_unicode_words() -> None:
    assert tokenize("Hello, WORLD! 3.5 gange-dansk ÆBLE 빅포인트의") == [
        "hello",
        "world",
        "3",
        "5",
        "gange",
        "dansk",
        "æble",
        "빅포인트의",
    ]


def test_bm25_matches_a_hand_computation() -> None:
    index = BM25(["a b", "a c c", "d"])
    avgdl = 2.0
    idf_c = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    idf_a = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    norm_1 = 1.2 * (1 - 0.75 + 0.75 * 3 / avgdl)
    norm_0 = 1.2 * (1 - 0.75 + 0.75 * 2 / avgdl)
    expected_1 = idf_c * 2 * 2.2 / (2 + norm_1) + idf_a * 1 * 2.2 / (1 + norm_1)
    expected_0 = idf_a * 1 * 2.2 / (1 + norm_0)
    scores = index.scores("C a")
    assert scores[1] == pytest.approx(expected_1)
    assert scores[0] == pytest.approx(expected_0)
    assert 2 not in scores
    assert [i for i, _ in index.search("c a")] == [1, 0]


def test_bm25_ties_break_by_position_and_k_limits() -> None:
    index = BM25(["x y", "x y", "z"])
    hits, scores = index.search("x", k=5), index.scores("x")
    assert [i for i, _ in hits] == [0, 1]
    assert [score for _, score in hits] == pytest.approx([scores[0], scores[1]])
    assert len(index.search("x", k=1)) == 1
    assert index.search("nothing") == []
    assert BM25([]).search("x") == []
    assert all(v > 0 for v in BM25(["x", "x"]).scores("x").values())  # idf never negative


# --- runner helpers ----------------------------------------------------------------------------


def test_rows_and_bm25_rank_stored_chunks() -> None:
    id_to_path = {"f-a": "pdf/a.pdf", "f-b": "pdf/b.pdf"}
    chunks = [
        StoredChunk("f-b", "villains in films are many"),
        StoredChunk("f-a", "Sala Baker played the villain Sauron"),
        StoredChunk("f-a", "unrelated text about ducks"),
    ]
    questions = [_q("q1"), _q("q2", answer="not stored anywhere")]
    row = rank_row(Row(BM25_ROW), questions, bm25_ranked(chunks, questions), id_to_path)
    assert row.ranks == {"q1": 1, "q2": None}
    assert row.top5["q1"][0] == "pdf/a.pdf"
    assert answerable(questions, chunks, id_to_path) == {"q1": True, "q2": False}


def test_fetch_chunks_pages_by_next_offset() -> None:
    seen: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        seen.append(params)
        assert request.headers["authorization"] == "Bearer " + "k" * 32
        if params.get("offset") == "p2":
            return httpx.Response(200, json={"chunks": [{"content": "third"}], "next_offset": None})
        return httpx.Response(200, json={"chunks": [{"content": "first"}, {"content": None}], "next_offset": "p2"})

    chunks = asyncio.run(fetch_chunks(_stack(), ["realdocs-x"], transport=httpx.MockTransport(handler)))
    assert [c.text for c in chunks] == ["first", "", "third"]
    assert seen[0]["include_content"] == "full"
    assert seen[0]["collection_name"] == "bench-realdocs"
    assert seen[0]["limit"] == "1000"


def test_fetch_chunks_reports_a_disabled_inspection_api() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(404, json={"detail": "Not Found"}))
    with pytest.raises(InspectionUnavailableError):
        asyncio.run(fetch_chunks(_stack(), ["realdocs-x"], transport=transport))


def test_outputs(tmp_path: Path) -> None:
    questions = [_q("q1"), _q("q2", kind="table")]
    live = Row(
        "hybrid", ranks={"q1": 1, "q2": None}, doc_ranks={"q1": 1, "q2": 3}, top5={"q1": ["pdf/a.pdf"], "q2": []}
    )
    skipped = Row("rerank", skipped="no --rerank-url")
    path = tmp_path / "per-question.jsonl"
    write_per_question(path, questions, [live, skipped], {"q1": True, "q2": False})
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[0]["rank"] == {"hybrid": 1}
    assert records[1]["rank"] == {"hybrid": None}
    assert records[0]["top5"] == {"hybrid": ["pdf/a.pdf"]}
    assert records[1]["answer_in_index"] is False
    ingest = IngestReport(failures=[{"path": "jpg/x.jpg", "file_id": "f", "status": 422, "error": "needs OCR"}])
    text = report_text(questions, [live, skipped], ingest, {"q1": True, "q2": False})
    # Passage hit@1 / hit@5 / MRR@10, then the document rule's hit@1 / hit@5.
    assert "| hybrid | 0.500 | 0.500 | 0.500 | 0.500 | 1.000 | 2 |" in text
    assert "| table | 1 | 0.000 / 0.000 (1.000) |" in text
    assert "skipped: no --rerank-url" in text
    assert "jpg/x.jpg: HTTP 422" in text
    assert "1/2 questions" in text


def test_tables_render() -> None:
    table = markdown_table({"bm25": Scores(2, 0.5, 1.0, 0.75)})
    assert table.splitlines()[2] == "| bm25 | 0.500 | 1.000 | 0.750 | 2 |"
    kinds = breakdown_table("kind", {"a": {"x": Scores(3, 0, 1 / 3, 0)}, "b": {}})
    assert kinds.splitlines()[0] == "| kind | n | a hit@1 / hit@5 | b hit@1 / hit@5 |"
    assert kinds.splitlines()[2] == "| x | 3 | 0.000 / 0.333 | - |"
    with_documents = breakdown_table("kind", {"a": {"x": Scores(3, 0, 1 / 3, 0)}}, {"a": {"x": Scores(3, 1, 1, 1)}})
    assert with_documents.splitlines()[0] == "| kind | n | a hit@1 / hit@5 (doc hit@5) |"
    assert with_documents.splitlines()[2] == "| x | 3 | 0.000 / 0.333 (1.000) |"


def test_cli_defaults_and_missing_docs(tmp_path: Path) -> None:
    args = parse_args([])
    assert args.configs == DEFAULT_CONFIGS
    assert not args.no_bm25
    with pytest.raises(SystemExit, match="no documents"):
        main([f"--docs-dir={tmp_path / 'absent'}", f"--results-dir={tmp_path / 'results'}"])


def test_a_set_option_reaches_every_row_with_the_inspection_api() -> None:
    args = parse_args(["--configs=hybrid,dense", "--set", "search_window_chars=0"])
    for config in args.configs:
        env = row_env(config, args)
        assert isinstance(env, dict)
        assert (env["SEARCH_WINDOW_CHARS"], env["ENABLE_INSPECTION_API"]) == ("0", "true")
    assert row_env("dense", args)["ENABLE_HYBRID_SEARCH"] == "false"  # type: ignore[index]
