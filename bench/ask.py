"""Ask on the dev set: is the memory that answers a question among the ones the answer cites?

    .venv/bin/python bench/ask.py [--embedder local|hash] [--set bench/quality] [--write docs/quality.md]

Loads the set (bench/quality/memories.jsonl) as bench/quality.py does, then asks every query of
queries.jsonl through POST /api/ask as an Executive who can read every scope, and every query of
unanswerable.jsonl too. Reports, per query type and overall:
- answered: share of answerable questions Ask answered (did not say "I don't know");
- cited: share of answerable questions whose answer cites a grade-2 memory (the one that answers);
- any relevant cited: share citing a grade-1 or grade-2 memory;
- unanswerable said "I don't know": share of nonsense / out-of-scope questions refused.
The composer is the one configured: extractive without CORTEX_LLM; with an LLM key in the
environment (CORTEX_LLM=openai|anthropic|gemini) the model's answers are measured instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality

BEGIN, END = "<!-- ask:begin -->", "<!-- ask:end -->"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="local", choices=["local", "hash"])
    parser.add_argument("--set", type=Path, default=quality.DATA)
    parser.add_argument("--write", type=Path, help="replace the Ask block of this Markdown file with the results")
    args = parser.parse_args()
    memories = quality.load_jsonl(args.set / "memories.jsonl")
    queries = quality.load_jsonl(args.set / "queries.jsonl")
    unanswerable = quality.load_jsonl(args.set / "unanswerable.jsonl") if (args.set / "unanswerable.jsonl").exists() else []
    with ExitStack() as stack:
        quality.start_environment(stack, args.embedder, with_conflicts=False)
        client, ids, _load_seconds, _member = quality.build_world(memories)
        by_id = {v: k for k, v in ids.items()}
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        composer = ""
        for query in queries:
            body = _ask(client, query["query"])
            composer = body["composer"] or composer
            cited = {by_id.get(s["id"]) for s in body["sources"] if s["cited"]}
            answers = {k for k, grade in query["relevant"].items() if grade == 2}
            for bucket in (query["type"], "overall"):
                counts[bucket]["n"] += 1
                counts[bucket]["answered"] += int(body["confident"])
                counts[bucket]["cited"] += int(bool(cited & answers))
                counts[bucket]["relevant"] += int(bool(cited & set(query["relevant"])))
        refused = sum(1 for q in unanswerable if not _ask(client, q["query"])["confident"])
    table = render(counts, refused, len(unanswerable), composer or "extractive", args)
    print(table)
    if args.write:
        text = args.write.read_text() if args.write.exists() else "# Quality\n\n"
        block = f"{BEGIN}\n{table}\n{END}"
        if BEGIN in text:
            head, rest = text.split(BEGIN, 1)
            text = head + block + rest.split(END, 1)[1]
        else:
            text = text.rstrip() + "\n\n## Ask: answers and their citations\n\n" + block + "\n"
        args.write.write_text(text)
    return 0


def _ask(client: Any, question: str) -> dict[str, Any]:
    response = client.post("/api/ask", json.dumps({"question": question, "limit": 5}), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def render(counts: dict[str, dict[str, int]], refused: int, unanswerable: int, composer: str, args: Any) -> str:
    machine = f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    lines = [
        f"Command: `.venv/bin/python bench/ask.py --embedder {args.embedder}` — machine: {machine}; composer `{composer}`;",
        f"{counts['overall']['n']} answerable questions of the dev set, {unanswerable} unanswerable ones.",
        "",
        "| questions | n | answered | cites the answer (grade 2) | cites a relevant memory |",
        "| --- | --- | --- | --- | --- |",
    ]
    for bucket in [b for b in counts if b != "overall"] + ["overall"]:
        c = counts[bucket]
        n = c["n"]
        lines.append(f"| {bucket} | {n} | {c['answered'] / n:.3f} | {c['cited'] / n:.3f} | {c['relevant'] / n:.3f} |")
    if unanswerable:
        lines += [
            "",
            f'Unanswerable questions answered "I don\'t know": {refused}/{unanswerable} = {refused / unanswerable:.1%}.',
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
