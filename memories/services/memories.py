"""The write pipeline and the memory lifecycle: create, supersede, patch, redact, delete.

Every write path — REST, UI, MCP, CLI import, connectors — calls `memory_create` (or
`memory_create_many` for a batch, or one of the lifecycle services), so the same rules hold
everywhere:

  validate → resolve scope → may the principal write there (no write-up) and is clearance_min
  at most its clearance → idempotency / exact duplicate → chunk → embed every chunk in one
  batch → one transaction (memory, chunks, audit event) → post-write work on commit.

Embedding happens before the transaction: a provider failure stores nothing (503,
EMBEDDING_UNAVAILABLE) and a retry is safe.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.postgres.search import CombinedSearchVector, SearchVector
from django.db import IntegrityError, connection, transaction
from django.db.models import Value
from django.utils import timezone

from audit.services import Actor, record
from cortex_site.errors import Conflict, CortexError, PayloadTooLarge, PermissionDenied, ValidationFailed
from memories.access import Principal, clearance_names
from memories.chunking import Chunk, chunk_text
from memories.embeddings.store import embed_for_store
from memories.models import PUBLIC_DOCS_SLUG, Memory, MemoryChunk, Scope, SourceScopeRule
from memories.selectors.memories import memory_for_history
from memories.tasks import after_memory_write

REDACTED_TITLE = "[redacted]"
REDACTED_CONTENT = "[This memory was redacted.]"
MAX_TAGS = 20
DEFAULT_SOURCE_RULES = {"GitHub": "engineering"}

_CATEGORY = re.compile(r"^[a-z][a-z0-9_-]{0,49}$")
_TAG = re.compile(r"^[^\s,]{1,50}$")


class ScopeResolution:
    EXPLICIT = "explicit"
    SOURCE_RULE = "source_rule"
    DEFAULT = "default"


@dataclass(frozen=True)
class MemoryDraft:
    """What a caller wants stored. Only `content` is required."""

    content: str
    title: str = ""
    scope: str | None = None
    category: str = "note"
    source: str = "Manual"
    source_url: str = ""
    author_name: str = ""
    tags: Sequence[str] = ()
    clearance_min: str | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    external_id: str = ""
    idempotency_key: str = ""


@dataclass(frozen=True)
class WriteResult:
    memory: Memory
    scope_resolution: str
    deduplicated: bool = False
    warnings: list[str] = field(default_factory=list)


# -- validation ---------------------------------------------------------------------------
def content_hash(content: str) -> str:
    normalised = content.replace("\r\n", "\n").strip()
    return hashlib.sha256(normalised.encode()).hexdigest()


def derive_title(content: str, limit: int = 80) -> str:
    """A title from the first non-empty line, without Markdown heading marks, cut at a word."""
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    first = re.sub(r"^(#+|[-*>]|\d+[.)])\s*", "", first).strip() or first
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0] or first[:limit]
    return cut.rstrip(" ,.;:") + "…"


def normalise_tags(tags: Sequence[str]) -> list[str]:
    cleaned: list[str] = []
    for raw in tags:
        if not isinstance(raw, str):
            raise ValidationFailed("Tags must be strings.", error_code="INVALID_TAGS")
        tag = raw.strip().lower().lstrip("#")
        if not tag:
            continue
        if not _TAG.match(tag):
            raise ValidationFailed(
                f"Tag {raw!r} is not valid: a tag is 1–50 characters without spaces or commas.",
                error_code="INVALID_TAGS",
                details={"tag": raw},
            )
        if tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise ValidationFailed(f"At most {MAX_TAGS} tags.", error_code="INVALID_TAGS")
    return cleaned


def clean_category(category: str | None) -> str:
    value = (category or "note").strip().lower()
    if not _CATEGORY.match(value):
        raise ValidationFailed(
            f"Category {category!r} is not valid: a word of lowercase letters, digits, '-' or '_' (e.g. decision, policy, incident).",
            error_code="INVALID_CATEGORY",
        )
    return value


def clean_source_url(url: str) -> str:
    url = (url or "").strip()
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc or len(url) > 2000:
        raise ValidationFailed("source_url must be an http(s) URL of at most 2,000 characters.", error_code="INVALID_SOURCE_URL")
    return url


def clean_source(source: str) -> str:
    value = (source or "").strip()
    if not value or len(value) > 50 or not value.isprintable():
        raise ValidationFailed(
            "source must be 1–50 printable characters (e.g. Manual, GitHub, Slack).", error_code="INVALID_SOURCE"
        )
    return value


def clearance_rank_of(principal: Principal, name: str | None) -> int:
    """The rank for a clearance name (default: the lowest rung); never above the principal's own."""
    ladder = clearance_names(principal.organization_id)
    if name is None or name == "":
        return min(ladder) if ladder else 0
    for rank, rung in ladder.items():
        if rung.lower() == str(name).strip().lower():
            if rank > principal.clearance_rank:
                raise PermissionDenied(
                    f"You cannot store a memory at clearance {rung}: it is above your own ({principal.clearance}).",
                    error_code="CLEARANCE_ABOVE_OWN",
                )
            return rank
    raise ValidationFailed(
        f"Unknown clearance {name!r}. This organization's ladder is: {' < '.join(ladder[r] for r in sorted(ladder))}.",
        error_code="UNKNOWN_CLEARANCE",
    )


