#!/usr/bin/env python3
"""Validate the Cortex open retrieval dev set (stdlib only).

Usage: python bench/quality/validate.py
Exit status 0 when every check passes, 1 otherwise.
"""

import json
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
SCOPES = {"engineering", "sre", "sales", "hr", "finance", "legal", "product", "support", "public-docs"}
CATEGORIES = {"decision", "policy", "incident", "runbook", "meeting", "pr", "note", "email", "spec", "faq"}
SOURCES = {"Manual", "GitHub", "Slack", "Gmail", "Google Drive", "Notion", "MCP", "Meeting"}
TYPES = ["paraphrase", "exact_token", "buried_fact", "recency", "short_keyword"]
MEMORY_FIELDS = ["key", "title", "content", "scope", "category", "source", "source_url", "author_name", "tags", "age_days"]
LONG_MIN, BURIED_MIN_OFFSET, MIN_PER_TYPE = 3000, 1500, 15

errors: list[str] = []


def err(msg):
    errors.append(msg)


def load_jsonl(name):
    rows = []
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                err(f"{name}:{n}: invalid JSON ({e})")
    return rows


def check_memories(mems):
    by_key = {}
    for m in mems:
        k = m.get("key")
        for f in MEMORY_FIELDS:
            if f not in m:
                err(f"memory {k!r}: missing field {f}")
        if k in by_key:
            err(f"duplicate memory key {k!r}")
        by_key[k] = m
        if m.get("scope") not in SCOPES:
            err(f"memory {k}: bad scope {m.get('scope')!r}")
        if m.get("category") not in CATEGORIES:
            err(f"memory {k}: bad category {m.get('category')!r}")
        if m.get("source") not in SOURCES:
            err(f"memory {k}: bad source {m.get('source')!r}")
        age = m.get("age_days")
        if not isinstance(age, int) or not 0 <= age <= 700:
            err(f"memory {k}: age_days {age!r} not an int in 0..700")
        if not isinstance(m.get("tags"), list):
            err(f"memory {k}: tags must be a list")
        if not isinstance(m.get("content"), str) or not m["content"].strip():
            err(f"memory {k}: empty content")
    return by_key


def check_queries(queries, by_key):
    ids = set()
    buried_rows = []
    for q in queries:
        qid = q.get("id")
        if qid in ids:
            err(f"duplicate query id {qid!r}")
        ids.add(qid)
        t = q.get("type")
        if t not in TYPES:
            err(f"{qid}: bad type {t!r}")
        if not isinstance(q.get("query"), str) or not q["query"].strip():
            err(f"{qid}: empty query")
        rel = q.get("relevant") or {}
        if not rel:
            err(f"{qid}: no relevant memories")
        for k, g in rel.items():
            if k not in by_key:
                err(f"{qid}: relevant key {k!r} does not exist")
            if g not in (1, 2):
                err(f"{qid}: grade for {k!r} must be 1 or 2, got {g!r}")
        answers = [k for k, g in rel.items() if g == 2 and k in by_key]
        if not answers:
            err(f"{qid}: no grade-2 memory")
        older = q.get("older") or []
        for k in older:
            if k not in by_key:
                err(f"{qid}: older key {k!r} does not exist")
        if t == "recency":
            if not older:
                err(f"{qid}: recency query needs a non-empty 'older'")
            if set(older) & set(rel):
                err(f"{qid}: 'older' and 'relevant' overlap: {sorted(set(older) & set(rel))}")
            for o in older:
                for a in answers:
                    if o in by_key and by_key[o]["age_days"] <= by_key[a]["age_days"]:
                        err(
                            f"{qid}: older {o} (age {by_key[o]['age_days']}) is not older than "
                            f"answer {a} (age {by_key[a]['age_days']})"
                        )
        elif older:
            err(f"{qid}: 'older' is only allowed on recency queries")
        ev = q.get("evidence")
        if not isinstance(ev, str) or not ev:
            err(f"{qid}: missing evidence")
            continue
        hits = [(a, by_key[a]["content"].find(ev)) for a in answers if ev in by_key[a]["content"]]
        if not hits:
            err(f"{qid}: evidence not found in any grade-2 memory: {ev[:60]!r}")
            continue
        if t == "buried_fact":
            key, off = hits[0]
            clen = len(by_key[key]["content"])
            buried_rows.append((qid, key, off, clen))
            if clen < LONG_MIN:
                err(f"{qid}: buried_fact answer {key} is only {clen} chars (< {LONG_MIN})")
            if off < BURIED_MIN_OFFSET:
                err(f"{qid}: buried_fact evidence at offset {off} in {key} (< {BURIED_MIN_OFFSET})")
            for a in answers:
                if len(by_key[a]["content"]) < LONG_MIN:
                    err(f"{qid}: buried_fact grade-2 memory {a} is short")
    return buried_rows


def check_pairs(by_key):
    path = os.path.join(HERE, "pairs.json")
    if not os.path.exists(path):
        err("pairs.json missing")
        return 0, 0
    with open(path, encoding="utf-8") as f:
        pairs = json.load(f)
    for v in pairs.get("versions", []):
        o, n = v["older"], v["newer"]
        if o not in by_key or n not in by_key:
            err(f"pairs.json: unknown key in version pair {o} -> {n}")
            continue
        if by_key[n]["age_days"] >= by_key[o]["age_days"]:
            err(f"pairs.json: newer {n} is not younger than {o}")
    for d in pairs.get("near_duplicates", []):
        for k in d["keys"]:
            if k not in by_key:
                err(f"pairs.json: unknown key {k} in near-duplicate group")
    return len(pairs.get("versions", [])), len(pairs.get("near_duplicates", []))


def table(title, counter):
    print(f"\n{title}")
    for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {k:<16} {v:>4}")


def main():
    mems = load_jsonl("memories.jsonl")
    queries = load_jsonl("queries.jsonl")
    by_key = check_memories(mems)
    buried = check_queries(queries, by_key)
    n_versions, n_dups = check_pairs(by_key)

    types = Counter(q.get("type") for q in queries)
    for t in TYPES:
        if types[t] < MIN_PER_TYPE:
            err(f"only {types[t]} queries of type {t} (need >= {MIN_PER_TYPE})")

    lengths = [len(m["content"]) for m in mems]
    n_long = sum(1 for x in lengths if x >= LONG_MIN)
    print(f"memories: {len(mems)}  (long >= {LONG_MIN} chars: {n_long}; min {min(lengths)}, max {max(lengths)} chars)")
    print(f"queries:  {len(queries)}  version pairs: {n_versions}  near-duplicate groups: {n_dups}")
    table("queries by type", types)
    table("memories by category", Counter(m["category"] for m in mems))
    table("memories by source", Counter(m["source"] for m in mems))
    table("memories by scope", Counter(m["scope"] for m in mems))
    referenced = {k for q in queries for k in list(q.get("relevant", {})) + list(q.get("older") or [])}
    print(
        f"\nmemories referenced by some query: {len(referenced)}; pure distractors: {len(by_key) - len(referenced & set(by_key))}"
    )

    print("\nburied_fact evidence offsets")
    print(f"  {'id':<6} {'memory':<32} {'offset':>6} {'length':>6}")
    for qid, key, off, clen in buried:
        print(f"  {qid:<6} {key:<32} {off:>6} {clen:>6}")

    if errors:
        print(f"\nFAILED: {len(errors)} problem(s)")
        for e in errors:
            print("  -", e)
        return 1
    print("\nOK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
