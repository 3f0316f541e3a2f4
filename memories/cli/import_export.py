"""cortex import | export — move memories in and out of an organization as files.

`import` writes through the same pipeline as every other interface, as the member named by
--user (their scopes, grants and clearance apply; the audit log says it came through the CLI).
`export` is the operator's dump of an organization: every scope and clearance, JSONL in the
REST memory shape, audited.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError
from tqdm import tqdm

from memories.access import CliPrincipal
from memories.cli import common
from memories.services import import_export as services
from memories.services.import_export import ItemStatus


def add_parser(sub: Any) -> None:
    imp = sub.add_parser(
        "import",
        help="import .txt/.md/.docx/.pdf files and .jsonl memories (directories are walked recursively)",
        description=(
            "Each document becomes one memory (title from the document, source 'Import'); each line of a .jsonl file is "
            "one memory in the REST shape. Writes go through the normal pipeline as --user, so their scopes and clearance "
            "apply. Superseded versions of a history export (`cortex export --status all`) are imported with their "
            "supersession links, a chain at a time; redacted ones are skipped. Failures are reported per file (per line) "
            "without stopping the rest; the exit code is non-zero if any failed. Re-running the same import creates "
            "nothing new."
        ),
    )
    imp.add_argument(
        "paths", nargs="+", metavar="PATH", help="files and directories (walked recursively; hidden entries skipped)"
    )
    imp.add_argument("--org", required=True)
    imp.add_argument("--user", required=True, help="the member the memories are written as (email)")
    imp.add_argument(
        "--scope", help="scope for documents, and for .jsonl lines that name none (default: scope rules, then public-docs)"
    )
    imp.add_argument("--category", help="category for documents, and for .jsonl lines that name none (default: note)")
    imp.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    imp.set_defaults(handler=import_paths)

    exp = sub.add_parser(
        "export",
        help="export an organization's memories as JSONL (the REST memory shape)",
        description=(
            "Runs as the operator, not as a member: the export holds EVERY memory of the organization (or of --scope), "
            "whatever its scope visibility or clearance. Treat the file as carefully as the database. The export is "
            "recorded in the organization's audit log."
        ),
    )
    exp.add_argument("--org", required=True)
    exp.add_argument("--scope", help="only this scope")
    exp.add_argument(
        "--status",
        choices=services.EXPORT_STATUSES,
        default="active",
        help=(
            "active (default; the current store) or all (history too: superseded and redacted versions, with the "
            "supersession links `cortex import` rebuilds — use it for a backup)"
        ),
    )
    exp.add_argument("--output", "-o", help="write to this file (created 0600) instead of stdout")
    exp.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    exp.set_defaults(handler=export_memories)


def import_paths(
    command: Any, *, paths: list[str], org: str, user: str, scope: str | None, category: str | None, no_progress: bool, **_: Any
) -> None:
    operator = common.operator(org)
    organization = operator.organization
    principal = CliPrincipal(common.membership(operator, user))
    files, outcomes = services.collect_files(paths)
    tally: Counter[str] = Counter()
    stopped = ""

    def report(outcome: services.ItemOutcome, bar: tqdm[Any] | None) -> None:
        tally[outcome.status] += 1
        if outcome.status == ItemStatus.FAILED:
            line = f"failed {outcome.label}: {outcome.error_code}: {outcome.message}"
            if bar is not None:
                with bar.external_write_mode(file=sys.stderr):
                    command.stderr.write(line)
            else:
                command.stderr.write(line)

    for outcome in outcomes:
        report(outcome, None)
    defaults = services.ImportDefaults(scope=scope or None, category=category or None)
    with tqdm(total=services.count_items(files), unit="item", desc="import", file=sys.stderr, disable=no_progress) as bar:
        for outcome in services.import_files(principal=principal, files=files, defaults=defaults):
            report(outcome, bar)
            bar.update(1)
            if outcome.fatal:
                stopped = outcome.message
    summary = (
        f"{tally[ItemStatus.CREATED]} created, {tally[ItemStatus.DEDUPLICATED]} deduplicated, {tally[ItemStatus.FAILED]} failed"
    )
    if tally[ItemStatus.SKIPPED]:
        summary += f", {tally[ItemStatus.SKIPPED]} skipped (other file types, or redacted)"
    command.stdout.write(f"Imported into {organization.slug} as {principal.user.email}: {summary}.")
    if stopped:
        raise CommandError(
            f"stopped early: {stopped} Re-run the same command once it is fixed; what was imported is not imported twice."
        )
    if tally[ItemStatus.FAILED]:
        raise CommandError(f"{tally[ItemStatus.FAILED]} item(s) failed; see the messages above. The rest were imported.")


def export_memories(
    command: Any, *, org: str, scope: str | None, status: str, output: str | None, no_progress: bool, **_: Any
) -> None:
    operator = common.operator(org)
    organization = operator.organization
    target = common.scope(operator, scope) if scope else None
    export = services.memory_export(principal=operator, scope=target, status=status)
    lines = (json.dumps(line, ensure_ascii=False) for line in export.lines)
    with tqdm(total=export.count, unit="memory", desc="export", file=sys.stderr, disable=no_progress or not output) as bar:
        if output:
            try:
                _write_atomically(Path(output), lines, bar)
            except OSError as exc:
                raise CommandError(f"Cannot write the export to {output}: {exc.strerror or exc}.") from None
        else:
            for line in lines:
                command.stdout.write(line)
    where = f" to {output}" if output else ""
    kind = "" if status == "all" else f"{status} "
    command.stderr.write(f"Exported {export.count} {kind}memories of {organization.slug}{where}.")


def _write_atomically(path: Path, lines: Any, bar: tqdm[Any]) -> None:
    """Write to a private temporary file beside `path`, then rename: no half-written export is left."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(line + "\n")
                bar.update(1)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
