"""cortex reembed — move every stored vector to the configured embedding model."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandError
from tqdm import tqdm

from memories.services import reembed as services


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "reembed",
        help="re-embed every chunk with the configured embedder (after changing CORTEX_EMBEDDER / model / dimension)",
        description=(
            "Compares the configured embedder (CORTEX_EMBEDDER, CORTEX_EMBED_MODEL, CORTEX_EMBED_DIM) with the one the "
            "store was filled with, and re-embeds every chunk of every organization in batches when they differ, "
            "changing the vector column's dimension and rebuilding the HNSW index if needed. Until it finishes, writes "
            "and recall with the new model are refused. Interrupted? Run it again: it continues where it stopped."
        ),
    )
    parser.add_argument(
        "--batch-size", type=int, default=services.DEFAULT_BATCH_SIZE, help="chunks per batch (default %(default)s)"
    )
    parser.add_argument("--refresh", action="store_true", help="re-embed everything even when the model is unchanged")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(handler=reembed)


def reembed(command: Any, *, batch_size: int, refresh: bool, yes: bool, no_progress: bool, **_: Any) -> None:
    if batch_size < 1:
        raise CommandError("--batch-size must be at least 1.")
    plan = services.reembed_plan()
    command.stdout.write(plan.describe(refresh=refresh))
    if not (plan.needed or refresh):
        return
    if not yes:
        if not sys.stdin.isatty():
            raise CommandError("Not a terminal: add --yes to confirm.")
        if input("Proceed? [y/N] ").strip().lower() not in {"y", "yes"}:
            raise CommandError("Cancelled; nothing was changed.")
    with tqdm(total=plan.pending or plan.chunks, unit="chunk", desc="reembed", file=sys.stderr, disable=no_progress) as bar:

        def set_total(total: int) -> None:
            bar.reset(total=total)

        def advance(count: int) -> None:
            bar.update(count)

        report = services.reembed(batch_size=batch_size, refresh=refresh, on_total=set_total, progress=advance)
    provider, model, dim = report.signature
    command.stdout.write(
        f"Re-embedded {report.embedded:,} chunks in {report.seconds:.1f}s; "
        f"the store now holds {provider}:{model} ({dim} dimensions)."
    )