def check_validity(valid_from: datetime, valid_until: datetime | None) -> None:
    for value, name in ((valid_from, "valid_from"), (valid_until, "valid_until")):
        if value is not None and timezone.is_naive(value):
            raise ValidationFailed(f"{name} must include a timezone (e.g. 2025-01-15T10:30:00Z).", error_code="INVALID_DATE")
    if valid_until is not None and valid_until <= valid_from:
        raise ValidationFailed("valid_until must be after valid_from.", error_code="INVALID_VALIDITY_WINDOW")


def _check_text(title: str, content: str) -> None:
    if not content.strip():
        raise ValidationFailed("Content is empty.", error_code="EMPTY_CONTENT")
    if len(content) > settings.CORTEX_MAX_CONTENT_CHARS:
        raise PayloadTooLarge(
            f"Content is {len(content):,} characters; the limit is {settings.CORTEX_MAX_CONTENT_CHARS:,}.",
            error_code="CONTENT_TOO_LONG",
        )
    if len(title) > settings.CORTEX_MAX_TITLE_CHARS:
        raise PayloadTooLarge(
            f"Title is {len(title):,} characters; the limit is {settings.CORTEX_MAX_TITLE_CHARS:,}.", error_code="TITLE_TOO_LONG"
        )
    if "\x00" in content or "\x00" in title:
        raise ValidationFailed("Text must not contain NUL characters.", error_code="INVALID_TEXT")


# -- scope resolution ------------------------------------------------------------------------
def resolve_scope(principal: Principal, explicit: str | None, source: str) -> tuple[Scope, str]:
    """Which scope a new memory lands in, and which rule decided; refuses scopes it may not write.

    A scope the principal cannot read is reported exactly like a missing one (UNKNOWN_SCOPE),
    so granted scopes do not leak their existence. A rule never widens: when the rule's scope
    is not writable the write is refused rather than moved to a broader scope.
    """
    if explicit:
        scope = Scope.objects.filter(organization_id=principal.organization_id, slug=explicit).first()
        if scope is None or not principal.can_read_scope(scope):
            raise ValidationFailed(f"Unknown scope {explicit!r}.", error_code="UNKNOWN_SCOPE", details={"scope": explicit})
        resolution = ScopeResolution.EXPLICIT
    else:
        scope, resolution = _scope_by_rule(principal, source)
    if not principal.can_write_scope(scope):
        reason = "this token is read-only" if principal.read_only else "you can read it but not write to it"
        raise PermissionDenied(
            f"You cannot write to scope {scope.slug!r}: {reason}.",
            error_code="SCOPE_NOT_WRITABLE",
            details={"scope": scope.slug, "resolution": resolution},
        )
    return scope, resolution


def _scope_by_rule(principal: Principal, source: str) -> tuple[Scope, str]:
    rule = (
        SourceScopeRule.objects.filter(organization_id=principal.organization_id, source__iexact=source)
        .select_related("scope")
        .first()
    )
    if rule is not None:
        return rule.scope, ScopeResolution.SOURCE_RULE
    default_slug = next((slug for src, slug in DEFAULT_SOURCE_RULES.items() if src.lower() == source.lower()), None)
    if default_slug:
        scope = Scope.objects.filter(organization_id=principal.organization_id, slug=default_slug).first()
        if scope is not None:
            return scope, ScopeResolution.SOURCE_RULE
    return Scope.objects.get(organization_id=principal.organization_id, slug=PUBLIC_DOCS_SLUG), ScopeResolution.DEFAULT


