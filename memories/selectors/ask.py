"""Ask: a question answered from the memories the asker may read, every sentence cited.

The question runs through recall with the asker's rights (so nothing they may not read can
reach the composer), only results that are at least a partial match become numbered sources,
and the answer is composed from those alone (memories.analysis.answers). When recall has no
confident match — or the sources hold no sentence about the question — Ask says it does not
know instead of composing from noise. One audit event records the question, the sources and
which composer answered.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from audit.services import record
from memories.access import Principal
from memories.analysis.answers import Answer, Source, extractive_answer, llm_answer
from memories.llm import get_llm
from memories.retrieval.scoring import Confidence
from memories.selectors.recall import RecallHit, RecallQuery, recall

MAX_SOURCES = 8
DONT_KNOW = "I don't know: nothing you can read in Cortex answers this confidently."


@dataclass(frozen=True)
class AskResult:
    question: str
    answer: Answer | None  # None: Cortex does not know
    sources: list[RecallHit]  # numbered from 1, in this order
    took_ms: float

    @property
    def confident(self) -> bool:
        return self.answer is not None

    @property
    def text(self) -> str:
        return self.answer.text if self.answer is not None else DONT_KNOW

    def cited(self) -> set[int]:
        return {n for s in (self.answer.sentences if self.answer else []) for n in s.citations}


def ask(principal: Principal, question: str, *, scopes: Sequence[str] | None = None, limit: int = 5) -> AskResult:
    started = time.perf_counter()
    found = recall(principal, RecallQuery(query=question, limit=min(limit, MAX_SOURCES), scopes=scopes), audit=False)
    sources = [hit for hit in found.hits if hit.confidence is not Confidence.WEAK] if found.confident else []
    answer: Answer | None = None
    if sources:
        numbered = [Source(number, hit.memory.title, hit.memory.content) for number, hit in enumerate(sources, start=1)]
        llm = get_llm()
        answer = llm_answer(question, numbered, llm) if llm is not None else extractive_answer(question, numbered)
        if not answer.sentences:
            answer, sources = None, []
    result = AskResult(question, answer, sources, round((time.perf_counter() - started) * 1000, 1))
    record(
        "memory.ask",
        organization=principal.organization_id,
        actor=principal.actor,
        details={
            "question": question[:200],
            "sources": [str(hit.memory.pk) for hit in result.sources],
            "cited": sorted(result.cited()),
            "composer": answer.composer if answer else None,
            "confident": result.confident,
        },
    )
    return result
