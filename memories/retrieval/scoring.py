"""From raw signals to the score: calibrated relevance, recency, and the 70/30 blend.

    strength  = 1 − (1 − dense)·(1 − lexical)           absolute, in [0, 1]
    relevance = (strength / best strength in the pool) ^ SPREAD_POWER
    recency   = 2^(−age_days / half_life)                age from valid_from
    score     = 0.7 · relevance + 0.3 · recency
    match     = fused strength less the penalty for missing identifiers (not rare words), absolute:
                the same across queries (memories.selectors.recall, docs/quality.md "Confidence")

`dense` maps cosine similarity onto [0, 1] with a per-model calibration (what counts as
unrelated and as a strong match differs between models). `lexical` is the IDF-weighted
share of query terms a chunk contains, scaled up when they are in the title or tags.
Fusing with a probabilistic OR keeps absolute strength: either signal alone can make a
memory relevant, both together make it more so.

The blend runs over a pool of the strongest candidates. Relevance is spread within it so
the best candidate is 1; recency (at most 0.3) can reorder near-ties, never lift a weak match
over a strong one, and candidates below a fifth of the best's strength are dropped as noise. Two candidates that are versions of
the same statement (their best chunks nearly identical in meaning) count as equally
relevant, so recency prefers the newer one. Every constant was chosen by measurement on
the open dev set (bench/quality.py; docs/quality.md).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

RELEVANCE_WEIGHT = 0.7
RECENCY_WEIGHT = 0.3


@dataclass(frozen=True)
class RankingParams:
    title_share: float = 0.3  # how much of lexical strength needs the terms in title/tags
    identifier_boost: float = 1.5  # IDF multiplier for ticket ids, error codes, versions
    pool_size: int = 30  # candidates the blend ranks (by strength) — the rest are not returned
    spread_power: float = 1.0
    version_similarity: float | None = 0.7  # best-chunk cosine at which two candidates may be versions
    min_share: float = 0.2  # candidates weaker than this share of the strongest are noise, not results
    # Selective query terms: identifiers, and words in at most `rare_df` visible chunks. A candidate
    # lacking selective terms that other candidates hold loses up to `miss_penalty` of its strength.
    rare_df: int = 1
    miss_penalty: float = 0.5


PARAMS = RankingParams()


class RankingMode(enum.StrEnum):
    """The full blend, or an ablation of it (for the retrieval-quality harness)."""

    FULL = "full"  # 0.7 · fused relevance + 0.3 · recency
    FUSED = "fused"  # fused relevance alone
    DENSE = "dense"  # dense relevance alone
    LEXICAL = "lexical"  # lexical relevance alone


@dataclass(frozen=True)
class Calibration:
    """Cosine similarity at or below `floor` is unrelated (0); at or above `ceiling` a strong match (1)."""

    floor: float
    ceiling: float


CALIBRATIONS = {
    "local": Calibration(0.15, 0.80),
    "hash": Calibration(0.05, 0.60),
    "openai": Calibration(0.20, 0.65),
    "gemini": Calibration(0.45, 0.85),
}
DEFAULT_CALIBRATION = Calibration(0.20, 0.70)


def dense_strength(similarity: float, calibration: Calibration) -> float:
    span = calibration.ceiling - calibration.floor
    return min(1.0, max(0.0, (similarity - calibration.floor) / span))


def lexical_strength(
    body_hits: Sequence[bool], title_hits: Sequence[bool], weights: Sequence[float], title_share: float
) -> float:
    total = sum(weights)
    if total <= 0:
        return 0.0
    coverage = sum(w for w, hit in zip(weights, body_hits, strict=True) if hit) / total
    in_title = sum(w for w, hit in zip(weights, title_hits, strict=True) if hit) / total
    return coverage * ((1 - title_share) + title_share * in_title)


def missing_share(body_hits: Sequence[bool], selective: Sequence[float]) -> float:
    """How much selective weight (0 for terms that are not selective) a chunk lacks, relative to the
    heaviest selective term and at most 1: lacking the one ticket id asked about costs the full
    penalty even when the query also names a version every twin shares."""
    heaviest = max(selective, default=0.0)
    if heaviest <= 0:
        return 0.0
    return min(1.0, sum(w for w, hit in zip(selective, body_hits, strict=True) if not hit) / heaviest)


def fuse(dense: float, lexical: float) -> float:
    return 1.0 - (1.0 - dense) * (1.0 - lexical)


class Confidence(enum.StrEnum):
    """How strong a match is, on the absolute `match` scale (see CONFIDENCE_THRESHOLDS)."""

    STRONG = "strong"
    PARTIAL = "partial"
    WEAK = "weak"


@dataclass(frozen=True)
class ConfidenceThresholds:
    """`match` at or above `strong` is a strong match; at or above `partial` a partial one; below, weak.
    Chosen on data (docs/quality.md: the dev set's tuning half, templated corpora, unanswerable queries)."""

    strong: float
    partial: float


CONFIDENCE_THRESHOLDS = ConfidenceThresholds(strong=0.75, partial=0.38)


def confidence(match: float, thresholds: ConfidenceThresholds | None = None) -> Confidence:
    limits = thresholds or CONFIDENCE_THRESHOLDS
    if match >= limits.strong:
        return Confidence.STRONG
    if match >= limits.partial:
        return Confidence.PARTIAL
    return Confidence.WEAK


def recency(valid_from: datetime, moment: datetime, half_life_days: float) -> float:
    age_days = max(0.0, (moment - valid_from).total_seconds() / 86400)
    return float(2 ** (-age_days / half_life_days))


def spread(strength: float, best: float, power: float) -> float:
    return (strength / best) ** power if best > 0 else 0.0


def strength_for(mode: RankingMode, dense: float, lexical: float) -> float:
    if mode is RankingMode.DENSE:
        return dense
    if mode is RankingMode.LEXICAL:
        return lexical
    return fuse(dense, lexical)


def final_score(mode: RankingMode, relevance: float, recency_value: float) -> float:
    if mode is RankingMode.FULL:
        return RELEVANCE_WEIGHT * relevance + RECENCY_WEIGHT * recency_value
    return relevance
