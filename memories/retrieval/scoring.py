"""From raw signals to the score: calibrated relevance, recency, and the 70/30 blend.

    relevance = 1 − (1 − dense)·(1 − lexical)          both in [0, 1]
    recency   = 2^(−age_days / half_life)               age from valid_from
    score     = 0.7 · relevance + 0.3 · recency

`dense` maps cosine similarity onto [0, 1] with a per-model calibration (what counts as
unrelated and as a strong match differs between models). `lexical` is the IDF-weighted
share of query terms a chunk contains, scaled up when they are in the title or tags.
Fusing with a probabilistic OR keeps absolute strength: either signal alone can make a
memory relevant, both together make it more so, and nothing normalises a weak pool up.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

RELEVANCE_WEIGHT = 0.7
RECENCY_WEIGHT = 0.3
TITLE_SHARE = 0.3


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
    "local": Calibration(0.15, 0.70),
    "hash": Calibration(0.05, 0.60),
    "openai": Calibration(0.20, 0.65),
    "gemini": Calibration(0.45, 0.85),
}
DEFAULT_CALIBRATION = Calibration(0.20, 0.70)


def dense_strength(similarity: float, calibration: Calibration) -> float:
    span = calibration.ceiling - calibration.floor
    return min(1.0, max(0.0, (similarity - calibration.floor) / span))


def lexical_strength(body_hits: Sequence[bool], title_hits: Sequence[bool], weights: Sequence[float]) -> float:
    total = sum(weights)
    if total <= 0:
        return 0.0
    coverage = sum(w for w, hit in zip(weights, body_hits, strict=True) if hit) / total
    in_title = sum(w for w, hit in zip(weights, title_hits, strict=True) if hit) / total
    return coverage * ((1 - TITLE_SHARE) + TITLE_SHARE * in_title)


def fuse(dense: float, lexical: float) -> float:
    return 1.0 - (1.0 - dense) * (1.0 - lexical)


def recency(valid_from: datetime, moment: datetime, half_life_days: float) -> float:
    age_days = max(0.0, (moment - valid_from).total_seconds() / 86400)
    return float(2 ** (-age_days / half_life_days))


def relevance_for(mode: RankingMode, dense: float, lexical: float) -> float:
    if mode is RankingMode.DENSE:
        return dense
    if mode is RankingMode.LEXICAL:
        return lexical
    return fuse(dense, lexical)


def final_score(mode: RankingMode, relevance: float, recency_value: float) -> float:
    if mode is RankingMode.FULL:
        return RELEVANCE_WEIGHT * relevance + RECENCY_WEIGHT * recency_value
    return relevance
