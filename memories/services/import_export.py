"""Bulk import (documents and JSONL) through the write pipeline, and JSONL export.

Import: every item — a document, or one line of a .jsonl file — goes through the write
pipeline on behalf of a Principal (`memory_create`; JSONL lines in batches of JSONL_BATCH
through `memory_create_many`: one embedding call and one commit per batch), so scope
resolution, no-write-up, clearance, chunking, embedding and auditing are exactly those of a
single write. Items fail one by one with the
pipeline's own error; the rest carry on. Re-running an import creates nothing new: each item
carries an idempotency key derived from where it came from and what it holds (see
`_file_key` and `_line_key`), and the pipeline answers a known key with the original memory.

Export: the operator's view of an organization (no principal: every scope and clearance),
as JSONL lines in the REST memory shape, audited as `memory.export`. Import reads that shape
back, so export → import elsewhere → export gives the same memories.

Supersession chains: a history export (`status="all"`) carries every version with its export
`id` and the ids it `supersedes` / is `superseded_by`. Lines that take part in a chain are
imported after the rest of their file, all in one transaction (a savepoint per chain, so a chain
that cannot be written is left out whole, never half): oldest version first, each newer version
written through the pipeline as superseding the one before (`memory_create(supersedes=...)`: the
older one is retired and both are linked, audited as `memory.supersede`), and links the pipeline
cannot make that way (a conflict decision that retired one memory in favour of another) are
set after. Re-importing the file replays every idempotency key and finds every link in place:
nothing changes. Redacted versions are never imported (their content is gone); a chain passing
through one is rebuilt on each side of it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import transaction

from audit.services import record
from cortex_site.errors import CortexError, NotFound, ServiceUnavailable, ValidationFailed
from cortex_site.moments import parse_moment
from cortex_site.text import LONE_SURROGATE, strings_in
from memories.access import Operator, Principal, clearance_names
from memories.interchange.representation import memory_representation, present_memories
from memories.models import Memory, Scope
from memories.selectors.memories import readable_base
from memories.services.documents import SUPPORTED_EXTENSIONS, check_size, extract_text
from memories.services.memories import MemoryDraft, WriteResult, memory_create, memory_create_many
from memories.services.memories.pipeline import retire

IMPORT_SOURCE = "Import"
JSONL_BATCH = 25
JSONL_EXTENSION = ".jsonl"
IMPORTABLE_EXTENSIONS = (*SUPPORTED_EXTENSIONS, JSONL_EXTENSION)

# What a JSONL line may set: the REST create fields (DESIGN.md §4 and POST /api/memories).
LINE_FIELDS = frozenset(
    {
        "title",
        "content",
        "scope",
        "category",
        "source",
        "source_url",
        "author",
        "author_name",
        "tags",
        "clearance_min",
        "valid_from",
        "valid_until",
        "idempotency_key",
    }
)
# Fields the REST API answers with but never accepts: an exported line carries them, and
# they are ignored on the way back in (ids and timestamps belong to the new organization).
READ_ONLY_FIELDS = frozenset(
    {
        "id",
        "status",
        "created_at",
        "updated_at",
        "supersedes",
        "superseded_by",
        "scope_resolution",
        "deduplicated",
        "chunk_count",
        "history",
        "citation",
        "redaction",
        "conflicts",
    }
)
EXPORT_STATUSES = ("active", "superseded", "redacted", "all")
# Statuses a line may carry on import: the current store, and the versions it superseded.
IMPORTED_STATUSES = (None, "active", "superseded")


class ItemStatus:
    CREATED = "created"
    DEDUPLICATED = "deduplicated"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class ImportFile:
    path: Path
    relative: str  # the path relative to the argument it was found under (a file argument: its name)

    @property
    def is_jsonl(self) -> bool:
        return self.path.suffix.lower() == JSONL_EXTENSION


@dataclass(frozen=True)
class ItemOutcome:
    label: str  # "notes/a.md", or "dump.jsonl:12" for a line
    status: str
    memory_id: str | None = None
    error_code: str = ""
    message: str = ""
    fatal: bool = False  # nothing after this can succeed (the embedding provider is down)


@dataclass(frozen=True)
class ImportDefaults:
    """What the operator chose for items that do not say: the scope and the category."""

    scope: str | None = None
    category: str | None = None


# -- finding files ----------------------------------------------------------------------------
def collect_files(paths: Sequence[str | Path]) -> tuple[list[ImportFile], list[ItemOutcome]]:
    """The files to import, and outcomes for arguments that cannot be.

    Directories are walked recursively in name order; inside them hidden entries and files of
    other types are skipped (reported as skipped, not failed). A file named explicitly is
    imported whatever its extension, so an unsupported one fails with the reason.
    """
    files: list[ImportFile] = []
    outcomes: list[ItemOutcome] = []
    seen: set[Path] = set()
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            for directory, subdirs, names in os.walk(root):
                subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
                for name in sorted(names):
                    path = Path(directory) / name
                    relative = path.relative_to(root).as_posix()
                    if name.startswith("."):
                        continue
                    if path.suffix.lower() not in IMPORTABLE_EXTENSIONS:
                        outcomes.append(ItemOutcome(relative, ItemStatus.SKIPPED, message="not a supported file type"))
                        continue
                    if path.resolve() not in seen:
                        seen.add(path.resolve())
                        files.append(ImportFile(path, relative))
        elif root.is_file():
            if root.resolve() not in seen:
                seen.add(root.resolve())
                files.append(ImportFile(root, root.name))
        else:
            outcomes.append(
                ItemOutcome(str(raw), ItemStatus.FAILED, error_code="NOT_FOUND", message=f"{raw}: no such file or directory.")
            )
    return files, outcomes


def count_items(files: Sequence[ImportFile]) -> int:
    """How many items the files hold (a document is one; a JSONL file, one per non-blank line)."""
    total = 0
    for item in files:
        if not item.is_jsonl:
            total += 1
            continue
        try:
            with item.path.open("rb") as handle:
                total += sum(1 for line in handle if line.strip())
        except OSError:
            total += 1  # reported as one failure when the import reaches it
    return total


# -- importing ----------------------------------------------------------------------------------
def import_files(*, principal: Principal, files: Sequence[ImportFile], defaults: ImportDefaults) -> Iterator[ItemOutcome]:
    """Import each file (each JSONL line) through memory_create, yielding one outcome per item.

    Stops after an outcome marked `fatal` (the embedding provider is unavailable or does not
    match the store): every later item would fail the same way, and a re-run resumes cleanly.
    """
    for item in files:
        outcomes = (
            _import_jsonl(principal, item, defaults) if item.is_jsonl else iter([_import_document(principal, item, defaults)])
        )
        for outcome in outcomes:
            yield outcome
            if outcome.fatal:
                return


def _write(principal: Principal, label: str, draft: MemoryDraft) -> ItemOutcome:
    try:
        result: WriteResult | CortexError = memory_create(principal=principal, draft=draft)
    except CortexError as exc:
        result = exc
    return _outcome(label, result)


def _outcome(label: str, result: WriteResult | CortexError) -> ItemOutcome:
    if isinstance(result, CortexError):
        return _failed(label, result)
    status = ItemStatus.DEDUPLICATED if result.deduplicated else ItemStatus.CREATED
    return ItemOutcome(label, status, memory_id=str(result.memory.pk))


def _failed(label: str, exc: CortexError) -> ItemOutcome:
    return ItemOutcome(
        label, ItemStatus.FAILED, error_code=exc.error_code, message=exc.message, fatal=isinstance(exc, ServiceUnavailable)
    )


def _digest(*parts: str | bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part.encode() if isinstance(part, str) else part)
        hasher.update(b"\x00")
    return hasher.hexdigest()


def _file_key(relative: str, data: bytes) -> str:
    # Where it sits under the imported folder + what it holds: an unchanged file is the same
    # item on every run; an edited one is a new item (and, with new content, a new memory).
    return "import:file:" + _digest(relative, hashlib.sha256(data).digest())


def _line_key(relative: str, raw: bytes, line_id: Any) -> str:
    if isinstance(line_id, str) and line_id.strip():
        # An exported memory keeps its identity whatever the file is called.
        line_id = line_id.strip()
        return "import:id:" + (line_id if len(line_id) <= 200 else _digest(line_id))
    return "import:line:" + _digest(relative, hashlib.sha256(raw.strip()).digest())


def _import_document(principal: Principal, item: ImportFile, defaults: ImportDefaults) -> ItemOutcome:
    try:
        check_size(item.relative, item.path.stat().st_size)
        data = item.path.read_bytes()
        document = extract_text(item.relative, data)
    except CortexError as exc:
        return _failed(item.relative, exc)
    except OSError as exc:
        return ItemOutcome(
            item.relative, ItemStatus.FAILED, error_code="UNREADABLE", message=f"{item.relative}: {exc.strerror or exc}."
        )
    draft = MemoryDraft(
        content=document.text,
        title=document.title,
        scope=defaults.scope,
        category=defaults.category or "note",
        source=IMPORT_SOURCE,
        idempotency_key=_file_key(item.relative, data),
    )
    return _write(principal, item.relative, draft)


def _import_jsonl(principal: Principal, item: ImportFile, defaults: ImportDefaults) -> Iterator[ItemOutcome]:
    try:
        handle = item.path.open("rb")
    except OSError as exc:
        yield ItemOutcome(
            item.relative, ItemStatus.FAILED, error_code="UNREADABLE", message=f"{item.relative}: {exc.strerror or exc}."
        )
        return
    # Outcomes in file order: a line that failed to parse waits for the drafts before it.
    batch: list[ItemOutcome | tuple[str, MemoryDraft]] = []
    versions: list[_Version] = []  # lines of supersession chains, imported once the whole file is read
    seen_ids: set[str] = set()
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            label = f"{item.relative}:{number}"
            try:
                fields = _parse_line(raw)
                if fields.get("status") not in IMPORTED_STATUSES:
                    batch.append(
                        ItemOutcome(
                            label,
                            ItemStatus.SKIPPED,
                            message=f"a {fields['status']} memory (only active and superseded ones are imported)",
                        )
                    )
                else:
                    draft = draft_from_fields(
                        fields, defaults=defaults, idempotency_key=_line_key(item.relative, raw, fields.get("id"))
                    )
                    version = _version(label, fields, draft)
                    if version is None:
                        batch.append((label, draft))
                    elif version.export_id in seen_ids:
                        raise ValidationFailed(
                            f"Another line of this file has the id {version.export_id!r}.", error_code="DUPLICATE_ID"
                        )
                    else:
                        seen_ids.add(version.export_id)
                        versions.append(version)
            except CortexError as exc:
                batch.append(_failed(label, exc))
            if sum(1 for entry in batch if isinstance(entry, tuple)) >= JSONL_BATCH:
                yield from _write_batch(principal, batch)
                batch = []
    yield from _write_batch(principal, batch)
    yield from _import_chains(principal, versions)


def _write_batch(principal: Principal, batch: list[ItemOutcome | tuple[str, MemoryDraft]]) -> Iterator[ItemOutcome]:
    writes = [entry for entry in batch if isinstance(entry, tuple)]
    results = iter(memory_create_many(principal=principal, drafts=[draft for _, draft in writes])) if writes else iter(())
    for entry in batch:
        if isinstance(entry, ItemOutcome):
            yield entry
        else:
            yield _outcome(entry[0], next(results))


# -- importing supersession chains -----------------------------------------------------------------
@dataclass(frozen=True)
class _Version:
    """One line of a supersession chain: its export id and the export ids it links to."""

    label: str
    export_id: str
    supersedes: str | None
    superseded_by: str | None
    superseded: bool  # the line's status is "superseded"
    draft: MemoryDraft


class _ChainFailed(Exception):
    def __init__(self, outcome: ItemOutcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


def _link(fields: dict[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed(f"{name} must be a memory id or null.", error_code="INVALID_FIELD", details={"field": name})
    return value.strip()


def _version(label: str, fields: dict[str, Any], draft: MemoryDraft) -> _Version | None:
    """The line as a chain version, or None for a plain memory (active, linked to nothing)."""
    supersedes, superseded_by = _link(fields, "supersedes"), _link(fields, "superseded_by")
    superseded = fields.get("status") == "superseded"
    if supersedes is None and superseded_by is None and not superseded:
        return None
    export_id = fields.get("id")
    if not isinstance(export_id, str) or not export_id.strip():
        if not superseded:
            return None  # links without an id of its own: nothing in the file can point back at it
        export_id = f"\x00{label}"  # nothing can point at it either, but it is stored as superseded
    return _Version(label, export_id.strip(), supersedes, superseded_by, superseded, draft)


def _chains(versions: Sequence[_Version]) -> list[list[_Version]]:
    """The versions grouped into chains (linked either way), each oldest first, in file order of their first line."""
    by_id = {v.export_id: v for v in versions}
    parent = {v.export_id: v.export_id for v in versions}

    def root(export_id: str) -> str:
        while parent[export_id] != export_id:
            parent[export_id] = parent[parent[export_id]]
            export_id = parent[export_id]
        return export_id

    for version in versions:
        for other in (version.supersedes, version.superseded_by):
            if other in by_id:
                parent[root(other)] = root(version.export_id)
    groups: dict[str, list[_Version]] = {}
    for version in by_id.values():
        groups.setdefault(root(version.export_id), []).append(version)
    ordered = [_oldest_first(group, by_id) for group in groups.values()]
    positions = {v.export_id: n for n, v in enumerate(versions)}
    return sorted(ordered, key=lambda chain: min(positions[v.export_id] for v in chain))


def _oldest_first(group: Sequence[_Version], by_id: dict[str, _Version]) -> list[_Version]:
    """Each version after the one it supersedes (a conflict decision may link a newer memory back
    to an older one, so file order alone is not enough); a cycle is broken where it was entered."""
    placed: list[_Version] = []
    seen: set[str] = set()

    def place(version: _Version, path: frozenset[str]) -> None:
        if version.export_id in seen or version.export_id in path:
            return
        older = by_id.get(version.supersedes) if version.supersedes else None
        if older is not None:
            place(older, path | {version.export_id})
        seen.add(version.export_id)
        placed.append(version)

    for version in group:
        place(version, frozenset())
    return placed


def _import_chains(principal: Principal, versions: Sequence[_Version]) -> Iterator[ItemOutcome]:
    """Write the chains in one transaction, a savepoint each; see the module docstring."""
    outcomes: list[ItemOutcome] = []
    with transaction.atomic():
        for chain in _chains(versions):
            try:
                with transaction.atomic():
                    outcomes.extend(_import_chain(principal, chain))
            except _ChainFailed as failure:
                outcomes.extend(
                    failure.outcome
                    if version.label == failure.outcome.label
                    else ItemOutcome(
                        version.label,
                        ItemStatus.FAILED,
                        error_code="CHAIN_NOT_IMPORTED",
                        message=f"Not imported: {failure.outcome.label}, a version of the same supersession chain, failed.",
                    )
                    for version in chain
                )
                if failure.outcome.fatal:
                    break
    yield from outcomes


def _import_chain(principal: Principal, chain: Sequence[_Version]) -> list[ItemOutcome]:
    by_id = {v.export_id: v for v in chain}
    # Only memories this import wrote (or wrote on an earlier run: the same idempotency key) are
    # linked or retired; a line deduplicated onto someone else's memory leaves that memory as it is.
    stored: dict[str, Memory] = {}
    outcomes: list[ItemOutcome] = []
    for version in chain:
        older = stored.get(version.supersedes) if version.supersedes else None
        follows = (
            older is not None
            and older.status == Memory.Status.ACTIVE
            and older.superseded_by_id is None
            and by_id[version.supersedes].superseded_by == version.export_id  # type: ignore[index]
        )
        try:
            result = memory_create(principal=principal, draft=version.draft, supersedes=older if follows else None)
        except CortexError as exc:
            raise _ChainFailed(_failed(version.label, exc)) from None
        if result.memory.idempotency_key == version.draft.idempotency_key and result.memory.created_by_id == principal.user.pk:
            stored[version.export_id] = result.memory
        outcomes.append(_outcome(version.label, result))
    for version in chain:
        if version.export_id in stored:
            _complete_links(principal, version, stored)
    return outcomes


def _complete_links(principal: Principal, version: _Version, stored: dict[str, Memory]) -> None:
    """Links the pipeline did not make while writing the chain, set only where none is set yet.

    A version superseded in favour of another memory (a conflict decision) is retired and linked
    forward; one linked back to an older version gets that link; a superseded version whose newer
    version is not in the file (redacted, or beyond the exporter's rights) is retired on its own.
    """
    memory = Memory.objects.select_for_update().get(pk=stored[version.export_id].pk)
    newer = stored.get(version.superseded_by) if version.superseded_by else None
    older = stored.get(version.supersedes) if version.supersedes else None
    if older is not None and memory.supersedes_id is None and older.pk != memory.pk:
        Memory.objects.filter(pk=memory.pk).update(supersedes=older)
    if not version.superseded or memory.status != Memory.Status.ACTIVE:
        return
    if not principal.can_write_memory(memory):
        raise _ChainFailed(
            ItemOutcome(
                version.label,
                ItemStatus.FAILED,
                error_code="MEMORY_NOT_WRITABLE",
                message="This version is already stored in a scope you cannot write; it cannot be marked superseded.",
            )
        )
    retire(memory, release_external_id=False)
    successor = newer if newer is not None and newer.pk != memory.pk else None
    if successor is not None:
        Memory.objects.filter(pk=memory.pk).update(superseded_by=successor)
    record(
        "memory.supersede",
        organization=principal.organization_id,
        actor=principal.actor,
        target_type="memory",
        target_id=memory.pk,
        details={"superseded_by": str(successor.pk) if successor else None, "reason": "import", "via": "import"},
    )


def _parse_line(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationFailed("This line is not UTF-8 text.", error_code="NOT_UTF8") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationFailed(
            f"This line is not valid JSON ({exc.msg} at column {exc.colno}).", error_code="INVALID_JSON"
        ) from None
    if not isinstance(value, dict):
        raise ValidationFailed("Each line must be a JSON object (one memory).", error_code="INVALID_JSON")
    # JSON escapes can spell what PostgreSQL cannot store: half of a surrogate pair ("\\ud83d"), a NUL.
    for string in strings_in(value):
        if LONE_SURROGATE.search(string):
            raise ValidationFailed(
                "This line holds half of a surrogate pair (an escape such as \\ud83d), which is not UTF-8 text.",
                error_code="NOT_UTF8",
            )
        if "\x00" in string:
            raise ValidationFailed(
                "This line holds a NUL character (\\u0000), which cannot be stored.", error_code="INVALID_TEXT"
            )
    return value


def draft_from_fields(fields: dict[str, Any], *, defaults: ImportDefaults, idempotency_key: str) -> MemoryDraft:
    """A MemoryDraft from one memory in the REST shape; read-only fields are ignored, others refused.

    The line's own scope and category win over the operator's defaults; its source defaults to
    "Import"; `author` may be the REST object ({"name": ...}) or a plain name.
    """
    unknown = sorted(set(fields) - LINE_FIELDS - READ_ONLY_FIELDS)
    if unknown:
        raise ValidationFailed(
            f"Unknown field{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. A line holds the REST memory fields "
            f"({', '.join(sorted(LINE_FIELDS))}); read-only ones such as id and status are ignored.",
            error_code="UNKNOWN_FIELDS",
            details={"fields": unknown},
        )
    content = fields.get("content")
    if not isinstance(content, str):
        raise ValidationFailed(
            "content is required and must be a string.", error_code="INVALID_FIELD", details={"field": "content"}
        )
    tags = fields.get("tags") or []
    if not isinstance(tags, list):
        raise ValidationFailed("tags must be a list of strings.", error_code="INVALID_TAGS")
    explicit_key = _text(fields, "idempotency_key")
    return MemoryDraft(
        content=content,
        title=_text(fields, "title"),
        scope=_text(fields, "scope") or defaults.scope,
        category=_text(fields, "category") or defaults.category or "note",
        source=_text(fields, "source") or IMPORT_SOURCE,
        source_url=_text(fields, "source_url"),
        author_name=_author_name(fields),
        tags=tags,
        clearance_min=_text(fields, "clearance_min") or None,
        valid_from=_moment(fields, "valid_from"),
        valid_until=_moment(fields, "valid_until"),
        idempotency_key=explicit_key or idempotency_key,
    )


def _text(fields: dict[str, Any], name: str) -> str:
    value = fields.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationFailed(f"{name} must be a string or null.", error_code="INVALID_FIELD", details={"field": name})
    return value


def _author_name(fields: dict[str, Any]) -> str:
    author = fields.get("author")
    if isinstance(author, dict):
        name = author.get("name")
        if name is not None and not isinstance(name, str):
            raise ValidationFailed("author.name must be a string.", error_code="INVALID_FIELD", details={"field": "author"})
        author = name
    elif author is not None and not isinstance(author, str):
        raise ValidationFailed(
            'author must be {"name": "..."} or a name.', error_code="INVALID_FIELD", details={"field": "author"}
        )
    return (author or _text(fields, "author_name")).strip()


def _moment(fields: dict[str, Any], name: str) -> datetime | None:
    value = _text(fields, name)
    if not value:
        return None
    try:
        return parse_moment(value)
    except ValueError:
        raise ValidationFailed(
            f"{name} is not an ISO 8601 date-time ({value!r}).", error_code="INVALID_DATE", details={"field": name}
        ) from None


# -- exporting ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Export:
    count: int
    lines: Iterator[dict[str, Any]]


def memory_export(*, principal: Principal | Operator, scope: Scope | None = None, status: str = "active") -> Export:
    """Every memory the principal may read of its organization (or one scope) in the REST shape, oldest first.

    The CLI exports as the `Operator`, who reads every scope and clearance rung. `status`
    "active" (the default) is the current store — including memories past their valid_until,
    which keep it —, "all" adds the history (superseded and redacted versions; redacted ones
    carry only their marker text). The export is audited before the first line is produced.
    """
    if status not in EXPORT_STATUSES:
        raise ValidationFailed(f"status must be one of {', '.join(EXPORT_STATUSES)}.", error_code="INVALID_STATUS")
    if scope is not None and (scope.organization_id != principal.organization_id or scope.pk not in principal.readable_scope_ids):
        # A scope the exporter cannot read answers as a missing one does (organization_scope's NotFound).
        raise NotFound("Scope not found.", error_code="UNKNOWN_SCOPE")
    organization = principal.organization
    memories = readable_base(principal)
    if scope is not None:
        memories = memories.filter(scope=scope)
    if status != "all":
        memories = memories.filter(status=status)
    count = memories.count()
    record(
        "memory.export",
        organization=organization,
        actor=principal.actor,
        target_type="organization",
        target_id=organization.slug,
        details={"scope": scope.slug if scope else None, "status": status, "count": count}
        | ({} if isinstance(principal, Operator) else {"via": "ui", "read_rule": True}),
    )
    ordered = memories.select_related("scope", "author").order_by("created_at", "id")
    if isinstance(principal, Operator):
        names = clearance_names(organization.pk)
        return Export(count=count, lines=(memory_representation(m, names) for m in ordered.iterator(chunk_size=500)))
    return Export(count=count, lines=_presented(principal, ordered))


def _presented(principal: Principal, memories: Any) -> Iterator[dict[str, Any]]:
    # A member's export links only to versions that member may read (present_memories), so the id
    # of a version beyond their clearance or scopes never appears in it.
    page: list[Memory] = []
    for memory in memories.iterator(chunk_size=500):
        page.append(memory)
        if len(page) == 500:
            yield from present_memories(principal, page)
            page = []
    yield from present_memories(principal, page)
