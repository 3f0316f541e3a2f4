"""Bring-your-own-key LLM providers behind one small contract (see ``base``).

Callers import from here: ``get_llm()`` for the configured provider (or None),
``Generation`` for answers, and the two exceptions to handle.
"""

from memories.llm.base import Generation, LLMInvalidOutput, LLMProvider, LLMUnavailable
from memories.llm.factory import build_llm, get_llm

__all__ = [
    "Generation",
    "LLMInvalidOutput",
    "LLMProvider",
    "LLMUnavailable",
    "build_llm",
    "get_llm",
]
