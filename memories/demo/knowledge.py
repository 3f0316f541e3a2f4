"""The demo organization's knowledge base, written once through the normal write pipeline.

The memories live in `data/*.toml` (written by hand, committed; nothing is generated at random):
decisions, policies, incidents, runbooks, pull requests, Slack threads, e-mails, docs and a
meeting brief, as if synced from GitHub, Slack, Gmail, Drive and Notion, with source links.
Each entry says who wrote it (`by`, a demo person, default Ada), where (`scope`), for whom
(`clearance`) and how long ago (`age`, in days before the seed runs, so the demo never looks
stale). An entry with `supersedes` replaces an earlier one as a new version.

Every write is `memory_create_many` / `memory_supersede` / `brief_save` as that person, so
scopes, grants, clearance, chunking, embedding, audit, conflict detection and entity extraction
all run as for real data. Afterwards each memory's `created_at` is set to its `valid_from`:
the demo is meant to look like two years of syncing, and the dashboard's weekly chart and the
conflict detector's "which came first" both read `created_at`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from cortex_site.errors import CortexError
from memories.access import CliPrincipal, Principal
from memories.models import Membership, Memory, Organization
from memories.services.briefs import BriefDraft, brief_save
from memories.services.memories import MemoryDraft, memory_create_many, memory_supersede

DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_WRITER = "ada@acme.test"
BATCH = 25  # one embedding call per batch, as the importer does


@dataclass(frozen=True)
class Entry:
    key: str
    title: str
    content: str
    scope: str
    category: str
    source: str
    clearance: str
    age: int
    by: str = DEFAULT_WRITER
    author: str = ""
    url: str = ""
    tags: tuple[str, ...] = ()
    supersedes: str = ""


@dataclass(frozen=True)
class Brief:
    key: str
    title: str
    scope: str
    clearance: str
    age: int
    summary: str
    transcript: str
    decisions: tuple[str, ...]
    attendees: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    by: str = DEFAULT_WRITER


@dataclass
class SeedReport:
    memories: int = 0
    superseded: int = 0
    briefs: int = 0
    failures: list[str] = field(default_factory=list)


_ENTRY_FIELDS = set(Entry.__dataclass_fields__)
_BRIEF_FIELDS = set(Brief.__dataclass_fields__)


def _entries_of(path: Path, data: dict[str, Any]) -> Iterator[Entry]:
    defaults = data.get("defaults", {})
    for raw in data.get("memory", []):
        values = {**defaults, **raw}
        unknown = set(values) - _ENTRY_FIELDS
        if unknown:
            raise ValueError(f"{path.name}: entry {raw.get('key')!r} has unknown fields {sorted(unknown)}")
        values["tags"] = tuple(values.get("tags", ()))
        values["content"] = values["content"].strip() + "\n"
        yield Entry(**values)


def _briefs_of(path: Path, data: dict[str, Any]) -> Iterator[Brief]:
    for raw in data.get("brief", []):
        unknown = set(raw) - _BRIEF_FIELDS
        if unknown:
            raise ValueError(f"{path.name}: brief {raw.get('key')!r} has unknown fields {sorted(unknown)}")
        yield Brief(**{**raw, **{k: tuple(raw.get(k, ())) for k in ("decisions", "attendees", "tags")}})


def load(data_dir: Path = DATA_DIR) -> tuple[list[Entry], list[Brief]]:
    """Every entry and brief of the data files, oldest first (a superseding entry after its original)."""
    entries: list[Entry] = []
    briefs: list[Brief] = []
    for path in sorted(data_dir.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        entries.extend(_entries_of(path, data))
        briefs.extend(_briefs_of(path, data))
    keys = [entry.key for entry in entries] + [brief.key for brief in briefs]
    duplicates = {key for key in keys if keys.count(key) > 1}
    if duplicates:
        raise ValueError(f"duplicate demo keys: {sorted(duplicates)}")
    known = {entry.key: entry for entry in entries}
    for entry in entries:
        if entry.supersedes and (entry.supersedes not in known or known[entry.supersedes].age <= entry.age):
            raise ValueError(f"{entry.key} supersedes {entry.supersedes!r}, which is missing or not older")
    entries.sort(key=lambda e: (-e.age, e.key))
    briefs.sort(key=lambda b: (-b.age, b.key))
    return entries, briefs


def _moment(now: datetime, age: int, key: str) -> datetime:
    """`age` days ago, at a working hour that differs between entries of the same day."""
    minutes = sum(map(ord, key)) % (8 * 60)
    day = (now - timedelta(days=age)).replace(hour=8, minute=0, second=0, microsecond=0)
    return min(day + timedelta(minutes=minutes), now - timedelta(minutes=age))


def _draft(entry: Entry, valid_from: datetime) -> MemoryDraft:
    return MemoryDraft(
        content=entry.content,
        title=entry.title,
        scope=entry.scope,
        category=entry.category,
        source=entry.source,
        source_url=entry.url,
        author_name=entry.author,
        tags=list(entry.tags),
        clearance_min=entry.clearance,
        valid_from=valid_from,
        idempotency_key=f"demo:{entry.key}",
    )


def _runs(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    """Consecutive new entries by the same writer, in batches; each superseding entry alone."""
    run: list[Entry] = []
    for entry in entries:
        if run and (entry.supersedes or run[0].by != entry.by or len(run) == BATCH):
            yield run
            run = []
        if entry.supersedes:
            yield [entry]
        else:
            run.append(entry)
    if run:
        yield run


def _backdate(memory_id: Any, moment: datetime) -> None:
    Memory.objects.filter(pk=memory_id).update(created_at=moment)


def _grounded(brief: Brief) -> list[dict[str, Any]]:
    """Each decision names a sentence of the transcript; its offsets are looked up, not typed in."""
    decisions = []
    for text in brief.decisions:
        start = brief.transcript.find(text)
        if start < 0:
            raise ValueError(f"brief {brief.key}: decision {text!r} is not in its transcript")
        decisions.append({"text": text, "quote": text, "source": "transcript", "start": start, "end": start + len(text)})
    return decisions


def seed_knowledge(organization: Organization, *, now: datetime | None = None, data_dir: Path = DATA_DIR) -> SeedReport | None:
    """Write the demo knowledge into `organization` once; None if it already holds memories."""
    if Memory.objects.filter(organization=organization).exists():
        return None
    now = now or timezone.now()
    entries, briefs = load(data_dir)
    principals: dict[str, Principal] = {}

    def principal_of(email: str) -> Principal:
        if email not in principals:
            membership = Membership.objects.select_related("organization", "user").get(
                organization=organization, user__email=email
            )
            # Seeded data is an import on the demo people's behalf: authors and dates are the sources' own.
            principals[email] = CliPrincipal(membership)
        return principals[email]

    report = SeedReport()
    written: dict[str, Any] = {}
    with transaction.atomic():
        for run in _runs(entries):
            principal = principal_of(run[0].by)
            if run[0].supersedes:
                entry = run[0]
                if entry.supersedes not in written:
                    report.failures.append(f"{entry.key}: the version it replaces ({entry.supersedes}) was not written")
                    continue
                moment = _moment(now, entry.age, entry.key)
                result = memory_supersede(
                    principal=principal,
                    memory_id=written[entry.supersedes],
                    changes={
                        "content": entry.content,
                        "title": entry.title,
                        "source_url": entry.url,
                        "author_name": entry.author,
                        "tags": list(entry.tags),
                        "clearance_min": entry.clearance,
                        "valid_from": moment,
                        "idempotency_key": f"demo:{entry.key}",
                    },
                )
                written[entry.key] = result.memory.pk
                _backdate(result.memory.pk, moment)
                report.superseded += 1
                continue
            moments = [_moment(now, entry.age, entry.key) for entry in run]
            outcomes = memory_create_many(
                principal=principal, drafts=[_draft(entry, moment) for entry, moment in zip(run, moments, strict=True)]
            )
            for entry, moment, outcome in zip(run, moments, outcomes, strict=True):
                if isinstance(outcome, CortexError):
                    report.failures.append(f"{entry.key}: {outcome.message}")
                    continue
                written[entry.key] = outcome.memory.pk
                _backdate(outcome.memory.pk, moment)
                report.memories += 1
        for brief in briefs:
            moment = _moment(now, brief.age, brief.key)
            result = brief_save(
                principal=principal_of(brief.by),
                draft=BriefDraft(
                    title=brief.title,
                    summary=brief.summary.strip(),
                    transcript=brief.transcript.strip(),
                    decisions=_grounded(
                        Brief(**{**brief.__dict__, "transcript": brief.transcript.strip()}),
                    ),
                    meeting_date=moment.date(),
                    attendees=brief.attendees,
                    scope=brief.scope,
                    clearance_min=brief.clearance,
                    tags=brief.tags,
                    idempotency_key=f"demo:{brief.key}",
                ),
            )
            _backdate(result.memory.pk, result.memory.valid_from)
            report.briefs += 1
    return report
