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

from django.utils.dateparse import parse_datetime

from audit.services import record
from cortex_site.errors import CortexError, NotFound, ServiceUnavailable, ValidationFailed
from memories.access import Operator, Principal, clearance_names
from memories.interchange.representation import memory_representation
from memories.models import Scope
from memories.selectors.memories import readable_base
from memories.services.documents import SUPPORTED_EXTENSIONS, check_size, extract_text
from memories.services.memories import MemoryDraft, WriteResult, memory_create, memory_create_many

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
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            label = f"{item.relative}:{number}"
            try:
                fields = _parse_line(raw)
                if fields.get("status") not in (None, "active"):
                    batch.append(
                        ItemOutcome(
                            label, ItemStatus.SKIPPED, message=f"a {fields['status']} memory (only active ones are imported)"
                        )
                    )
                else:
                    batch.append(
                        (
                            label,
                            draft_from_fields(
                                fields, defaults=defaults, idempotency_key=_line_key(item.relative, raw, fields.get("id"))
                            ),
                        )
                    )
            except CortexError as exc:
                batch.append(_failed(label, exc))
            if sum(1 for entry in batch if isinstance(entry, tuple)) >= JSONL_BATCH:
                yield from _write_batch(principal, batch)
                batch = []
    yield from _write_batch(principal, batch)


def _write_batch(principal: Principal, batch: list[ItemOutcome | tuple[str, MemoryDraft]]) -> Iterator[ItemOutcome]:
    writes = [entry for entry in batch if isinstance(entry, tuple)]
    results = iter(memory_create_many(principal=principal, drafts=[draft for _, draft in writes])) if writes else iter(())
    for entry in batch:
        if isinstance(entry, ItemOutcome):
            yield entry
        else:
            yield _outcome(entry[0], next(results))


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
        moment = parse_datetime(value)
    except ValueError:
        moment = None
    if moment is None:
        raise ValidationFailed(
            f"{name} is not an ISO 8601 date-time ({value!r}).", error_code="INVALID_DATE", details={"field": name}
        )
    return moment


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
        raise NotFound("That scope belongs to another organization.", error_code="UNKNOWN_SCOPE")
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
    names = clearance_names(organization.pk)
    ordered = memories.select_related("scope", "author").order_by("created_at", "id")
    return Export(count=count, lines=(memory_representation(m, names) for m in ordered.iterator(chunk_size=500)))
