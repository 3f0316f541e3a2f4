"""The scoring arithmetic (memories/retrieval/scoring.py): each formula against hand-computed values,
the boundaries of every clamp and threshold, and one recall through the API whose relevances must be
the pool's strengths divided by the best one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memories.retrieval import scoring
from memories.retrieval.scoring import Calibration, Confidence, ConfidenceThresholds, RankingMode

CAL = Calibration(floor=0.2, ceiling=0.7)


# -- dense: cosine onto [0, 1] ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("similarity", "expected"),
    [
        (0.2, 0.0),  # the floor is unrelated
        (0.1, 0.0),  # below the floor clamps to 0, never negative
        (-0.5, 0.0),
        (0.45, 0.5),  # halfway between floor and ceiling
        (0.3, 0.2),
        (0.7, 1.0),  # the ceiling is a strong match
        (0.95, 1.0),  # above the ceiling clamps to 1
    ],
)
def test_dense_strength_maps_the_calibrated_span_onto_zero_to_one(similarity: float, expected: float) -> None:
    assert scoring.dense_strength(similarity, CAL) == pytest.approx(expected)


def test_dense_strength_depends_on_the_model_calibration() -> None:
    assert scoring.dense_strength(0.5, Calibration(0.0, 1.0)) == pytest.approx(0.5)
    assert scoring.dense_strength(0.5, Calibration(0.4, 0.6)) == pytest.approx(0.5)
    assert scoring.dense_strength(0.5, Calibration(0.25, 0.75)) == pytest.approx(0.5)
    assert scoring.dense_strength(0.5, Calibration(0.3, 0.8)) == pytest.approx(0.4)


def test_every_embedder_has_a_calibration_with_floor_below_ceiling() -> None:
    assert set(scoring.CALIBRATIONS) == {"local", "hash", "openai", "gemini"}
    for calibration in [*scoring.CALIBRATIONS.values(), scoring.DEFAULT_CALIBRATION]:
        assert 0 <= calibration.floor < calibration.ceiling <= 1


# -- lexical: IDF-weighted coverage, title share ----------------------------------------------------
def test_lexical_strength_is_weighted_coverage_scaled_by_title_share() -> None:
    weights = [3.0, 1.0]
    # Both terms in the body, none in the title: coverage 1, title factor 1 - share.
    assert scoring.lexical_strength([True, True], [False, False], weights, 0.3) == pytest.approx(0.7)
    # Both also in the title: the full strength.
    assert scoring.lexical_strength([True, True], [True, True], weights, 0.3) == pytest.approx(1.0)
    # Only the heavy term in the body and title: coverage 0.75, title factor 0.7 + 0.3 * 0.75.
    assert scoring.lexical_strength([True, False], [True, False], weights, 0.3) == pytest.approx(0.75 * (0.7 + 0.3 * 0.75))
    # Only the light term: coverage 0.25.
    assert scoring.lexical_strength([False, True], [False, False], weights, 0.3) == pytest.approx(0.25 * 0.7)
    # No term at all.
    assert scoring.lexical_strength([False, False], [True, True], weights, 0.3) == 0.0


def test_lexical_strength_without_weight_is_zero() -> None:
    assert scoring.lexical_strength([], [], [], 0.3) == 0.0
    assert scoring.lexical_strength([True], [True], [0.0], 0.3) == 0.0
    # A non-positive total is no weight at all, never a negative share turned positive.
    assert scoring.lexical_strength([True], [True], [-1.0], 0.3) == 0.0


def test_lexical_strength_of_light_terms_is_relative_to_their_total() -> None:
    # Weights below 1 are ordinary weights: one term of weight 0.5, found in body and title, is full strength.
    assert scoring.lexical_strength([True], [True], [0.5], 0.3) == pytest.approx(1.0)
    assert scoring.lexical_strength([True, False], [False, False], [0.25, 0.25], 0.3) == pytest.approx(0.35)


@pytest.mark.parametrize(
    ("body", "title"),
    [([True], [True, True]), ([True, True], [True])],
    ids=["body-short", "title-short"],
)
def test_lexical_strength_needs_one_hit_flag_per_term(body: list[bool], title: list[bool]) -> None:
    with pytest.raises(ValueError, match="zip"):
        scoring.lexical_strength(body, title, [1.0, 1.0], 0.3)


# -- missing selective terms ------------------------------------------------------------------------
def test_missing_share_is_relative_to_the_heaviest_selective_term() -> None:
    selective = [4.0, 0.0, 2.0]  # the middle term is not selective
    assert scoring.missing_share([True, False, True], selective) == 0.0
    assert scoring.missing_share([True, True, False], selective) == pytest.approx(0.5)
    assert scoring.missing_share([False, True, True], selective) == pytest.approx(1.0)
    # Lacking both costs at most the full share.
    assert scoring.missing_share([False, False, False], selective) == 1.0


def test_missing_share_without_selective_terms_is_zero() -> None:
    assert scoring.missing_share([False, False], [0.0, 0.0]) == 0.0
    assert scoring.missing_share([], []) == 0.0
    assert scoring.missing_share([False], [-1.0]) == 0.0  # a non-positive weight is not selective


def test_missing_share_needs_one_hit_flag_per_term() -> None:
    with pytest.raises(ValueError, match="zip"):
        scoring.missing_share([True], [1.0, 2.0])


def test_missing_share_of_light_selective_terms() -> None:
    # Selective weights below 1 still count: lacking the only one costs the full share.
    assert scoring.missing_share([False], [0.5]) == 1.0
    assert scoring.missing_share([False, True], [0.4, 0.8]) == pytest.approx(0.5)


# -- fusion, spread, recency, blend -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dense", "lexical", "expected"),
    [(0.0, 0.0, 0.0), (0.5, 0.0, 0.5), (0.0, 0.4, 0.4), (0.5, 0.5, 0.75), (0.6, 0.3, 0.72), (1.0, 0.2, 1.0)],
)
def test_fuse_is_a_probabilistic_or(dense: float, lexical: float, expected: float) -> None:
    assert scoring.fuse(dense, lexical) == pytest.approx(expected)


def test_spread_divides_by_the_best_strength_of_the_pool() -> None:
    assert scoring.spread(0.3, 0.6, 1.0) == pytest.approx(0.5)
    assert scoring.spread(0.6, 0.6, 1.0) == pytest.approx(1.0)
    assert scoring.spread(0.3, 0.6, 2.0) == pytest.approx(0.25)
    assert scoring.spread(0.4, 0.8, 0.5) == pytest.approx(0.5**0.5)


def test_spread_with_an_empty_pool_is_zero() -> None:
    assert scoring.spread(0.0, 0.0, 1.0) == 0.0
    assert scoring.spread(0.5, -1.0, 1.0) == 0.0


def test_recency_halves_every_half_life_and_never_exceeds_one() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    assert scoring.recency(now, now, 30) == 1.0
    assert scoring.recency(now - timedelta(days=30), now, 30) == pytest.approx(0.5)
    assert scoring.recency(now - timedelta(days=60), now, 30) == pytest.approx(0.25)
    assert scoring.recency(now - timedelta(days=15), now, 30) == pytest.approx(2**-0.5)
    assert scoring.recency(now - timedelta(days=10), now, 10) == pytest.approx(0.5)
    # A memory valid from the future is as recent as now, not more.
    assert scoring.recency(now + timedelta(days=5), now, 30) == 1.0
    assert scoring.recency(now - timedelta(hours=12), now, 1) == pytest.approx(2**-0.5)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (RankingMode.DENSE, 0.6),
        (RankingMode.LEXICAL, 0.3),
        (RankingMode.FUSED, 0.72),
        (RankingMode.FULL, 0.72),
    ],
)
def test_strength_for_each_ranking_mode(mode: RankingMode, expected: float) -> None:
    assert scoring.strength_for(mode, 0.6, 0.3) == pytest.approx(expected)


def test_final_score_blends_seventy_thirty_only_in_full_mode() -> None:
    assert (scoring.RELEVANCE_WEIGHT, scoring.RECENCY_WEIGHT) == (0.7, 0.3)
    assert scoring.final_score(RankingMode.FULL, 1.0, 0.0) == pytest.approx(0.7)
    assert scoring.final_score(RankingMode.FULL, 0.0, 1.0) == pytest.approx(0.3)
    assert scoring.final_score(RankingMode.FULL, 0.5, 0.5) == pytest.approx(0.5)
    assert scoring.final_score(RankingMode.FULL, 0.8, 0.2) == pytest.approx(0.62)
    for mode in (RankingMode.FUSED, RankingMode.DENSE, RankingMode.LEXICAL):
        assert scoring.final_score(mode, 0.8, 0.2) == 0.8


# -- confidence bands -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("match", "expected"),
    [
        (1.0, Confidence.STRONG),
        (0.75, Confidence.STRONG),  # the threshold itself is strong
        (0.7499, Confidence.PARTIAL),
        (0.38, Confidence.PARTIAL),
        (0.3799, Confidence.WEAK),
        (0.0, Confidence.WEAK),
    ],
)
def test_confidence_bands_on_the_default_thresholds(match: float, expected: Confidence) -> None:
    assert scoring.confidence(match) is expected


def test_confidence_with_given_thresholds() -> None:
    limits = ConfidenceThresholds(strong=0.9, partial=0.5)
    assert scoring.confidence(0.8, limits) is Confidence.PARTIAL
    assert scoring.confidence(0.9, limits) is Confidence.STRONG
    assert scoring.confidence(0.49, limits) is Confidence.WEAK
    assert scoring.confidence(0.5, limits) is Confidence.PARTIAL


def test_parameters_and_thresholds_cannot_be_changed_in_place() -> None:
    # Shared module-level defaults: a caller tuning a copy must never move everyone's ranking.
    from dataclasses import FrozenInstanceError

    with pytest.raises(FrozenInstanceError):
        scoring.PARAMS.pool_size = 5  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        scoring.CONFIDENCE_THRESHOLDS.strong = 0.1  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        scoring.DEFAULT_CALIBRATION.floor = 0.0  # type: ignore[misc]


def test_default_ranking_parameters_are_the_measured_ones() -> None:
    # docs/quality.md chose these on the dev set; a change must be a deliberate one.
    params = scoring.PARAMS
    assert (params.title_share, params.identifier_boost, params.pool_size, params.spread_power) == (0.3, 1.5, 30, 1.0)
    assert (params.version_similarity, params.min_share, params.rare_df, params.miss_penalty) == (0.7, 0.2, 1, 0.5)
    assert (scoring.CONFIDENCE_THRESHOLDS.strong, scoring.CONFIDENCE_THRESHOLDS.partial) == (0.75, 0.38)


# -- through recall: relevance is relative to the pool's best ------------------------------------------
@pytest.mark.django_db
def test_recall_relevance_is_each_strength_over_the_best_in_the_pool(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    for content in (
        "The dock firmware release train ships every second Tuesday after the firmware freeze.",
        "Dock firmware builds are signed by the release captain.",
        "The firmware team keeps its runbook in the engineering wiki.",
    ):
        assert client.post("/api/memories", {"content": content, "scope": "engineering"}).status_code == 201
    response = client.post("/api/recall", {"query": "firmware quarterly vendor audit of hardware suppliers and robots"})
    assert response.status_code == 200, response.content
    hits = response.json()["results"]
    assert len(hits) >= 2
    best = max(hit["match"] for hit in hits)
    assert 0 < best < 1  # absolute strength: not already 1, so dividing by it matters
    assert max(hit["relevance"] for hit in hits) == pytest.approx(1.0)
    for hit in hits:
        assert hit["relevance"] == pytest.approx(hit["match"] / best, abs=1e-5)
    assert len({round(hit["relevance"], 4) for hit in hits}) == len(hits)
