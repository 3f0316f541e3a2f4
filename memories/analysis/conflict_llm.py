"""The LLM conflict judgement: a structured answer that reasons before it decides.

The schema puts `reasoning` and `same_subject` before `verdict`, so the model writes out
what each memory claims and whether they are about the same thing before it commits; a
pair that is not about the same subject is never a conflict, whatever the verdict says.
"""

from __future__ import annotations

from typing import Any

from memories.analysis.conflicts import Memo, Verdict
from memories.llm import LLMInvalidOutput, LLMProvider

MAX_CONTENT_CHARS = 4000

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["reasoning", "same_subject", "verdict", "outdated", "confidence", "explanation"],
    "properties": {
        "reasoning": {
            "type": "string",
            "description": "What each memory claims, and how the claims relate. Written before the verdict.",
        },
        "same_subject": {"type": "boolean", "description": "Do both make comparable statements about the same subject?"},
        "verdict": {"type": "string", "enum": ["contradiction", "duplicate", "stale", "none"]},
        "outdated": {"type": "string", "enum": ["existing", "new", "neither"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "explanation": {"type": "string", "description": "One line for a person deciding the conflict."},
    },
}

SYSTEM = (
    "You compare two entries of a team's knowledge base and decide whether they conflict. Most related entries do NOT "
    "conflict: different aspects of one topic, different variants (tiers, environments, regions, periods), a rule and its "
    "exception, a plan and its follow-up, or two separate events are all compatible. Decide 'contradiction' only when both "
    "answer the same question differently (a number, date, version, yes/no or named choice) and neither says it replaces "
    "the other; 'stale' when one is outdated because the other explicitly replaces it or its validity has ended; "
    "'duplicate' when both carry the same information with nothing material added. Judge the statements, not the wording."
)


def _describe(label: str, memo: Memo, source: str) -> str:
    content = memo.content if len(memo.content) <= MAX_CONTENT_CHARS else memo.content[:MAX_CONTENT_CHARS] + " […]"
    until = f", valid until {memo.valid_until:%Y-%m-%d}" if memo.valid_until else ""
    return (
        f"<{label}>\nTitle: {memo.title}\nSource: {source}\nValid from {memo.valid_from:%Y-%m-%d}{until}\n\n{content}\n</{label}>"
    )


def classify_with_llm(
    llm: LLMProvider, existing: Memo, new: Memo, *, existing_source: str, new_source: str, similarity: float
) -> Verdict:
    """One structured judgement. Raises LLMUnavailable / LLMInvalidOutput for the caller to fall back."""
    prompt = (
        "The EXISTING entry was stored first; the NEW entry was just stored. Their embedding similarity is "
        f"{similarity:.2f}, which only means they are about related things.\n\n"
        + _describe("EXISTING", existing, existing_source)
        + "\n\n"
        + _describe("NEW", new, new_source)
        + "\n\nFirst reason about what each claims, then decide. For 'stale', say which one is outdated."
    )
    generation = llm.generate(prompt, json_schema=SCHEMA, system=SYSTEM, max_output_tokens=700, temperature=0.0)
    data = generation.data
    if not isinstance(data, dict):
        raise LLMInvalidOutput("expected an object")
    explanation = " ".join(str(data["explanation"]).split())[:300] or "The model gave no explanation."
    verdict = data["verdict"]
    if verdict == "none" or not data["same_subject"]:
        return Verdict(None, float(data["confidence"]), explanation, classifier=_label(llm))
    outdated = data["outdated"] if data["outdated"] in {"existing", "new"} else None
    if verdict == "stale" and outdated is None:
        # The model said stale without saying which: the older one is the outdated one.
        outdated = "existing" if new.valid_from >= existing.valid_from else "new"
    return Verdict(
        verdict, float(data["confidence"]), explanation, outdated=outdated if verdict == "stale" else None, classifier=_label(llm)
    )


def _label(llm: LLMProvider) -> str:
    return str(getattr(llm, "label", f"{llm.name}:{llm.model}"))
