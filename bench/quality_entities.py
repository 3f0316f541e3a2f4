"""Entity extraction precision on the open dev set (bench/quality/memories.jsonl), heuristic extractor.

    .venv/bin/python bench/quality_entities.py [--extractor path/to/entities.py] [--show-wrong]

Every memory (title + content, as the post-write step reads it) goes through
`heuristic_extract`, with the dev set's 38 authors as the organization's known people (in
production: the members' names and the memory's author). Each entity recorded for a memory is
one *mention*; bench/quality/entity_labels.json holds a hand label for every name an extractor
has proposed — its right kind, or null when it is not a named entity (a rate like "100/min.", a
role, an imperative like "Get VPN", a name cut in half).

- name precision: mentions whose name is a real entity;
- typed precision: mentions whose name is real and whose kind is right ("other" for a customer or
  vendor counts as right, as it is vaguer but not wrong; a person as "other" is wrong).

A name without a label stops the run: label it first, so no figure silently ignores it.
`--no-people` extracts without them. `--extractor` measures another version of
memories/analysis/entities.py (e.g. the one before a change, from `git show`).
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEV_SET = ROOT / "bench" / "quality" / "memories.jsonl"
LABELS = ROOT / "bench" / "quality" / "entity_labels.json"
VAGUE_OK = {"customer", "vendor", "project"}


def load_extractor(path: str | None) -> Callable[..., Any]:
    sys.path.insert(0, str(ROOT))
    if path is None:
        from memories.analysis.entities import heuristic_extract

        return heuristic_extract
    spec = importlib.util.spec_from_file_location("measured_entities", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module.heuristic_extract  # type: ignore[no-any-return]


def measure(extract: Callable[..., Any], *, with_people: bool = True) -> dict[str, Any]:
    memories = [json.loads(line) for line in DEV_SET.read_text().splitlines() if line.strip()]
    labels: dict[str, str | None] = {k: v for k, v in json.loads(LABELS.read_text()).items() if not k.startswith("_")}
    people = sorted({m["author_name"] for m in memories if m.get("author_name")})
    takes_people = with_people and "people" in inspect.signature(extract).parameters
    mentions: list[tuple[str, str]] = []
    for memory in memories:
        text = f"{memory['title']}\n\n{memory['content']}"
        found = extract(text, people=people) if takes_people else extract(text)
        mentions.extend((e.kind, e.name) for e in found.entities)
    unlabelled = sorted({name for _kind, name in mentions if name not in labels})
    if unlabelled:
        raise SystemExit(f"label these names in {LABELS.relative_to(ROOT)} first: {unlabelled}")
    real = [(kind, name) for kind, name in mentions if labels[name] is not None]
    typed = [(k, n) for k, n in real if labels[n] == k or (k == "other" and labels[n] in VAGUE_OK)]
    by_kind: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for kind, name in mentions:
        by_kind[kind][1] += 1
        if labels[name] is not None and (labels[name] == kind or (kind == "other" and labels[name] in VAGUE_OK)):
            by_kind[kind][0] += 1
    people_mentions = [(k, n) for k, n in mentions if labels[n] == "person"]
    return {
        "memories": len(memories),
        "mentions": len(mentions),
        "real_mentions": len(real),
        "name_precision": len(real) / len(mentions),
        "typed_precision": len(typed) / len(mentions),
        "by_kind": dict(sorted(by_kind.items())),
        "people_typed_person": sum(1 for k, _n in people_mentions if k == "person") / max(1, len(people_mentions)),
        "wrong": collections.Counter(f"{k}:{n}" for k, n in mentions if (k, n) not in typed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extractor", help="path of another memories/analysis/entities.py to measure")
    parser.add_argument("--no-people", action="store_true", help="extract without the known people (names alone)")
    parser.add_argument("--show-wrong", action="store_true", help="list the mentions counted as wrong")
    args = parser.parse_args()
    result = measure(load_extractor(args.extractor), with_people=not args.no_people)
    print(f"{result['memories']} memories, {result['mentions']} entity mentions, {result['real_mentions']} of real entities")
    print(f"name precision  {result['name_precision']:.3f}")
    print(f"typed precision {result['typed_precision']:.3f}")
    print(f"people's mentions typed person {result['people_typed_person']:.3f}")
    for kind, (right, total) in result["by_kind"].items():
        print(f"  {kind:<9} {right:>4}/{total:<4} {right / total:.3f}")
    if args.show_wrong:
        for name, count in result["wrong"].most_common():
            print(f"  wrong {count:>3}  {name}")


if __name__ == "__main__":
    main()
