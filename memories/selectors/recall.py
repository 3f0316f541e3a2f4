"""Recall: hybrid retrieval over what a principal may see, ranked by 0.7·relevance + 0.3·recency.

1. embed the query (signature-checked) and pick lexical terms (stop words dropped, rare
   terms and identifiers weighted up);
2. candidates inside PostgreSQL, both under the principal's filter: nearest chunks through
   HNSW (iterative scan, so filters cannot starve the result) and full-text matches;
3. exact similarity and term matches for every candidate chunk; chunks fold into their
   memory (the best chunk wins and is the snippet);
4. a match on an earlier version leads to the current one: superseded memories the principal
   may read are candidates too, and each passes its strength on to the active memory at the end
   of its supersession chain (when the principal may read that one), which is returned in its
   place with `earlier_version` saying why — asking about the old fact finds the new one;
5. relevance, recency and score (see memories.retrieval.scoring);
6. every hit is re-checked against the principal before it is returned; one audit event.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.utils import timezone

from audit.services import record
from cortex_site.errors import ValidationFailed
from memories.access import Principal
from memories.embeddings.factory import get_embedder
from memories.embeddings.store import check_signature, embed_for_store, signature_of
from memories.models import Memory
from memories.retrieval import scoring, sql
from memories.retrieval.terms import idf, is_identifier, normalise_query, one_edit_variants, query_terms, typo_candidate
from memories.selectors.memories import readable_scope_ids_named

MAX_QUERY_CHARS = 2000
MAX_LIMIT = 50
DF_CAP = 1000
# A term is "common" — it does not select lexical candidates alone (sql.lexical_hits) — when it
# is in COMMON_SHARE of the organization's chunks, and never below COMMON_FLOOR chunks (small
# stores are unaffected) nor above DF_CAP (what the frequency count can see).
COMMON_SHARE = 0.05
COMMON_FLOOR = 500
SNIPPET_CHARS = 320
# Typo tolerance applies to keyword queries of at most this many (non-stop-word) terms.
TYPO_MAX_TERMS = 3


@dataclass(frozen=True)
class RecallQuery:
    query: str
    limit: int = 10
    scopes: Sequence[str] | None = None
    category: str | None = None
    tags: Sequence[str] = ()
    source: str | None = None
    as_of: datetime | None = None


@dataclass(frozen=True)
class RecallHit:
    memory: Memory
    score: float
    relevance: float
    recency: float
    snippet: str
    chunk_index: int
    dense: float
    lexical: float
    # Absolute strength in [0, 1] (relevance is relative to the pool's best) and its label.
    match: float = 0.0
    confidence: scoring.Confidence = scoring.Confidence.WEAK
    # Raw cosine similarity of the best chunk to the query (before calibration).
    similarity: float = 0.0
    # The superseded memory whose match led here, when it matched better than this one.
    earlier_version: Memory | None = None


@dataclass(frozen=True)
class RecallResult:
    hits: list[RecallHit]
    took_ms: float
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def confident(self) -> bool:
        """Some result is at least a partial match: not only the least-bad noise."""
        return any(hit.confidence is not scoring.Confidence.WEAK for hit in self.hits)


def _check(query: RecallQuery) -> str:
    text = normalise_query(query.query or "")
    if not text:
        raise ValidationFailed("The query is empty.", error_code="EMPTY_QUERY")
    if len(text) > MAX_QUERY_CHARS:
        raise ValidationFailed(f"The query is longer than {MAX_QUERY_CHARS} characters.", error_code="QUERY_TOO_LONG")
    if not 1 <= query.limit <= MAX_LIMIT:
        raise ValidationFailed(f"limit must be between 1 and {MAX_LIMIT}.", error_code="INVALID_LIMIT")
    if query.as_of is not None and timezone.is_naive(query.as_of):
        raise ValidationFailed("as_of must include a timezone.", error_code="INVALID_DATE")
    return text


def statistics_rule(principal: Principal) -> sql.ChunkFilter:
    """The reader's whole read rule, not a query's narrowing: what the term statistics count under."""
    return sql.ChunkFilter(
        organization_id=principal.organization_id,
        scope_ids=sorted(principal.readable_scope_ids),
        clearance_rank=principal.clearance_rank,
        moment=timezone.now(),
    )


def _term_statistics(rule: sql.ChunkFilter, terms: list[str]) -> tuple[int, dict[str, int]]:
    """How many chunks the reader may see, and each term's document frequency among them (-1 for a
    stop word, at most DF_CAP).

    `rule` is the reader's read rule (every readable scope, their clearance): the statistics never
    count what this reader cannot see, so nobody's hidden writes move their scores. They are exact
    and current: kept at write time (memories_termcount), not cached.
    """
    total, frequencies = sql.term_document_frequencies(rule, terms, DF_CAP)
    return max(1, total), frequencies


def _term_weights(
    terms: list[str], total: int, frequencies: dict[str, int]
) -> tuple[list[str], list[float], list[bool], list[int]]:
    """Drop stop words; weight each remaining term by its rarity among the chunks the reader may see
    (`total` and `frequencies`, from _term_statistics or typo correction).

    Also says which terms are common (see COMMON_SHARE): those do not select lexical candidates on
    their own (see sql.lexical_hits); and returns each kept term's document frequency.
    """
    common_from = min(DF_CAP, max(COMMON_FLOOR, int(total * COMMON_SHARE)))
    kept: list[str] = []
    weights: list[float] = []
    common: list[bool] = []
    kept_frequencies: list[int] = []
    for term in terms:
        df = frequencies[term]
        if df < 0:
            continue
        weight = idf(df, max(total, df))
        if is_identifier(term):
            weight *= scoring.PARAMS.identifier_boost
        kept.append(term)
        weights.append(weight)
        common.append(df >= common_from)
        kept_frequencies.append(df)
    return kept, weights, common, kept_frequencies


def _correct_typos(rule: sql.ChunkFilter, terms: list[str], frequencies: list[int]) -> tuple[list[str], dict[str, int]]:
    """Short keyword queries: a word of at least 5 letters that no visible chunk contains is replaced by
    the spelling one edit away that occurs in the most visible chunks ("discont" → discount,
    "parkng" → parking), looked up among the words of the chunks the reader may see.

    Words that do occur are never touched, so exact matches keep winning; and a word only hidden
    memories hold is never proposed. Also returns the frequencies of the corrected terms (for
    _term_weights).
    """
    if not terms or len(terms) > TYPO_MAX_TERMS:
        return terms, {}
    unseen = [t for t, df in zip(terms, frequencies, strict=True) if df == 0 and typo_candidate(t)]
    if not unseen:
        return terms, {}
    variants = {term: one_edit_variants(term) for term in unseen}
    known, visible = sql.typo_corrections(rule, sorted(set().union(*variants.values())), DF_CAP)
    if not known:
        return terms, {}
    # One spelling per lexeme (the first in code-point order; sql.typo_corrections counted those):
    # spellings of one stem match the same chunks.
    spellings = {lexeme: spelling for spelling, lexeme in sorted(known.items(), reverse=True)}
    corrected = list(terms)
    for i, term in enumerate(terms):
        # The correction most visible chunks contain (then alphabetical, for a stable answer).
        options = sorted(
            (-visible[spelling], spelling)
            for spelling in {spellings[known[v]] for v in variants.get(term, ()) if v in known}
            if visible.get(spelling, 0) > 0
        )
        if options:
            corrected[i] = options[0][1]
    return corrected, {**dict(zip(terms, frequencies, strict=True)), **visible}


_HYPHENATED_WORD = re.compile(r"[a-z]+(?:-[a-z]+)+")


def _names_a_code(term: str) -> bool:
    """An identifier as the absolute match understands it: a ticket id, error code, version or path —
    not a hyphenated word ("e-bike", "on-call"), which is_identifier keeps whole for the lexical side
    but which names nothing."""
    return is_identifier(term) and not _HYPHENATED_WORD.fullmatch(term)


def _names_nothing_visible(text: str, terms: list[str], frequencies: list[int]) -> bool:
    """Whether the query names an identifier or a proper name (capitalised, not the first word) that
    occurs in no chunk the reader may see."""
    first = query_terms(text)[:1]
    return any(
        df == 0 and (_names_a_code(term) or (term[:1].isupper() and term[1:].islower() and term not in first))
        for term, df in zip(terms, frequencies, strict=True)
    )


def _snippet(text: str, terms: Sequence[str]) -> str:
    lowered = text.lower()
    positions = [lowered.find(t.lower()) for t in terms]
    found = [p for p in positions if p >= 0]
    if len(text) <= SNIPPET_CHARS:
        return text.strip()
    start = max(0, min(found) - SNIPPET_CHARS // 4) if found else 0
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 40 else start
    end = min(len(text), start + SNIPPET_CHARS)
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > start + SNIPPET_CHARS // 2 else end
    return ("…" if start > 0 else "") + re.sub(r"\s+", " ", text[start:end]).strip() + ("…" if end < len(text) else "")


@dataclass(frozen=True)
class _Candidate:
    strength: float
    dense: float
    lexical: float
    chunk: sql.ScoredChunk
    earlier_version_id: Any = None
    # Its own absolute match before the absent-name factor: fused strength less the penalty for the
    # identifiers it lacks (not for rare words: see _Scorer).
    match: float = 0.0


@dataclass(frozen=True)
class _Scorer:
    """Turns a scored chunk into a candidate: calibrated dense and lexical strength, fused per mode,
    less the penalty for selective query terms (identifiers, rare words) that other candidates hold
    and this one lacks. Dense similarity cannot tell twenty notes from one template apart; the one
    holding the queried ticket id or codeword can."""

    mode: scoring.RankingMode
    calibration: scoring.Calibration
    weights: list[float]
    has_terms: bool
    # Per term: its weight when it is selective and some candidate holds it, else 0.
    selective: tuple[float, ...] = ()
    # The same for identifiers only (_names_a_code). The absolute match is penalised for lacking
    # these alone: lacking the ticket id another memory holds means "not the answer", whereas a rare
    # word another chunk happens to hold ("dropping", "shift") breaks ties between look-alikes in
    # the ranking but says nothing about how well this memory answers.
    code_selective: tuple[float, ...] = ()

    def __call__(self, chunk: sql.ScoredChunk) -> _Candidate:
        d = scoring.dense_strength(chunk.similarity, self.calibration)
        lx = (
            scoring.lexical_strength(chunk.body_hits, chunk.title_hits, self.weights, scoring.PARAMS.title_share)
            if self.has_terms
            else 0.0
        )
        strength = match = scoring.strength_for(self.mode, d, lx)
        if self.selective and self.mode is not scoring.RankingMode.DENSE:
            strength *= 1.0 - scoring.PARAMS.miss_penalty * scoring.missing_share(chunk.body_hits, self.selective)
            match *= 1.0 - scoring.PARAMS.miss_penalty * scoring.missing_share(chunk.body_hits, self.code_selective)
        return _Candidate(strength, d, lx, chunk, match=match)


def _selective_weights(
    terms: list[str], weights: list[float], frequencies: list[int], chunks: list[sql.ScoredChunk]
) -> tuple[float, ...]:
    """Which query terms are selective — an identifier, or a word in at most `rare_df` chunks the
    reader may see — and held by at least one candidate (a term nobody holds tells nobody apart)."""
    held = [any(chunk.body_hits[i] for chunk in chunks) for i in range(len(terms))]
    rare = scoring.PARAMS.rare_df
    return tuple(
        weight if held[i] and (is_identifier(term) or frequencies[i] <= rare) else 0.0
        for i, (term, weight) in enumerate(zip(terms, weights, strict=True))
    )


def _fold(chunks: list[sql.ScoredChunk], score: _Scorer) -> tuple[dict[Any, _Candidate], dict[Any, _Candidate]]:
    """Best chunk per memory, for current memories and for earlier (superseded) versions apart.
    A chunk with no strength at all (below the unrelated floor, no term in common) is no match."""
    current: dict[Any, _Candidate] = {}
    earlier: dict[Any, _Candidate] = {}
    for chunk in chunks:
        candidate = score(chunk)
        if candidate.strength <= 0.0:
            continue
        into = earlier if chunk.superseded else current
        if chunk.memory_id not in into or candidate.strength > into[chunk.memory_id].strength:
            into[chunk.memory_id] = candidate
    return current, earlier


def _lead_to_current_versions(
    best: dict[Any, _Candidate],
    earlier: dict[Any, _Candidate],
    score: _Scorer,
    vector: Any,
    terms: list[str],
    where: sql.ChunkFilter,
) -> dict[Any, _Candidate]:
    """Each matching earlier version passes its strength on to the current version of its chain.

    The current version must be visible under `where` (the read rule, active only); one that did
    not match by itself is scored now, so its own best chunk is the snippet.
    """
    if not earlier:
        return best
    # Identifiers the query names (and some candidate holds): a real later version may reword
    # everything else, but it answers for an id only if it still names it.
    identifiers = [w if is_identifier(term) else 0.0 for term, w in zip(terms, score.selective, strict=False)]
    heads = sql.current_versions(list(earlier))
    missing = sorted({head for head in heads.values() if head not in best}, key=str)
    if missing:
        for chunk in sql.score_chunks(missing, vector, terms, replace(where, earlier_versions=False), of_memories=True):
            candidate = score(chunk)
            known = best.get(chunk.memory_id)
            if known is None or (candidate.strength, candidate.chunk.similarity) > (known.strength, known.chunk.similarity):
                best[chunk.memory_id] = candidate
    for earlier_id, head in sorted(heads.items(), key=lambda item: -earlier[item[0]].strength):
        inherited = earlier[earlier_id].strength
        if head in best and _holds_what_the_other_lacks(earlier[earlier_id].chunk, best[head].chunk, identifiers):
            continue  # the old one named the ticket asked about, the current one does not: no answer by proxy
        if head in best and inherited > best[head].strength:
            best[head] = replace(best[head], strength=inherited, earlier_version_id=earlier_id)
    return {memory_id: c for memory_id, c in best.items() if c.strength > 0.0}


def _holds_what_the_other_lacks(holder: sql.ScoredChunk, other: sql.ScoredChunk, selective: Sequence[float]) -> bool:
    """Whether `holder` contains a selective query term (identifier, rare word) that `other` lacks."""
    return any(w > 0 and has and not lacks for w, has, lacks in zip(selective, holder.body_hits, other.body_hits, strict=False))


def _share_between_versions(
    pool: list[tuple[sql.MemoryRow, _Candidate]], threshold: float | None, selective: Sequence[float]
) -> list[float]:
    """Strengths after versions share: a candidate whose best chunk says nearly the same as an older
    candidate's is at least as relevant as that older one, so the blend's recency prefers it.

    Never when the older holds a selective query term the newer lacks: a note from the same template
    with another ticket id is a look-alike, not a version. (Two memories of one supersession chain
    never meet here — recall already leads an earlier version to its current one — and an
    `external_id` is unique, so near-identical content is what remains to recognise.) Computed over
    all similar pairs at once: a templated pool has hundreds of them.
    """
    strengths = np.array([candidate.strength for _memory, candidate in pool], dtype=np.float64)
    if threshold is None or len(pool) < 2:
        return strengths.tolist()
    first, second = _similar_pairs([candidate.chunk.embedding for _memory, candidate in pool], threshold)
    moments = np.array([row.valid_from.timestamp() for row, _candidate in pool])
    first_newer = moments[first] > moments[second]
    newer, older = np.where(first_newer, first, second), np.where(first_newer, second, first)
    shares = moments[first] != moments[second]
    wanted = np.array(selective, dtype=np.float64) > 0
    if wanted.any():
        hits = np.array([candidate.chunk.body_hits for _memory, candidate in pool], dtype=bool)
        shares &= ~np.any(hits[older] & wanted & ~hits[newer], axis=1)
    shared = strengths.copy()
    np.maximum.at(shared, newer[shares], strengths[older[shares]])
    return shared.tolist()


def _similar_pairs(vectors: Sequence[np.ndarray | None], threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Positions (i, j), i < j, of the vectors whose cosine similarity is at least `threshold`, as two
    arrays; a missing vector (a chunk mid re-embed) pairs with nothing. The vectors came with the
    candidates (sql.retrieve), so this costs no round trip; computed as pgvector's `1 - (a <=> b)` is
    (cosine clamped to [-1, 1], a zero vector similar to nothing), in double precision."""
    present = np.array([i for i, vector in enumerate(vectors) if vector is not None], dtype=np.intp)
    if len(present) < 2:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    matrix = np.vstack([vector for vector in vectors if vector is not None])
    norms = np.einsum("ij,ij->i", matrix, matrix)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = (matrix @ matrix.T) / np.sqrt(np.outer(norms, norms))
    similarity = 1.0 - (1.0 - np.clip(cosine, -1.0, 1.0))
    rows, cols = np.nonzero(np.triu(similarity >= threshold, k=1))
    return present[rows], present[cols]


