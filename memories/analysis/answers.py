"""Composing an answer to a question from memories a principal may read, every sentence cited.

Two composers share one output: numbered sources (the memories given as context, best first)
and sentences that each carry the numbers of the sources they rest on.

- **Extractive** (always available): the sentences of the sources that share the most rare
  question words, quoted verbatim, at most one or two per source — nothing is written that the
  sources do not say.
- **LLM** (when a provider is configured): the model writes the answer from the numbered
  sources with [n] markers; every marker is checked against the sources given, a sentence left
  with no valid marker is dropped, and when nothing survives (or the model fails) the
  extractive answer is used instead.

The caller decides what the sources are (recall, under the principal's rights) and whether
there is anything confident enough to answer from.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from memories.analysis.text import content_words, sentences
from memories.llm.base import LLMInvalidOutput, LLMProvider, LLMUnavailable

MAX_SENTENCES = 4
MAX_SENTENCE_CHARS = 400
_MARKER = re.compile(r"\s*\[(\d{1,2})\]")
# A sentence worth quoting carries at least this share of the best sentence's question words.
MIN_SHARE_OF_BEST = 0.5


@dataclass(frozen=True)
class Source:
    number: int
    title: str
    text: str


@dataclass(frozen=True)
class Sentence:
    text: str
    citations: tuple[int, ...]


@dataclass(frozen=True)
class Answer:
    sentences: list[Sentence]
    composer: str  # "extractive" or "<provider>:<model>"
    notes: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(f"{s.text} {''.join(f'[{n}]' for n in s.citations)}" for s in self.sentences)


def extractive_answer(question: str, sources: list[Source]) -> Answer:
    """The best-matching sentences of the sources, quoted and cited (see the module docstring)."""
    wanted = content_words(question)
    per_source = [[(span.text, content_words(span.text)) for span in sentences(s.text)] for s in sources]
    # A question word found in few sentences says more than one found everywhere.
    frequency: Counter[str] = Counter(w for spans in per_source for _, words in spans for w in words & wanted)
    total = max(1, sum(len(spans) for spans in per_source))
    scored: list[tuple[float, int, int, str]] = []
    for index, spans in enumerate(per_source):
        for position, (text, words) in enumerate(spans):
            overlap = words & wanted
            if not overlap or len(text) > MAX_SENTENCE_CHARS:
                continue
            weight = sum(math.log(1 + total / frequency[w]) for w in overlap)
            # Earlier sources ranked higher in recall; earlier sentences tend to state the point.
            scored.append((weight * (1.0 - 0.05 * index) * (1.0 - 0.02 * min(position, 10)), index, position, text))
    scored.sort(key=lambda item: (-item[0], item[1], item[2]))
    chosen: list[tuple[int, int, str]] = []
    used: Counter[int] = Counter()
    best = scored[0][0] if scored else 0.0
    for weight, index, position, text in scored:
        if len(chosen) >= MAX_SENTENCES or used[index] >= 2 or weight < MIN_SHARE_OF_BEST * best:
            continue
        chosen.append((index, position, text))
        used[index] += 1
    # Read in the order the sources and their sentences come.
    chosen.sort()
    return Answer([Sentence(text, (sources[index].number,)) for index, _position, text in chosen], "extractive")


PROMPT = """Answer the question using only the numbered sources below. They are memories of the
asker's team. After every sentence put the number(s) of the source(s) it rests on, like [1] or
[2][3]. If the sources do not answer the question, say "The sources do not say." and nothing
else. Be brief: at most four sentences. Never invent facts, names or numbers.

Question: {question}

Sources:
{sources}
"""


def llm_answer(question: str, sources: list[Source], llm: LLMProvider) -> Answer:
    """The model's answer, with every citation checked; the extractive answer when it fails."""
    listing = "\n\n".join(f"[{s.number}] {s.title}\n{s.text[:2000]}" for s in sources)
    fallback_note = ""
    try:
        generation = llm.generate(PROMPT.format(question=question, sources=listing), max_output_tokens=600)
    except (LLMUnavailable, LLMInvalidOutput) as exc:
        fallback_note = f"The language model was unavailable ({exc}); the answer quotes the sources instead."
    else:
        known = {s.number for s in sources}
        kept: list[Sentence] = []
        dropped = 0
        for span in sentences(generation.text):
            cited = tuple(dict.fromkeys(int(n) for n in _MARKER.findall(span.text) if int(n) in known))
            text = _MARKER.sub("", span.text).strip()
            if not text:
                continue
            if not cited:
                dropped += 1
                continue
            kept.append(Sentence(text, cited))
        if kept:
            notes = [f"{dropped} sentence(s) without a valid citation were left out."] if dropped else []
            return Answer(kept, generation_label(generation.provider, generation.model), notes)
        fallback_note = "The language model's answer cited none of the sources; the answer quotes them instead."
    answer = extractive_answer(question, sources)
    return Answer(answer.sentences, answer.composer, [fallback_note])


def generation_label(provider: str, model: str) -> str:
    return f"{provider}:{model}"
