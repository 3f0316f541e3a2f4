"""Retrieval quality on the open dev set (bench/quality/): recall@1, recall@5, MRR@10, nDCG@10.

    .venv/bin/python bench/quality.py [--embedder local|hash] [--write docs/quality.md]

Loads bench/quality/memories.jsonl into a fresh organization through the public REST API
(POST /api/memories, valid_from = now − age_days), runs every query of queries.jsonl through
POST /api/recall as an Executive who can read every scope, and reports per query type and
overall, for the full 70/30 score and for ablations switched by the internal setting
CORTEX_RANKING_MODE: lexical only, dense only, fused relevance without recency.

Metrics (k = 1, 5, 10):
- recall@k: share of queries with at least one grade-2 memory in the top k ("the right memory
  in the top k");
- MRR@10: mean reciprocal rank of the first grade-2 memory within the top 10;
- nDCG@10: graded (2 = the answer, 1 = useful) normalised discounted cumulative gain;
- recency pairs: for recency queries, the share of (newer, older) pairs where the newer
  version is found (top 50) and ranks above the older one (a missing older one counts as below).

Uses DATABASE_URL / REDIS_URL when set; otherwise starts throwaway embedded PostgreSQL and
Redis (as `make test` does) and removes them afterwards.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "quality"
MODES = ["lexical", "dense", "fused", "full"]
TYPES = ["paraphrase", "exact_token", "buried_fact", "recency", "short_keyword"]


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def start_environment(stack: ExitStack, embedder: str, with_conflicts: bool) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")
    os.environ["CORTEX_EMBEDDER"] = embedder
    os.environ.setdefault("CORTEX_TESTING", "1")
    os.environ.setdefault("SECRET_KEY", "quality-bench")
    # By default no post-write work runs (no worker): retrieval is measured on the memories exactly as
    # loaded. --with-conflicts runs it in-process, as the product does on a worker: conflict detection
    # with the organization's auto policy may supersede duplicates and outdated versions.
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1" if with_conflicts else "0"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("CORTEX_API_RATE", "1000000/min")
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        from cortex_site.embedded import remove_tree
        from cortex_site.runner import embedded_services

        home = Path(tempfile.mkdtemp(prefix="cortex-quality-"))
        stack.callback(remove_tree, home)
        os.environ["CORTEX_HOME"] = str(home)
        os.environ.update(stack.enter_context(embedded_services(home, durable=False)))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_world(memories: list[dict[str, Any]]) -> tuple[Any, dict[str, str], float, Any]:
    """A fresh organization with every scope of the set, an Executive reader; memories loaded through the API."""
    from django.test import Client
    from django.utils import timezone

    from memories.models import Scope
    from memories.services import tenancy

    slug = f"quality-{int(time.time())}"
    org = tenancy.organization_create(slug=slug, name="Acme Robotics (quality set)")
    member = tenancy.member_add(organization=org, email=f"reader@{slug}.test", clearance="Executive", role="admin")
    for scope_slug in sorted({m["scope"] for m in memories} - {"public-docs"}):
        scope = tenancy.scope_create(organization=org, slug=scope_slug)
        tenancy.grant_set(membership=member, scope=scope, can_write=True)
    assert Scope.objects.filter(organization=org).count() >= 2
    _token, secret = tenancy.token_create(membership=member, name="quality harness")
    client = Client(headers={"Authorization": f"Bearer {secret}"}, SERVER_NAME="localhost")
    now = timezone.now()
    ids: dict[str, str] = {}
    started = time.perf_counter()
    for item in memories:
        body = {
            "title": item["title"],
            "content": item["content"],
            "scope": item["scope"],
            "category": item["category"],
            "source": item["source"],
            "source_url": item.get("source_url") or "",
            # No author_name: over REST a memory is cited as its writer's (only imports and connectors
            # state another author), and ranking never reads author names.
            "tags": item.get("tags") or [],
            "valid_from": (now - timedelta(days=item["age_days"])).isoformat(),
        }
        response = client.post("/api/memories", json.dumps(body), content_type="application/json")
        if response.status_code not in (200, 201):
            raise SystemExit(f"loading {item['key']} failed: {response.status_code} {response.content[:300]!r}")
        ids[item["key"]] = response.json()["id"]
    load_seconds = time.perf_counter() - started
    return client, ids, load_seconds, member


def run_queries(client: Any, queries: list[dict[str, Any]], ids: dict[str, str], mode: str) -> list[dict[str, Any]]:
    from django.test import override_settings

    by_id = {v: k for k, v in ids.items()}
    runs = []
    with override_settings(CORTEX_RANKING_MODE=mode):
        for query in queries:
            response = client.post(
                "/api/recall", json.dumps({"query": query["query"], "limit": 50}), content_type="application/json"
            )
            assert response.status_code == 200, response.content
            ranked = [by_id[hit["memory"]["id"]] for hit in response.json()["results"]]
            runs.append({"query": query, "ranked": ranked, "took_ms": response.json()["took_ms"]})
    return runs


def metrics(runs: list[dict[str, Any]]) -> dict[str, float]:
    def first_answer(run: dict[str, Any]) -> int | None:
        answers = {k for k, g in run["query"]["relevant"].items() if g == 2}
        return next((i + 1 for i, key in enumerate(run["ranked"]) if key in answers), None)

    ranks = [first_answer(run) for run in runs]
    n = len(runs)
    result = {
        "n": n,
        "recall@1": sum(1 for r in ranks if r is not None and r <= 1) / n,
        "recall@5": sum(1 for r in ranks if r is not None and r <= 5) / n,
        "recall@10": sum(1 for r in ranks if r is not None and r <= 10) / n,
        "mrr@10": sum(1 / r for r in ranks if r is not None and r <= 10) / n,
    }
    ndcgs = []
    for run in runs:
        grades = run["query"]["relevant"]
        gains = [grades.get(key, 0) for key in run["ranked"][:10]]
        dcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(gains))
        ideal = sorted(grades.values(), reverse=True)[:10]
        idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
        ndcgs.append(dcg / idcg if idcg else 0.0)
    result["ndcg@10"] = sum(ndcgs) / n
    return result


def recency_pairs(runs: list[dict[str, Any]]) -> tuple[int, int]:
    wins = total = 0
    for run in runs:
        query = run["query"]
        if query["type"] != "recency":
            continue
        position = {key: i for i, key in enumerate(run["ranked"])}
        newer = [k for k, g in query["relevant"].items() if g == 2]
        for old in query.get("older", []):
            for new in newer:
                total += 1
                # The newer must be found at all (top 50); an older one that is missing counts as below it.
                if new in position and position[new] < position.get(old, len(position)):
                    wins += 1
    return wins, total


def latency(queries: list[dict[str, Any]], principal: Any, repeats: int = 3) -> dict[str, float]:
    """Server-side recall latency split into query embedding and search (the rest)."""
    from memories.selectors.recall import RecallQuery, recall

    search, embed = [], []
    for _ in range(repeats):
        for query in queries:
            result = recall(principal, RecallQuery(query=query["query"], limit=10), audit=False)
            search.append(result.timings["search_ms"])
            embed.append(result.timings["embed_ms"])

    def pct(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    return {
        "search_p50": statistics.median(search),
        "search_p95": pct(search, 95),
        "embed_p50": statistics.median(embed),
        "embed_p95": pct(embed, 95),
        "samples": len(search),
    }


def explain(query_ids: list[str], queries: list[dict[str, Any]], ids: dict[str, str], principal: Any) -> None:
    from memories.selectors.recall import RecallQuery, recall

    keys = {v: k for k, v in ids.items()}
    wanted = [q for q in queries if q["id"] in query_ids or ("all-recency" in query_ids and q["type"] == "recency")]
    for query in wanted:
        print(f"\n{query['id']} [{query['type']}] {query['query']!r} relevant={query['relevant']} older={query.get('older')}")
        for hit in recall(principal, RecallQuery(query=query["query"], limit=8), audit=False).hits:
            key = keys[str(hit.memory.pk)]
            mark = "*" if query["relevant"].get(key) == 2 else ("o" if key in query.get("older", []) else " ")
            age = (hit.memory.created_at - hit.memory.valid_from).days
            print(
                f"  {mark} {hit.score:.3f} rel={hit.relevance:.3f} d={hit.dense:.3f} "
                f"lx={hit.lexical:.3f} rec={hit.recency:.3f} age={age:>3}d {key}"
            )


def sweep(queries: list[dict[str, Any]], ids: dict[str, str], principal: Any, embedder: str) -> None:
    """Rank every query under each parameter set (through the recall selector, full 70/30 mode).

    QUALITY_GRID is a JSON object of RankingParams fields (and `ceiling`, the dense calibration's)
    to lists of values; figures per half (tuning = even query ids, held-out = odd)."""
    import dataclasses
    import itertools

    from memories.retrieval import scoring
    from memories.selectors.recall import RecallQuery, recall

    keys = {v: k for k, v in ids.items()}
    base_params, base_calibration = scoring.PARAMS, scoring.CALIBRATIONS[embedder]
    grid = json.loads(os.environ.get("QUALITY_GRID", "null")) or {"version_similarity": [None, 0.65, 0.8, 0.9]}
    names = list(grid)
    print(
        "\n| " + " | ".join(names) + " | r@5 tuning | MRR tuning | r@5 held-out | MRR held-out | recency pairs | min type r@5 |"
    )
    print("| " + " | ".join("---" for _ in names) + " | --- | --- | --- | --- | --- | --- |")
    try:
        for values in itertools.product(*grid.values()):
            chosen = dict(zip(names, values, strict=True))
            ceiling = chosen.pop("ceiling", base_calibration.ceiling)
            scoring.PARAMS = dataclasses.replace(base_params, **chosen)
            scoring.CALIBRATIONS[embedder] = scoring.Calibration(base_calibration.floor, ceiling)
            runs = []
            for query in queries:
                hits = recall(principal, RecallQuery(query=query["query"], limit=50), audit=False).hits
                runs.append({"query": query, "ranked": [keys[str(h.memory.pk)] for h in hits]})
            tuning = metrics([r for r in runs if not held_out(r["query"])])
            held = metrics([r for r in runs if held_out(r["query"])])
            by_type = defaultdict(list)
            for run in runs:
                by_type[run["query"]["type"]].append(run)
            worst = min(metrics(r)["recall@5"] for r in by_type.values())
            wins, total = recency_pairs(runs)
            print(
                "| " + " | ".join(str(v) for v in values) + f" | {tuning['recall@5']:.3f} | {tuning['mrr@10']:.3f} | "
                f"{held['recall@5']:.3f} | {held['mrr@10']:.3f} | {wins}/{total} | {worst:.3f} |",
                flush=True,
            )
    finally:
        scoring.PARAMS, scoring.CALIBRATIONS[embedder] = base_params, base_calibration


def held_out(query: dict[str, Any]) -> bool:
    """The held-out half of the dev set: odd-numbered queries (balanced across types). Tuning uses the even half."""
    return int("".join(ch for ch in query["id"] if ch.isdigit())) % 2 == 1


def quick(client: Any, queries: list[dict[str, Any]], unanswerable: list[dict[str, Any]], ids: dict[str, str]) -> dict[str, Any]:
    """Full score only, through POST /api/recall: figures for the tuning half, the held-out half and the
    whole set, per type, recency pairs, and how often confidence is right (genuine answers flagged
    weak; unanswerable queries — nonsense, out of scope — flagged not confident)."""
    by_id = {v: k for k, v in ids.items()}
    runs = []
    for query in [*queries, *unanswerable]:
        response = client.post("/api/recall", json.dumps({"query": query["query"], "limit": 50}), content_type="application/json")
        assert response.status_code == 200, response.content
        body = response.json()
        ranked = [by_id[hit["memory"]["id"]] for hit in body["results"]]
        matches = [hit.get("match") for hit in body["results"]]
        labels = [hit.get("confidence") for hit in body["results"]]
        runs.append({"query": query, "ranked": ranked, "confident": body.get("confident"), "matches": matches, "labels": labels})
    genuine = [r for r in runs if "relevant" in r["query"]]
    noise = [r for r in runs if "relevant" not in r["query"]]
    report: dict[str, Any] = {}
    for name, part in (
        ("tuning", [r for r in genuine if not held_out(r["query"])]),
        ("held-out", [r for r in genuine if held_out(r["query"])]),
        ("all", genuine),
    ):
        by_type = defaultdict(list)
        for run in part:
            by_type[run["query"]["type"]].append(run)
        report[name] = {
            "overall": metrics(part),
            "by_type": {t: metrics(r) for t, r in by_type.items()},
            "recency_pairs": recency_pairs(part),
        }

    def answer_label(run: dict[str, Any]) -> str | None:
        answers = {k for k, g in run["query"]["relevant"].items() if g == 2}
        return next((run["labels"][i] for i, key in enumerate(run["ranked"][:5]) if key in answers), None)

    report["genuine_not_confident"] = sum(1 for r in genuine if r["confident"] is False) / len(genuine)
    report["genuine_answer_weak"] = sum(1 for r in genuine if answer_label(r) == "weak") / len(genuine)
    report["unanswerable_not_confident"] = sum(1 for r in noise if r["confident"] is not True) / max(1, len(noise))
    report["top_match_genuine"] = sorted(r["matches"][0] for r in genuine if r["matches"] and r["matches"][0] is not None)
    report["top_match_unanswerable"] = sorted(r["matches"][0] for r in noise if r["matches"] and r["matches"][0] is not None)
    report["runs"] = runs
    return report


def features(
    queries: list[dict[str, Any]], unanswerable: list[dict[str, Any]], ids: dict[str, str], principal: Any, embedder: str
) -> list[dict[str, Any]]:
    """Per query (genuine and unanswerable), what recall knows about its top hits when it labels them:
    raw cosine, calibrated dense, lexical, fused strength, the final match (after the selective-term and
    absent-name penalties) — for studying the confidence rule (--features PATH writes them as JSON)."""
    from memories.retrieval import scoring
    from memories.retrieval.terms import query_terms
    from memories.selectors import recall as selector
    from memories.selectors.recall import RecallQuery, recall

    calibration = scoring.CALIBRATIONS.get(embedder, scoring.DEFAULT_CALIBRATION)
    span = calibration.ceiling - calibration.floor
    keys = {v: k for k, v in ids.items()}
    rows = []
    for query in [*queries, *unanswerable]:
        hits = recall(principal, RecallQuery(query=query["query"], limit=50), audit=False).hits
        grades = query.get("relevant", {})
        text = selector.normalise_query(query["query"])
        terms, _weights, _common, frequencies = selector._term_weights(selector.statistics_rule(principal), query_terms(text))
        rows.append(
            {
                "id": query["id"],
                "type": query.get("type") or query.get("kind"),
                "genuine": "relevant" in query,
                "held_out": held_out(query),
                "query": query["query"],
                "terms": dict(zip(terms, frequencies, strict=True)),
                "names_nothing_visible": selector._names_nothing_visible(text, terms, frequencies),
                "hits": [
                    {
                        "key": keys[str(h.memory.pk)],
                        "grade": grades.get(keys[str(h.memory.pk)], 0),
                        "similarity": round(h.similarity, 6),
                        # what the calibration makes of it (clipped at floor and ceiling)
                        "dense_from_similarity": round(min(1.0, max(0.0, (h.similarity - calibration.floor) / span)), 6),
                        "dense": h.dense,
                        "lexical": h.lexical,
                        "fused": round(scoring.fuse(h.dense, h.lexical), 6),
                        "match": h.match,
                        "relevance": h.relevance,
                        "confidence": h.confidence.value,
                    }
                    for h in hits
                ],
            }
        )
    return rows


def confidence_table(runs: list[dict[str, Any]], partials: tuple[float, ...] = (0.35, 0.38, 0.40, 0.42, 0.45)) -> str:
    """Per half (tuning = even ids, held-out = odd, for genuine and unanswerable queries alike): the share
    of genuine queries with no result at least partial, and of unanswerable queries not confident, if the
    partial threshold were each of `partials` (from the returned matches; ranking does not depend on it)."""

    def flagged(part: list[dict[str, Any]], partial: float) -> str:
        if not part:
            return "—"
        weak = sum(1 for r in part if not any(m is not None and m >= partial for m in r["matches"]))
        return f"{weak}/{len(part)} = {weak / len(part):.1%}"

    lines = [
        "| partial at | tuning: genuine not confident | tuning: unanswerable not confident "
        "| held-out: genuine not confident | held-out: unanswerable not confident |",
        "| --- | --- | --- | --- | --- |",
    ]
    for partial in partials:
        cells = [
            flagged([r for r in runs if ("relevant" in r["query"]) is genuine and held_out(r["query"]) is held], partial)
            for held in (False, True)
            for genuine in (True, False)
        ]
        lines.append(f"| {partial:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_quick(report: dict[str, Any]) -> str:
    lines = [
        "| part | n | recall@1 | recall@5 | MRR@10 | nDCG@10 | lowest type r@5 | recency pairs |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in ("tuning", "held-out", "all"):
        part = report[name]
        m = part["overall"]
        worst = min(part["by_type"].items(), key=lambda item: item[1]["recall@5"])
        wins, total = part["recency_pairs"]
        lines.append(
            f"| {name} | {m['n']} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['mrr@10']:.3f} | {m['ndcg@10']:.3f} | "
            f"{worst[1]['recall@5']:.3f} ({worst[0]}) | {wins}/{total} |"
        )
    lines.append("")
    lines.append("| type | r@5 tuning | r@5 held-out | MRR tuning | MRR held-out |")
    lines.append("| --- | --- | --- | --- | --- |")
    empty = {"recall@5": float("nan"), "mrr@10": float("nan")}
    for query_type in TYPES:
        t = report["tuning"]["by_type"].get(query_type, empty)
        h = report["held-out"]["by_type"].get(query_type, empty)
        lines.append(f"| {query_type} | {t['recall@5']:.3f} | {h['recall@5']:.3f} | {t['mrr@10']:.3f} | {h['mrr@10']:.3f} |")
    lines.append("")
    lines.append(confidence_table(report["runs"]))
    lines.append("")
    lines.append(
        f"Confidence: genuine queries answered `confident: false` {report['genuine_not_confident']:.1%}, "
        f"genuine answers labelled weak {report['genuine_answer_weak']:.1%}; "
        f"unanswerable queries not confident {report['unanswerable_not_confident']:.1%}."
    )
    return "\n".join(lines)


def render(report: dict[str, Any]) -> str:
    lines = []
    full = report["modes"]["full"]
    lines.append("| mode | recall@1 | recall@5 | recall@10 | MRR@10 | nDCG@10 |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    labels = {
        "lexical": "lexical only",
        "dense": "dense only",
        "fused": "fused relevance, no recency",
        "full": "full score (0.7·relevance + 0.3·recency)",
    }
    for mode in MODES:
        m = report["modes"][mode]["overall"]
        lines.append(
            f"| {labels[mode]} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | "
            f"{m['recall@10']:.3f} | {m['mrr@10']:.3f} | {m['ndcg@10']:.3f} |"
        )
    lines.append("")
    lines.append("Per query type, full score (and recall@5 of each ablation):")
    lines.append("")
    lines.append("| type | n | recall@1 | recall@5 | MRR@10 | nDCG@10 | r@5 lexical | r@5 dense | r@5 fused |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for query_type in [*TYPES, "overall"]:
        m = full["by_type"][query_type] if query_type != "overall" else full["overall"]
        others = [
            report["modes"][mode]["by_type"][query_type]["recall@5"]
            if query_type != "overall"
            else report["modes"][mode]["overall"]["recall@5"]
            for mode in ("lexical", "dense", "fused")
        ]
        lines.append(
            f"| {query_type} | {m['n']} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['mrr@10']:.3f} | {m['ndcg@10']:.3f} | "
            + " | ".join(f"{o:.3f}" for o in others)
            + " |"
        )
    wins, total = report["recency_pairs"]
    lines.append("")
    lines.append(f"Recency pairs (full score): the newer version ranks above the older in {wins}/{total} = {wins / total:.1%}.")
    lat = report["latency"]
    lines.append(
        f"Server-side recall latency over {lat['samples']} calls (limit 10): "
        f"search p50 {lat['search_p50']:.1f} ms, p95 {lat['search_p95']:.1f} ms; "
        f"query embedding p50 {lat['embed_p50']:.1f} ms, p95 {lat['embed_p95']:.1f} ms."
    )
    lines.append(f"Loading {report['memories']} memories through POST /api/memories took {report['load_seconds']:.1f} s.")
    if report.get("with_conflicts"):
        lines.append(
            "Post-write conflict detection (auto policy) ran while loading "
            f"and superseded {report['superseded_by_conflicts']} memories: "
            + ", ".join(f"`{old}` by `{new}`" for old, new in report["superseded_pairs"])
            + "."
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="local", choices=["local", "hash"])
    parser.add_argument("--write", type=Path, help="replace the generated block of this Markdown file with the results")
    parser.add_argument("--json", type=Path, help="also write the raw report as JSON")
    parser.add_argument("--failures", action="store_true", help="print queries whose answer is not in the top 5 (full score)")
    parser.add_argument("--explain", nargs="*", default=[], help="query ids whose top 8 hits to print with their score parts")
    parser.add_argument(
        "--with-conflicts", action="store_true", help="run post-write work (conflict detection and resolution) while loading"
    )
    parser.add_argument(
        "--sweep", action="store_true", help="tuning: rank with a grid of scoring parameters (full mode) and print a table"
    )
    parser.add_argument("--features", type=Path, help="with --quick: write per-query confidence features as JSON")
    parser.add_argument("--set", type=Path, default=DATA, help="the evaluation set's directory (memories.jsonl, queries.jsonl)")
    parser.add_argument(
        "--quick", action="store_true", help="full score only: tuning / held-out halves, and confidence on unanswerable queries"
    )
    args = parser.parse_args()

    memories = load_jsonl(args.set / "memories.jsonl")
    queries = load_jsonl(args.set / "queries.jsonl")
    TYPES[:] = list(dict.fromkeys(q["type"] for q in queries))
    with ExitStack() as stack:
        start_environment(stack, args.embedder, args.with_conflicts)
        client, ids, load_seconds, member = build_world(memories)
        report: dict[str, Any] = {"memories": len(memories), "queries": len(queries), "load_seconds": load_seconds, "modes": {}}
        all_runs = {}
        from memories.access import Principal

        if args.sweep:
            sweep(queries, ids, Principal(member), args.embedder)
            return 0
        if args.quick:
            unanswerable = args.set / "unanswerable.jsonl"
            result = quick(
                client, queries, load_jsonl(unanswerable if unanswerable.exists() else DATA / "unanswerable.jsonl"), ids
            )
            print(render_quick(result))
            explain(args.explain, queries, ids, Principal(member))
            if args.failures:
                for run in result["runs"]:
                    if "relevant" not in run["query"]:
                        continue
                    answers = {k for k, g in run["query"]["relevant"].items() if g == 2}
                    if not answers & set(run["ranked"][:5]):
                        print(
                            f"MISS {run['query']['id']} {run['query']['query']!r} want {sorted(answers)} got {run['ranked'][:5]}"
                        )
            if args.json:
                args.json.write_text(json.dumps(result, indent=2, default=str))
            if args.features:
                rows = features(
                    queries,
                    load_jsonl(unanswerable if unanswerable.exists() else DATA / "unanswerable.jsonl"),
                    ids,
                    Principal(member),
                    args.embedder,
                )
                args.features.write_text(json.dumps(rows, indent=1))
            return 0
        for mode in MODES:
            runs = run_queries(client, queries, ids, mode)
            all_runs[mode] = runs
            by_type = defaultdict(list)
            for run in runs:
                by_type[run["query"]["type"]].append(run)
            report["modes"][mode] = {"overall": metrics(runs), "by_type": {t: metrics(r) for t, r in by_type.items()}}
        report["recency_pairs"] = recency_pairs(all_runs["full"])

        from memories.access import Principal

        report["latency"] = latency(queries, Principal(member))
        explain(args.explain, queries, ids, Principal(member))
        report["embedder"] = args.embedder
        report["with_conflicts"] = args.with_conflicts
        if args.with_conflicts:
            from memories.models import Memory

            keys = {memory_id: key for key, memory_id in ids.items()}
            superseded = Memory.objects.filter(organization_id=member.organization_id, status="superseded")
            pairs = sorted((keys[str(m.pk)], keys.get(str(m.superseded_by_id), "?")) for m in superseded)
            report["superseded_by_conflicts"] = len(pairs)
            report["superseded_pairs"] = pairs

    table = render(report)
    print(table)
    if args.failures:
        for run in all_runs["full"]:
            answers = {k for k, g in run["query"]["relevant"].items() if g == 2}
            if not answers & set(run["ranked"][:5]):
                print(
                    f"\nMISS {run['query']['id']} [{run['query']['type']}] "
                    f"{run['query']['query']!r}\n  want {sorted(answers)}\n  got  {run['ranked'][:5]}"
                )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    if args.write:
        conflicts = " --with-conflicts" if args.with_conflicts else ""
        command = f"`.venv/bin/python bench/quality.py --embedder {args.embedder}{conflicts} --write {args.write}`"
        machine = f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
        block = (
            f"<!-- quality:begin -->\nCommand: {command} — machine: {machine}; embedder `{args.embedder}`; "
            f"{report['memories']} memories, {report['queries']} queries.\n\n{table}\n<!-- quality:end -->"
        )
        text = args.write.read_text() if args.write.exists() else "# Quality\n\n"
        if "<!-- quality:begin -->" in text:
            head, rest = text.split("<!-- quality:begin -->", 1)
            tail = rest.split("<!-- quality:end -->", 1)[1]
            text = head + block + tail
        else:
            text = text.rstrip() + "\n\n## Retrieval quality\n\n" + block + "\n"
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