# -- create ------------------------------------------------------------------------------------
def _readable_duplicate(principal: Principal, scope: Scope, digest: str, exclude: Memory | None) -> Memory | None:
    candidates = (
        Memory.objects.filter(
            organization_id=principal.organization_id, scope=scope, content_hash=digest, status=Memory.Status.ACTIVE
        )
        .only("id", "organization_id", "scope_id", "clearance_rank", "status", "valid_until")
        .order_by("created_at")
    )
    if exclude is not None:
        candidates = candidates.exclude(pk=exclude.pk)
    # Only a duplicate the writer can see may be returned; an invisible one must not leak.
    visible = next((m for m in candidates if principal.can_read_memory(m)), None)
    return None if visible is None else Memory.objects.select_related("scope", "author").get(pk=visible.pk)


def embedding_text(title: str, chunk: str) -> str:
    """The exact text embedded for a chunk (the write pipeline and `cortex reembed` share it).

    Title-prefixed: a chunk deep in a long document still carries what the document is about.
    """
    return f"{title}\n\n{chunk}" if title and not chunk.startswith(title) else chunk


def _lock(*parts: Any) -> None:
    key = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(key[:8], "big", signed=True)])


def _search_vector(title: str, tags: Sequence[str], text: str) -> CombinedSearchVector:
    """A chunk's full-text vector, computed by PostgreSQL in the INSERT: title and tags weigh more
    (A) than body text (B). The same vector as _index_chunks, without a second write of the row
    (an UPDATE would add new entries to every index on the chunk table, the HNSW one included)."""
    return cast(
        CombinedSearchVector,
        SearchVector(Value(title), config="english", weight="A")
        + SearchVector(Value(" ".join(tags)), config="english", weight="A")
        + SearchVector(Value(text), config="english", weight="B"),
    )


def _index_chunks(memory_id: Any) -> None:
    """Refill the full-text vectors of a memory's chunks after its title or tags changed (see _search_vector)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE memories_memorychunk AS c
               SET search_vector = setweight(to_tsvector('english', m.title), 'A')
                                || setweight(to_tsvector('english', array_to_string(m.tags, ' ')), 'A')
                                || setweight(to_tsvector('english', c.text), 'B')
              FROM memories_memory AS m
             WHERE m.id = c.memory_id AND c.memory_id = %s
            """,
            [memory_id],
        )


@dataclass(frozen=True)
class _PreparedWrite:
    """A draft that passed every check and needs storing: cleaned fields, scope, chunks."""

    principal: Principal
    draft: MemoryDraft
    title: str
    content: str
    source: str
    category: str
    tags: list[str]
    source_url: str
    valid_from: datetime
    scope: Scope
    resolution: str
    clearance_rank: int
    digest: str
    supersedes: Memory | None
    chunks: list[Chunk]

    def embedding_texts(self) -> list[str]:
        return [embedding_text(self.title, c.text) for c in self.chunks]


def memory_create(*, principal: Principal, draft: MemoryDraft, supersedes: Memory | None = None) -> WriteResult:
    """Store a memory through the whole pipeline; see the module docstring for the order of checks."""
    prepared = _prepare(principal, draft, supersedes)
    if isinstance(prepared, WriteResult):
        return prepared
    vectors = embed_for_store(prepared.embedding_texts(), for_write=True)
    return _store(prepared, vectors)


def memory_create_many(*, principal: Principal, drafts: Sequence[MemoryDraft]) -> list[WriteResult | CortexError]:
    """Store many memories as `memory_create` would, one outcome per draft, in order.

    For bulk ingest (imports): every draft is checked alone (a bad one is its own error), the
    chunks of all of them are embedded in one call, and they are stored in one transaction
    with a savepoint each, so there is one commit for the batch. An embedding failure fails
    every draft that needed it and stores none of them (retry-safe, like a single write).
    """
    outcomes: list[WriteResult | CortexError | None] = [None] * len(drafts)
    pending: list[tuple[int, _PreparedWrite]] = []
    for position, draft in enumerate(drafts):
        try:
            prepared = _prepare(principal, draft, None)
        except CortexError as exc:
            outcomes[position] = exc
            continue
        if isinstance(prepared, WriteResult):
            outcomes[position] = prepared
        else:
            pending.append((position, prepared))
    if pending:
        try:
            vectors = embed_for_store([text for _, p in pending for text in p.embedding_texts()], for_write=True)
        except CortexError as exc:
            for position, _ in pending:
                outcomes[position] = exc
            pending = []
        offset = 0
        with transaction.atomic():
            for position, prepared in pending:
                count = len(prepared.chunks)
                try:
                    outcomes[position] = _store(prepared, vectors[offset : offset + count])
                except CortexError as exc:
                    outcomes[position] = exc
                except IntegrityError:
                    # Its savepoint is rolled back; the rest of the batch goes on.
                    outcomes[position] = Conflict(
                        "Another memory took this item's identity meanwhile (the same source item twice?); it was not stored.",
                        error_code="DUPLICATE_ITEM",
                    )
                offset += count
    return [outcome for outcome in outcomes if outcome is not None]


