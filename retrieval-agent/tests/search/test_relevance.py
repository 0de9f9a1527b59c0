from __future__ import annotations

import json

import pytest

from retrieval_agent.relevance_models import DEFAULT_MODELS, PlattModel, RerankerScale, parse_models, sigmoid
from retrieval_agent.search.postprocess import Hit
from retrieval_agent.search.relevance import RelevanceCalibrator, non_increasing
from retrieval_agent.settings import Settings
from shared_contract import ContractConfigError

KEY = "k" * 40


def hit(score: float, cosine: float | None) -> Hit:
    return Hit(point_id="p", content="text", score=score, cosine=cosine)


def test_sigmoid_is_stable_at_large_magnitudes() -> None:
    assert sigmoid(0.0) == 0.5
    assert sigmoid(1000.0) == 1.0
    assert sigmoid(-1000.0) == 0.0


def test_hybrid_relevance_is_a_probability_that_rises_with_cosine_and_fused_score() -> None:
    calibrator = RelevanceCalibrator(DEFAULT_MODELS)
    low, by_cosine, by_rank = calibrator.retrieved(
        [hit(0.01, 0.1), hit(0.01, 0.8), hit(0.05, 0.1)], "native_hybrid", fused_scale=60
    )
    assert 0.0 < low.relevance < by_cosine.relevance < 1.0
    assert low.relevance < by_rank.relevance < 1.0
    # The fused score orders hits; the relevance does not replace it.
    assert by_rank.score == 0.05


def test_the_dense_path_uses_the_cosine_only() -> None:
    model = PlattModel(intercept=-2.0, cosine=4.0, fused=100.0)
    [scored] = RelevanceCalibrator({**DEFAULT_MODELS, "dense": model}).retrieved(
        [hit(0.9, 0.8)], "dense", fused_scale=60
    )
    assert scored.relevance == pytest.approx(sigmoid(-2.0 + 4.0 * 0.8))


def test_a_missing_cosine_adds_nothing() -> None:
    model = PlattModel(intercept=-1.0, cosine=5.0, fused=1.0)
    [scored] = RelevanceCalibrator({**DEFAULT_MODELS, "bm25_fallback": model}).retrieved(
        [hit(0.02, None)], "bm25_fallback", fused_scale=50
    )
    assert scored.relevance == pytest.approx(sigmoid(-1.0 + 1.0 * 0.02 * 50))


@pytest.mark.parametrize(
    ("scale", "score", "expected"),
    [
        ("logit", 2.0, sigmoid(2.0)),
        ("logit", -3.0, sigmoid(-3.0)),
        ("probability", 0.7, 0.7),
        ("probability", 1.3, 1.0),
    ],
)
def test_reranked_relevance_is_the_cross_encoders_probability(
    scale: RerankerScale, score: float, expected: float
) -> None:
    calibrator = RelevanceCalibrator(DEFAULT_MODELS, reranker_scale=scale)
    [scored] = calibrator.reranked([hit(score, None)])
    assert scored.relevance == pytest.approx(expected)


def test_parse_models_overrides_only_the_named_paths() -> None:
    models = parse_models({"dense": [-3.0, 6.0]})
    assert models["dense"] == PlattModel(-3.0, 6.0)
    assert models["native_hybrid"] == DEFAULT_MODELS["native_hybrid"]


@pytest.mark.parametrize(
    "raw",
    ['{"hybrid": [1, 2, 3]}', '{"dense": []}', '{"dense": [1, 2, 3, 4]}', '{"dense": ["a"]}', "[1]", "{not json"],
)
def test_a_bad_relevance_calibration_stops_start_up_naming_the_variable(raw: str) -> None:
    with pytest.raises(ContractConfigError, match="RELEVANCE_CALIBRATION"):
        Settings(api_key=KEY, relevance_calibration=raw)


def test_settings_carry_the_calibration_and_the_reranker_scale() -> None:
    settings = Settings(
        api_key=KEY,
        relevance_calibration=json.dumps({"native_hybrid": [-1, 2, 3]}),
        reranker_provider="fastembed",
    )
    assert settings.relevance_models["native_hybrid"] == PlattModel(-1.0, 2.0, 3.0)
    assert settings.effective_reranker_score_scale == "logit"
    http = Settings(api_key=KEY, reranker_score_scale="auto")
    assert http.effective_reranker_score_scale == "probability"


def test_relevance_never_rises_down_the_ranked_list() -> None:
    hits = [Hit(point_id=str(i), content=str(i), relevance=value) for i, value in enumerate([0.6, 0.8, 0.3, 0.5])]
    assert [hit.relevance for hit in non_increasing(hits)] == [0.6, 0.6, 0.3, 0.3]
    assert [hit.point_id for hit in non_increasing(hits)] == ["0", "1", "2", "3"]