# Query vectors of this process, most recent last: a repeated query (paging, typing, an agent
# asking again) skips the model. Keyed by the embedder instance and its model's signature, so a
# reconfigured embedder (a new instance) never reuses another's vectors.
QUERY_CACHE_SIZE = 512
_query_vectors: OrderedDict[tuple[int, str, str, int, str], Any] = OrderedDict()
_query_vectors_lock = threading.Lock()


def _query_vector(text: str) -> Any:
    embedder = get_embedder()
    key = (id(embedder), *signature_of(embedder), text)
    with _query_vectors_lock:
        vector = _query_vectors.get(key)
        if vector is not None:
            _query_vectors.move_to_end(key)
    if vector is not None:
        check_signature(embedder, record_if_missing=False)  # the store's model guard still applies
        return vector
    vector = embed_for_store([text], for_write=False)[0]
    with _query_vectors_lock:
        _query_vectors[key] = vector
        while len(_query_vectors) > QUERY_CACHE_SIZE:
            _query_vectors.popitem(last=False)
    return vector


def _match(strength: float, candidate: _Candidate) -> float:
    """Absolute match before the absent-name factor: the candidate's own match, or the strength it
    ranks with when that is higher (inherited from an earlier version or a near-identical older one)."""
    return max(strength, candidate.match)