def _prepare(principal: Principal, draft: MemoryDraft, supersedes: Memory | None) -> _PreparedWrite | WriteResult:
    """Every check before embedding: validation, scope, clearance, idempotency, duplicates.

    A WriteResult means nothing needs storing (a replayed idempotency key or a duplicate).
    """
    if principal.read_only:
        raise PermissionDenied("This token is read-only; it cannot store memories.", error_code="TOKEN_READ_ONLY")
    content = draft.content.replace("\r\n", "\n") if isinstance(draft.content, str) else ""
    title = (draft.title or "").strip() or derive_title(content)
    _check_text(title, content)
    source = clean_source(draft.source)
    category = clean_category(draft.category)
    tags = normalise_tags(draft.tags)
    source_url = clean_source_url(draft.source_url)
    valid_from = draft.valid_from or timezone.now()
    check_validity(valid_from, draft.valid_until)
    scope, resolution = resolve_scope(principal, draft.scope, source)
    clearance_rank = clearance_rank_of(principal, draft.clearance_min)
    digest = content_hash(content)

    if draft.idempotency_key:
        if len(draft.idempotency_key) > 255:
            raise ValidationFailed("idempotency_key is at most 255 characters.", error_code="INVALID_IDEMPOTENCY_KEY")
        earlier = Memory.objects.filter(
            organization_id=principal.organization_id, created_by=principal.user, idempotency_key=draft.idempotency_key
        ).first()
        if earlier is not None:
            return _replay(principal, earlier, resolution)
    if draft.external_id and supersedes is None:
        existing = Memory.objects.filter(
            organization_id=principal.organization_id, source=source, external_id=draft.external_id
        ).first()
        if existing is not None:
            if existing.status == Memory.Status.ACTIVE and existing.content_hash == digest:
                return WriteResult(existing, resolution, deduplicated=True)
            if existing.status != Memory.Status.ACTIVE:
                raise Conflict(
                    f"{source} item {draft.external_id!r} was {existing.status}; it is not recreated.",
                    error_code="EXTERNAL_ITEM_CLOSED",
                )
            supersedes = existing  # an edited source item supersedes its earlier memory
    duplicate = _readable_duplicate(principal, scope, digest, supersedes)
    if duplicate is not None:
        return WriteResult(duplicate, resolution, deduplicated=True)
    return _PreparedWrite(
        principal=principal,
        draft=draft,
        title=title,
        content=content,
        source=source,
        category=category,
        tags=tags,
        source_url=source_url,
        valid_from=valid_from,
        scope=scope,
        resolution=resolution,
        clearance_rank=clearance_rank,
        digest=digest,
        supersedes=supersedes,
        chunks=chunk_text(content),
    )


