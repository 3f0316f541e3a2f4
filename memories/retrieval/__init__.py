"""Hybrid retrieval internals: query terms, the candidate SQL, and scoring.

`memories.selectors.recall` is the public entry point; these modules are its parts.
"""
