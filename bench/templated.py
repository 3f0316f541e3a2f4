"""Templated corpora: does a query naming a token that one memory holds return that memory first?

    .venv/bin/python bench/templated.py [--embedder local|hash] [--reports 200] [--standups 60]

Builds, in a fresh organization through POST /api/memories (the real write pipeline and embedder):
incident reports written from one template, each with its own ticket id; codeword notes from one
template, each with its own made-up codeword (letters only); and standups that mention the same
words. Each report / note is newer than the previous one, so recency alone would always pick the
newest twin. Then, through POST /api/recall as the reader who wrote them: the bare token, the token
in a question, and "codeword <token>". Reports the share answered first and the confidence labels.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from quality import start_environment  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="local", choices=["local", "hash"])
    parser.add_argument("--reports", type=int, default=200)
    parser.add_argument("--codewords", type=int, default=60)
    parser.add_argument("--standups", type=int, default=60)
    parser.add_argument("--with-conflicts", action="store_true", help="run post-write conflict detection while loading")
    args = parser.parse_args()
    rng = random.Random(14)
    with ExitStack() as stack:
        start_environment(stack, args.embedder, with_conflicts=args.with_conflicts)
        from django.test import Client
        from django.utils import timezone

        from memories.services import tenancy

        slug = f"templated-{int(time.time())}"
        org = tenancy.organization_create(slug=slug, name="Templated corpus")
        member = tenancy.member_add(organization=org, email=f"reader@{slug}.test", clearance="Executive", role="admin")
        scope = tenancy.scope_create(organization=org, slug="engineering")
        tenancy.grant_set(membership=member, scope=scope, can_write=True)
        _token, secret = tenancy.token_create(membership=member, name="templated bench")
        client = Client(headers={"Authorization": f"Bearer {secret}"}, SERVER_NAME="localhost")
        now = timezone.now()

        def write(content: str, title: str, age_days: float) -> str:
            body = {
                "title": title,
                "content": content,
                "scope": "engineering",
                "valid_from": (now - timedelta(days=age_days)).isoformat(),
            }
            response = client.post("/api/memories", json.dumps(body), content_type="application/json")
            assert response.status_code in (200, 201), response.content
            return response.json()["id"]

        targets: list[tuple[str, str, str]] = []  # (kind, query, expected id)
        services = ["dock-api", "fleet-console", "billing", "telemetry", "nav-stack"]
        tickets = rng.sample(range(1000, 9999), args.reports)
        started = time.perf_counter()
        for n, number in enumerate(tickets):
            ticket = f"INC-{number}"
            memory_id = write(
                f"Incident report {ticket}. Service: {services[n % 5]}. Impact: elevated error rates for 40 minutes. "
                "Root cause: a bad config push. Follow-up: add a canary stage before config pushes.",
                f"Incident {ticket}",
                args.reports - n,
            )
            targets += [
                ("ticket id", ticket, memory_id),
                ("ticket in a question", f"what was the root cause of {ticket}?", memory_id),
            ]
        words: set[str] = set()
        while len(words) < args.codewords:
            words.add("".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(4)))
        for n, word in enumerate(sorted(words)):
            memory_id = write(
                f"Internal note for engineering. Codeword {word}. Retention is 30 days.", "Internal note", args.codewords - n
            )
            targets.append(("codeword", f"codeword {word}", memory_id))
        for n in range(args.standups):
            write(
                f"Standup {n}: reviewed incident follow-ups and config pushes; canary stage work today; no blockers.",
                f"Standup {n}",
                n / 2,
            )
        load_seconds = time.perf_counter() - started

        first: Counter[str] = Counter()
        total: Counter[str] = Counter()
        labels: Counter[str] = Counter()
        for kind, query, expected in targets:
            body = client.post("/api/recall", json.dumps({"query": query, "limit": 5}), content_type="application/json").json()
            total[kind] += 1
            if body["results"] and body["results"][0]["memory"]["id"] == expected:
                first[kind] += 1
                labels[body["results"][0]["confidence"]] += 1
    twins = args.reports + args.codewords
    conflicts = ", post-write conflict detection on" if args.with_conflicts else ""
    print(
        f"{twins} templated near-twins + {args.standups} standups, embedder "
        f"{args.embedder}{conflicts}, loaded in {load_seconds:.0f} s"
    )
    print("| query | n | answered first |")
    print("| --- | --- | --- |")
    for kind in total:
        print(f"| {kind} | {total[kind]} | {first[kind]}/{total[kind]} = {first[kind] / total[kind]:.1%} |")
    print(f"confidence of the answers found first: {dict(labels)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