def _store(p: _PreparedWrite, vectors: Any) -> WriteResult:
    """One transaction (a savepoint inside a caller's): memory, chunks, audit event; post-write work on commit."""
    principal, draft, scope, supersedes = p.principal, p.draft, p.scope, p.supersedes
    user = principal.user
    try:
        with transaction.atomic():
            _lock("memory-content", principal.organization_id, scope.pk, p.digest)
            duplicate = _readable_duplicate(principal, scope, p.digest, supersedes)
            if duplicate is not None:
                return WriteResult(duplicate, p.resolution, deduplicated=True)
            external_id = draft.external_id or (supersedes.external_id if supersedes is not None else "")
            if supersedes is not None:
                _retire(supersedes)
            memory = Memory.objects.create(
                organization_id=principal.organization_id,
                scope=scope,
                title=p.title,
                content=p.content,
                category=p.category,
                source=p.source,
                source_url=p.source_url,
                author=None if draft.author_name else user,
                author_name=draft.author_name.strip()[:200],
                created_by=user,
                tags=p.tags,
                clearance_rank=p.clearance_rank,
                valid_from=p.valid_from,
                valid_until=draft.valid_until,
                external_id=external_id,
                content_hash=p.digest,
                idempotency_key=draft.idempotency_key,
                supersedes=supersedes,
            )
            MemoryChunk.objects.bulk_create(
                MemoryChunk(
                    memory=memory,
                    index=c.index,
                    char_start=c.start,
                    char_end=c.end,
                    text=c.text,
                    embedding=vectors[i],
                    organization_id=memory.organization_id,
                    scope=scope,
                    clearance_rank=p.clearance_rank,
                    status=memory.status,
                    valid_from=p.valid_from,
                    valid_until=memory.valid_until,
                    category=p.category,
                    source=p.source,
                    tags=p.tags,
                    search_vector=_search_vector(p.title, p.tags, c.text),
                )
                for i, c in enumerate(p.chunks)
            )
            if supersedes is not None:
                Memory.objects.filter(pk=supersedes.pk).update(superseded_by=memory)
                supersedes.superseded_by = memory
            record(
                "memory.create" if supersedes is None else "memory.supersede",
                organization=principal.organization_id,
                actor=principal.actor,
                target_type="memory",
                target_id=memory.pk,
                details={
                    "scope": scope.slug,
                    "scope_resolution": p.resolution,
                    "source": p.source,
                    "chunks": len(p.chunks),
                    "supersedes": str(supersedes.pk) if supersedes else None,
                },
            )
            transaction.on_commit(lambda: _enqueue_post_write(memory.pk))
    except IntegrityError:
        # Lost a race with the same idempotency key: the other request stored it; answer with that.
        if draft.idempotency_key:
            earlier = Memory.objects.filter(
                organization_id=principal.organization_id, created_by=user, idempotency_key=draft.idempotency_key
            ).first()
            if earlier is not None:
                return _replay(principal, earlier, p.resolution)
        raise
    return WriteResult(memory, p.resolution)


def _replay(principal: Principal, earlier: Memory, resolution: str) -> WriteResult:
    if not principal.can_read_memory(earlier, history=True):
        raise Conflict(
            "This idempotency_key was used for a memory you can no longer see; use a new key.",
            error_code="IDEMPOTENCY_KEY_REUSED",
        )
    return WriteResult(earlier, resolution, deduplicated=True)


def _retire(old: Memory, *, release_external_id: bool = True) -> None:
    """Old → superseded, if it is still active (a concurrent supersede loses cleanly).

    A new version of the same item takes over its source item id, so the newest version owns
    it and the next sync finds it; a memory retired in favour of *another* item keeps its id,
    so a re-sync of its source item does not bring it back.
    """
    changes: dict[str, Any] = {"status": Memory.Status.SUPERSEDED, "updated_at": timezone.now()}
    if release_external_id:
        changes["external_id"] = ""
    updated = Memory.objects.filter(pk=old.pk, status=Memory.Status.ACTIVE).update(**changes)
    if updated != 1:
        raise Conflict("This memory was changed meanwhile and is no longer active.", error_code="MEMORY_NOT_ACTIVE")
    MemoryChunk.objects.filter(memory_id=old.pk).update(status=Memory.Status.SUPERSEDED)
    old.status = Memory.Status.SUPERSEDED


def memory_supersede_with_existing(
    *, loser_id: Any, winner_id: Any, actor: Actor, reason: str, details: dict[str, Any] | None = None
) -> None:
    """Mark one active memory superseded by another, already stored, active memory.

    The lifecycle step behind conflict resolution (the caller has decided who wins and may
    act). Both memories must be active and of one organization; the loser's chunks leave
    search, it links forward to the winner, and the winner links back when it supersedes
    nothing else yet. Raises Conflict(MEMORY_NOT_ACTIVE) when either changed meanwhile.
    """
    with transaction.atomic():
        rows = {m.pk: m for m in Memory.objects.select_for_update().filter(pk__in=[loser_id, winner_id]).order_by("pk")}
        loser, winner = rows.get(_as_uuid(loser_id)), rows.get(_as_uuid(winner_id))
        if loser is None or winner is None or loser.organization_id != winner.organization_id or loser.pk == winner.pk:
            raise Conflict("These memories cannot supersede one another.", error_code="MEMORY_NOT_ACTIVE")
        if winner.status != Memory.Status.ACTIVE:
            raise Conflict("The memory that should stay is no longer active.", error_code="MEMORY_NOT_ACTIVE")
        _retire(loser, release_external_id=False)
        Memory.objects.filter(pk=loser.pk).update(superseded_by=winner)
        Memory.objects.filter(pk=winner.pk, supersedes__isnull=True).update(supersedes=loser)
        record(
            "memory.supersede",
            organization=loser.organization_id,
            actor=actor,
            target_type="memory",
            target_id=loser.pk,
            details={"superseded_by": str(winner.pk), "reason": reason, **(details or {})},
        )


