"""The write pipeline: prepare (validate, resolve the scope, idempotency, duplicates), embed, store.

See the package docstring for the order of checks. Post-write work is enqueued on commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

from django.contrib.postgres.search import CombinedSearchVector, SearchVector
from django.db import IntegrityError, connection, transaction
from django.db.models import Value
from django.utils import timezone

from audit.services import record
from cortex_site.errors import Conflict, CortexError, PermissionDenied, ValidationFailed
from memories.access import Principal
from memories.chunking import Chunk, chunk_text
from memories.embeddings.store import embed_for_store
from memories.models import Conflict as ConflictRecord
from memories.models import Memory, MemoryChunk, Scope
from memories.services.memories.scopes import resolve_scope
from memories.services.memories.validation import (
    check_provenance,
    check_text,
    check_validity,
    clean_category,
    clean_source,
    clean_source_url,
    clearance_rank_of,
    content_hash,
    derive_title,
    normalise_tags,
)
from memories.services.post_write import post_write_enqueue


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
    # Set when the write is a proposed revision waiting in the conflict queue (the memory is "proposed").
    proposal: ConflictRecord | None = None


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
    (A) than body text (B). The same vector as index_chunks, without a second write of the row
    (an UPDATE would add new entries to every index on the chunk table, the HNSW one included)."""
    return cast(
        CombinedSearchVector,
        SearchVector(Value(title), config="english", weight="A")
        + SearchVector(Value(" ".join(tags)), config="english", weight="A")
        + SearchVector(Value(text), config="english", weight="B"),
    )


def index_chunks(memory_id: Any) -> None:
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
    author_given_by: str = ""
    propose: bool = False

    def embedding_texts(self) -> list[str]:
        return [embedding_text(self.title, c.text) for c in self.chunks]


def memory_create(
    *, principal: Principal, draft: MemoryDraft, supersedes: Memory | None = None, propose: bool = False
) -> WriteResult:
    """Store a memory through the whole pipeline; see the module docstring for the order of checks.

    With `propose` (and `supersedes`), the new version is stored as a proposed revision: status
    proposed (out of lists and recall), linked back to `supersedes` without retiring it, and a
    "revision" conflict in the manual queue — it becomes current only when a decider accepts it.
    """
    if propose and supersedes is None:
        raise ValueError("a proposed revision names the memory it would supersede")
    prepared = _prepare(principal, draft, supersedes)
    if isinstance(prepared, WriteResult):
        return prepared
    if propose:
        prepared = replace(prepared, propose=True)
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
    check_text(title, content)
    source = clean_source(draft.source)
    category = clean_category(draft.category)
    tags = normalise_tags(draft.tags)
    source_url = clean_source_url(draft.source_url)
    author_name, author_given_by = check_provenance(principal, draft)
    if author_name != draft.author_name:
        draft = replace(draft, author_name=author_name)
    valid_from = draft.valid_from or timezone.now()
    check_validity(valid_from, draft.valid_until)
    scope, resolution = resolve_scope(principal, draft.scope, source)
    token = principal.token
    if draft.clearance_min is None and token is not None and token.default_clearance_rank is not None:
        clearance_rank = min(token.default_clearance_rank, principal.clearance_rank)
    else:
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
        author_given_by=author_given_by,
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
            if p.propose:
                external_id = ""  # the original keeps its source item until the revision is accepted
            elif supersedes is not None:
                retire(supersedes)
            status = Memory.Status.PROPOSED if p.propose else Memory.Status.ACTIVE
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
                author_given_by=p.author_given_by,
                created_by=user,
                tags=p.tags,
                clearance_rank=p.clearance_rank,
                valid_from=p.valid_from,
                valid_until=draft.valid_until,
                external_id=external_id,
                content_hash=p.digest,
                idempotency_key=draft.idempotency_key,
                supersedes=supersedes,
                status=status,
            )
            create_chunks(memory, p.chunks, vectors)
            if p.propose:
                assert supersedes is not None
                return _store_proposal(p, memory, supersedes)
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


def create_chunks(memory: Memory, chunks: Sequence[Chunk], vectors: Any) -> None:
    """A memory's chunks with their vectors and full-text vectors, carrying its filter columns."""
    MemoryChunk.objects.bulk_create(
        MemoryChunk(
            memory=memory,
            index=c.index,
            char_start=c.start,
            char_end=c.end,
            text=c.text,
            embedding=vectors[i],
            organization_id=memory.organization_id,
            scope_id=memory.scope_id,
            clearance_rank=memory.clearance_rank,
            status=memory.status,
            valid_from=memory.valid_from,
            valid_until=memory.valid_until,
            category=memory.category,
            source=memory.source,
            tags=list(memory.tags),
            search_vector=_search_vector(memory.title, memory.tags, c.text),
        )
        for i, c in enumerate(chunks)
    )


def _store_proposal(p: _PreparedWrite, memory: Memory, original: Memory) -> WriteResult:
    """The proposed revision's conflict and audit event (inside _store's transaction). No post-write
    work runs: a proposal is not compared with other memories until it is accepted."""
    author = p.principal.user.display_name
    proposal = ConflictRecord.objects.create(
        organization_id=p.principal.organization_id,
        new_memory=memory,
        existing_memory=original,
        kind=ConflictRecord.Kind.REVISION,
        similarity=1.0,
        explanation=f"{author} proposed a revision of this memory. It does not have the authority to supersede it "
        "directly, so the revision becomes current only when someone with that authority accepts it (keep the new one).",
        classifier="proposal",
    )
    record(
        "memory.propose",
        organization=p.principal.organization_id,
        actor=p.principal.actor,
        target_type="memory",
        target_id=memory.pk,
        details={"scope": p.scope.slug, "revises": str(original.pk), "conflict": str(proposal.pk), "chunks": len(p.chunks)},
    )
    return WriteResult(memory, p.resolution, proposal=proposal)


def _replay(principal: Principal, earlier: Memory, resolution: str) -> WriteResult:
    if not principal.can_read_memory(earlier, history=True):
        raise Conflict(
            "This idempotency_key was used for a memory you can no longer see; use a new key.",
            error_code="IDEMPOTENCY_KEY_REUSED",
        )
    return WriteResult(earlier, resolution, deduplicated=True)


def retire(old: Memory, *, release_external_id: bool = True) -> None:
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


def _enqueue_post_write(memory_id: Any) -> None:
    # Never fails the write: a memory whose task could not be enqueued stays pending for the sweep.
    post_write_enqueue(memory_id)