def _mode() -> scoring.RankingMode:
    return scoring.RankingMode(getattr(settings, "CORTEX_RANKING_MODE", "full"))


def recall(principal: Principal, query: RecallQuery, *, audit: bool = True, exact: bool = False) -> RecallResult:
    """Ranked memories for a query; see the module docstring. `exact` bypasses the HNSW index."""
    started = time.perf_counter()
    text = _check(query)
    scope_ids = (
        sorted(readable_scope_ids_named(principal, query.scopes)) if query.scopes else sorted(principal.readable_scope_ids)
    )
    moment = query.as_of or timezone.now()
    where = sql.ChunkFilter(
        organization_id=principal.organization_id,
        scope_ids=scope_ids,
        clearance_rank=principal.clearance_rank,
        moment=moment,
        as_of=query.as_of,
        category=query.category.lower() if query.category else None,
        source=query.source or None,
        tags=[t.lower() for t in query.tags],
        earlier_versions=True,
    )
    mode = _mode()

    vector = _query_vector(text)
    embedded = time.perf_counter()
    # Where the server time goes, phase by phase (bench/recall.py reports these; cheap to keep).
    phases: dict[str, float] = {}
    mark = embedded

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[f"{name}_ms"] = round((now - mark) * 1000, 3)
        mark = now

    rule = statistics_rule(principal)
    terms = query_terms(text)
    total, counted = _term_statistics(rule, terms)
    terms, weights, common, frequencies = _term_weights(terms, total, counted)
    corrected, counted = _correct_typos(rule, terms, frequencies)
    if corrected != terms:
        terms, weights, common, frequencies = _term_weights(corrected, total, counted)
    lap("terms")
    # Dense and lexical candidates, scored, in one statement. Chunks of one memory (and earlier
    # versions) crowd each other out of the dense ones; widen until `limit` current memories or
    # nothing more.
    k = max(query.limit * 4, 40)
    scored: list[sql.ScoredChunk] = []
    while scope_ids:
        scored = sql.retrieve(
            vector, terms, weights, where, dense_k=k, lexical_k=max(query.limit * 4, 40), common=common, exact=exact
        )
        dense = [chunk for chunk in scored if chunk.from_dense]
        if len({c.memory_id for c in dense if not c.superseded}) >= query.limit or len(dense) < k or k >= 2000:
            break
        k *= 4
    lap("retrieve")

    params = scoring.PARAMS
    selective = _selective_weights(terms, weights, frequencies, scored)
    score = _Scorer(
        mode,
        scoring.CALIBRATIONS.get(get_embedder().name, scoring.DEFAULT_CALIBRATION),
        weights,
        bool(terms),
        selective,
        tuple(w if _names_a_code(term) else 0.0 for term, w in zip(terms, selective, strict=True)),
    )
    best, earlier = _fold(scored, score)
    lap("fold")
    best = _lead_to_current_versions(best, earlier, score, vector, terms, where)
    lap("versions")

    # The pool: the strongest candidates the read rule lets through, checked on their memory rows
    # (which came with the candidates: Memory objects are loaded for the returned hits only).
    size = max(params.pool_size, query.limit)
    pool: list[tuple[sql.MemoryRow, _Candidate]] = []
    for _memory_id, candidate in sorted(best.items(), key=lambda item: -item[1].strength):
        row = candidate.chunk.memory
        # Defence in depth: the SQL filtered already; the Principal has the last word.
        if row is not None and principal.can_read_memory(row, as_of=query.as_of):
            pool.append((row, candidate))
            if len(pool) == size:
                break
    lap("pool")
    effective = _share_between_versions(pool, params.version_similarity, score.selective)
    lap("share")
    top = max(effective, default=0.0)
    kept = [(pair, strength) for pair, strength in zip(pool, effective, strict=True) if strength >= params.min_share * top]
    pool, effective = [pair for pair, _ in kept], [strength for _, strength in kept]
    half_life = settings.CORTEX_RECENCY_HALF_LIFE_DAYS
    # A query naming something no visible memory holds (an id, a name) has no exact answer here:
    # every candidate's absolute match says so. Uniform, so the ranking does not move.
    unmatched = _names_nothing_visible(text, terms, frequencies)
    absent = 1.0 - params.miss_penalty if unmatched else 1.0
    # Rank first, then build results (memories, snippets, earlier versions) for the `limit` returned only.
    ranked_pool: list[tuple[float, float, float, sql.MemoryRow, _Candidate, float]] = []
    for (row, candidate), strength in zip(pool, effective, strict=True):
        rel = scoring.spread(strength, top, params.spread_power)
        rec = scoring.recency(row.valid_from, moment, half_life)
        ranked_pool.append((round(scoring.final_score(mode, rel, rec), 6), round(rel, 6), rec, row, candidate, strength))
    ranked_pool.sort(key=lambda e: (-e[0], -e[1], -e[3].valid_from.timestamp(), str(e[3].pk)))
    returned = ranked_pool[: query.limit]
    wanted = [row.pk for *_rest, row, _candidate, _strength in returned]
    memories = sql.memories_with_authors(wanted) if wanted else {}
    # Their scopes are among the reader's, which the Principal has loaded already: no join for them.
    scopes = {scope.pk: scope for scope in principal.readable_scopes()}
    for memory in memories.values():
        if memory.scope_id in scopes:
            memory.scope = scopes[memory.scope_id]
    via_ids = [c.earlier_version_id for *_rest, c, _strength in returned if c.earlier_version_id is not None]
    via = (
        {pk: m for pk, m in Memory.objects.in_bulk(via_ids).items() if principal.can_read_memory(m, history=True)}
        if via_ids
        else {}
    )
    hits = [
        RecallHit(
            memory=memories[row.pk],
            score=score_value,
            relevance=relevance,
            recency=round(rec, 6),
            snippet=_snippet(candidate.chunk.text, terms),
            chunk_index=candidate.chunk.index,
            dense=round(candidate.dense, 6),
            lexical=round(candidate.lexical, 6),
            match=round(_match(strength, candidate) * absent, 6),
            confidence=scoring.confidence(_match(strength, candidate) * absent),
            similarity=round(candidate.chunk.similarity, 6),
            earlier_version=via.get(candidate.earlier_version_id),
        )
        for score_value, relevance, rec, row, candidate, strength in returned
        # Re-checked on the loaded memory too: one changed since the candidates were read is left out.
        if row.pk in memories and principal.can_read_memory(memories[row.pk], as_of=query.as_of)
    ]
    lap("rank")
    finished = time.perf_counter()
    if audit:
        record(
            "memory.recall",
            organization=principal.organization_id,
            actor=principal.actor,
            details={
                "query": text[:200],
                "limit": query.limit,
                "filters": {
                    "scopes": list(query.scopes or []),
                    "category": query.category,
                    "tags": list(query.tags),
                    "source": query.source,
                    "as_of": query.as_of,
                },
                "results": [str(h.memory.pk) for h in hits],
            },
        )
    return RecallResult(
        hits=hits,
        took_ms=round((time.perf_counter() - started) * 1000, 1),
        timings={
            "embed_ms": round((embedded - started) * 1000, 2),
            "search_ms": round((finished - embedded) * 1000, 2),
            **phases,
        },
    )