def memory_reinstate(
    *, memory_id: Any, superseded_by_id: Any, actor: Actor, reason: str, details: dict[str, Any] | None = None
) -> None:
    """Undo `memory_supersede_with_existing`: the memory is active and searchable again.

    Only a memory still superseded by exactly `superseded_by_id` is reinstated (a later edit of
    it is never undone this way); raises Conflict(MEMORY_NOT_SUPERSEDED) otherwise.
    """
    with transaction.atomic():
        updated = Memory.objects.filter(pk=memory_id, status=Memory.Status.SUPERSEDED, superseded_by_id=superseded_by_id).update(
            status=Memory.Status.ACTIVE, superseded_by=None, updated_at=timezone.now()
        )
        if updated != 1:
            raise Conflict(
                "This memory is not superseded by the other one any more; it cannot be reinstated.",
                error_code="MEMORY_NOT_SUPERSEDED",
            )
        MemoryChunk.objects.filter(memory_id=memory_id).update(status=Memory.Status.ACTIVE)
        Memory.objects.filter(pk=superseded_by_id, supersedes_id=memory_id).update(supersedes=None)
        organization_id = Memory.objects.filter(pk=memory_id).values_list("organization_id", flat=True).get()
        record(
            "memory.reinstate",
            organization=organization_id,
            actor=actor,
            target_type="memory",
            target_id=memory_id,
            details={"was_superseded_by": str(superseded_by_id), "reason": reason, **(details or {})},
        )


def _as_uuid(value: Any) -> Any:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _enqueue_post_write(memory_id: Any) -> None:
    after_memory_write.delay(str(memory_id))


# -- lifecycle ------------------------------------------------------------------------------------
def memory_supersede(*, principal: Principal, memory_id: Any, changes: dict[str, Any]) -> WriteResult:
    """A new active memory replaces an active one; both keep their audit trail and link each other.

    `changes` may hold any MemoryDraft field; the rest is carried over from the old memory, except
    the author (the person superseding) and valid_from (now, unless given).
    """
    old = memory_for_history(principal, memory_id)
    if not principal.can_supersede(old):
        raise PermissionDenied(
            "You cannot change this memory: its scope is not writable for you.", error_code="MEMORY_NOT_WRITABLE"
        )
    if old.status != Memory.Status.ACTIVE:
        raise Conflict(f"This memory is {old.status}; only active memories can be superseded.", error_code="MEMORY_NOT_ACTIVE")
    unknown = set(changes) - {f for f in MemoryDraft.__dataclass_fields__ if f not in {"external_id"}}
    if unknown:
        raise ValidationFailed(f"Unknown fields: {', '.join(sorted(unknown))}.", error_code="UNKNOWN_FIELDS")
    names = clearance_names(principal.organization_id)
    base = MemoryDraft(
        content=old.content,
        title=old.title,
        scope=old.scope.slug,
        category=old.category,
        source=old.source,
        source_url=old.source_url,
        tags=list(old.tags),
        clearance_min=names.get(old.clearance_rank, ""),
        valid_from=None,
        valid_until=old.valid_until,
    )
    draft = replace(base, **changes)
    if "content" in changes and "title" not in changes and old.title == derive_title(old.content):
        draft = replace(draft, title="")  # the title was derived from the content: derive it again
    return memory_create(principal=principal, draft=draft, supersedes=old)


def memory_patch(*, principal: Principal, memory_id: Any, changes: dict[str, Any]) -> Memory:
    """Change metadata only (tags, category, valid_until, clearance_min). Content changes supersede."""
    allowed = {"tags", "category", "valid_until", "clearance_min"}
    unknown = set(changes) - allowed
    if unknown:
        raise ValidationFailed(
            f"Only {', '.join(sorted(allowed))} can be patched; change content with supersede. Unknown: {', '.join(sorted(unknown))}.",
            error_code="UNKNOWN_FIELDS",
        )
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    with transaction.atomic():
        memory = memory_for_history(principal, memory_id, for_update=True)
        if not principal.can_write_memory(memory):
            raise PermissionDenied(
                "You cannot change this memory: its scope is not writable for you.", error_code="MEMORY_NOT_WRITABLE"
            )
        if memory.status == Memory.Status.REDACTED:
            raise Conflict("A redacted memory cannot be changed.", error_code="MEMORY_REDACTED")
        fields: dict[str, Any] = {}
        if "tags" in changes:
            fields["tags"] = normalise_tags(changes["tags"] or [])
        if "category" in changes:
            fields["category"] = clean_category(changes["category"])
        if "valid_until" in changes:
            check_validity(memory.valid_from, changes["valid_until"])
            fields["valid_until"] = changes["valid_until"]
        if "clearance_min" in changes:
            fields["clearance_rank"] = clearance_rank_of(principal, changes["clearance_min"])
        if not fields:
            return memory
        before = {name: getattr(memory, name) for name in fields}
        Memory.objects.filter(pk=memory.pk).update(**fields, updated_at=timezone.now())
        MemoryChunk.objects.filter(memory_id=memory.pk).update(**fields)
        if "tags" in fields:
            _index_chunks(memory.pk)
        record(
            "memory.patch",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="memory",
            target_id=memory.pk,
            details={"changed": {k: {"from": before[k], "to": v} for k, v in fields.items()}},
        )
    memory.refresh_from_db()
    return memory


def memory_redact(*, principal: Principal, memory_id: Any, reason: str) -> Memory:
    """Remove a memory from search for good, keeping the row for provenance.

    Title and content become a marker, tags are cleared, chunks and vectors are deleted; who,
    why and when are kept. Allowed to the author, a writer of the scope, or an admin.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed("Say why this memory is redacted (reason).", error_code="REASON_REQUIRED")
    if len(reason) > 1000:
        raise ValidationFailed("The reason is at most 1,000 characters.", error_code="REASON_TOO_LONG")
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    with transaction.atomic():
        memory = memory_for_history(principal, memory_id, for_update=True)
        if not principal.can_redact(memory):
            raise PermissionDenied(
                "Only the author, a writer of its scope, or an admin can redact this memory.", error_code="REDACT_NOT_ALLOWED"
            )
        if memory.status == Memory.Status.REDACTED:
            raise Conflict("This memory is already redacted.", error_code="ALREADY_REDACTED")
        now = timezone.now()
        deleted_chunks, _ = MemoryChunk.objects.filter(memory_id=memory.pk).delete()
        _forget_derived(memory.pk)
        Memory.objects.filter(pk=memory.pk).update(
            status=Memory.Status.REDACTED,
            title=REDACTED_TITLE,
            content=REDACTED_CONTENT,
            tags=[],
            redacted_at=now,
            redacted_by=principal.user,
            redaction_reason=reason,
            updated_at=now,
        )
        record(
            "memory.redact",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="memory",
            target_id=memory.pk,
            details={"reason": reason, "previous_status": memory.status, "chunks_deleted": deleted_chunks},
        )
    memory.refresh_from_db()
    return memory


RedactionHook = Callable[[Any], None]
# Run inside the redaction's transaction with the memory id (registered by MemoriesConfig.ready():
# conflict dissent and explanations, the entity graph). The services that derive data from
# memories build on this module, so they hook in here instead of being imported by it.
REDACTION_HOOKS: list[RedactionHook] = []


def register_redaction_hook(hook: RedactionHook) -> None:
    if hook not in REDACTION_HOOKS:
        REDACTION_HOOKS.append(hook)


def _forget_derived(memory_id: Any) -> None:
    """A redacted memory's words must not survive in what was derived from it."""
    for hook in REDACTION_HOOKS:
        hook(memory_id)


def memory_delete(*, principal: Principal, memory_id: Any) -> None:
    """Hard erasure (admins only). The audit event keeps the id and scope, not the content."""
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    with transaction.atomic():
        memory = memory_for_history(principal, memory_id, for_update=True)
        principal.require_admin("Only organization admins can erase memories; others can redact.")
        details = {"scope": memory.scope.slug, "status": memory.status, "source": memory.source}
        memory.delete()
        record(
            "memory.delete",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="memory",
            target_id=memory_id,
            details=details,
        )
