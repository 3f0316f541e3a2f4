"""The write pipeline: prepare (validate, resolve the scope, idempotency, duplicates), embed, store.

See the package docstring for the order of checks. Post-write work is enqueued on commit.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import EventSpec, record, record_many
from cortex_site.errors import Conflict, CortexError, PermissionDenied, ValidationFailed
from memories.access import Principal, clearance_names
from memories.chunking import Chunk, chunk_text
from memories.embeddings.store import BackgroundEmbedding, embed_for_store
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
from memories.services.post_write import post_write_enqueue, post_write_enqueue_many


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


def embedding_text(title: str, chunk: str) -> str:
    """The exact text embedded for a chunk (the write pipeline and `cortex reembed` share it).

    Title-prefixed: a chunk deep in a long document still carries what the document is about.
    """
    return f"{title}\n\n{chunk}" if title and not chunk.startswith(title) else chunk


def _lock_key(*parts: Any) -> int:
    """A transaction-level advisory lock key (bigint) for these parts."""
    key = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(key[:8], "big", signed=True)


def index_chunks(memory_id: Any) -> None:
    """Refill the full-text vectors of a memory's chunks after its title or tags changed: title and
    tags weigh more (A) than body text (B), as create_chunks_many writes them."""
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

    For bulk ingest (imports, connector runs): every draft is checked alone (a bad one is its own
    error), with the batch's lookups made once (scopes, the clearance ladder, idempotency keys,
    source items, duplicates). The chunks of the drafts that need storing are embedded in one call
    on a worker thread; with an in-process model (local, hash) the transaction meanwhile takes the
    content locks, re-checks duplicates and inserts the memory rows (a hosted provider is awaited
    first, so no transaction waits on the network). Then come the chunks, one audit-chain
    extension for the batch and one commit. Memory rows go in as one INSERT; when one of them
    cannot be stored (the same source item twice, a version changed meanwhile, an identity taken
    by a concurrent writer) they are written again one by one, each in its own savepoint, so only
    that draft fails, with its reason.

    The same content twice in one batch is stored once (the second answers deduplicated), as if
    the drafts had been written one after the other. An embedding failure fails every draft that
    needed it and stores none of them (retry-safe, like a single write).
    """
    outcomes: list[WriteResult | CortexError | None] = [None] * len(drafts)
    lookups = _Lookups(principal)
    cleaned: list[tuple[int, _PreparedWrite]] = []
    for position, draft in enumerate(drafts):
        try:
            cleaned.append((position, _clean(principal, draft, None, lookups)))
        except CortexError as exc:
            outcomes[position] = exc
    pending: list[tuple[int, _PreparedWrite]] = []
    for (position, _), resolved in zip(cleaned, _resolve(principal, [p for _, p in cleaned]), strict=True):
        if isinstance(resolved, _PreparedWrite):
            pending.append((position, resolved))
        else:
            outcomes[position] = resolved
    if pending:
        for (position, _), outcome in zip(pending, _store_many(principal, [p for _, p in pending]), strict=True):
            outcomes[position] = outcome
    return [outcome for outcome in outcomes if outcome is not None]


class _Lookups:
    """What every draft of one call reads alike, read once: the clearance ladder and the scope each
    (explicit scope, source) pair resolves to. A refusal is not kept: each draft that asks is refused
    with its own error."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        self._ladder: dict[int, str] | None = None
        self._scopes: dict[tuple[str, str], tuple[Scope, str]] = {}
        self._by_slug: dict[str, Scope] | None = None

    def ladder(self) -> dict[int, str]:
        if self._ladder is None:
            self._ladder = clearance_names(self.principal.organization_id)
        return self._ladder

    def scope(self, explicit: str | None, source: str) -> tuple[Scope, str]:
        key = (explicit or "", source)
        resolved = self._scopes.get(key)
        if resolved is None:
            if self._by_slug is None:
                self._by_slug = {s.slug: s for s in Scope.objects.filter(organization_id=self.principal.organization_id)}
            resolved = self._scopes[key] = resolve_scope(self.principal, explicit, source, by_slug=self._by_slug)
        return resolved


def _prepare(principal: Principal, draft: MemoryDraft, supersedes: Memory | None) -> _PreparedWrite | WriteResult:
    """Every check before embedding: validation, scope, clearance, idempotency, duplicates.

    A WriteResult means nothing needs storing (a replayed idempotency key or a duplicate).
    """
    (resolved,) = _resolve(principal, [_clean(principal, draft, supersedes, _Lookups(principal))])
    if isinstance(resolved, CortexError):
        raise resolved
    return resolved


def _clean(principal: Principal, draft: MemoryDraft, supersedes: Memory | None, lookups: _Lookups) -> _PreparedWrite:
    """The checks of one draft that need no lookup of existing memories: validation, provenance,
    scope (and the right to write there), clearance. Raises the CortexError that refuses it."""
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
    scope, resolution = lookups.scope(draft.scope, source)
    token = principal.token
    if draft.clearance_min is None and token is not None and token.default_clearance_rank is not None:
        clearance_rank = min(token.default_clearance_rank, principal.clearance_rank)
    else:
        clearance_rank = clearance_rank_of(principal, draft.clearance_min, ladder=lookups.ladder())
    if len(draft.idempotency_key) > 255:
        raise ValidationFailed("idempotency_key is at most 255 characters.", error_code="INVALID_IDEMPOTENCY_KEY")
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
        digest=content_hash(content),
        supersedes=supersedes,
        chunks=[],
        author_given_by=author_given_by,
    )


def _resolve(principal: Principal, cleaned: Sequence[_PreparedWrite]) -> list[_PreparedWrite | WriteResult | CortexError]:
    """For each cleaned draft, in order: what its identity and content say — the memory an
    idempotency key already stored (replayed), the source item's memory (the same content: a
    duplicate; changed: it is superseded; closed: refused), or a readable memory with the same
    content in that scope (a duplicate) — else the draft, chunked, ready to embed and store.
    One query each for keys, source items and duplicates, whatever the number of drafts."""
    keys = [p.draft.idempotency_key for p in cleaned if p.draft.idempotency_key]
    earlier: dict[str, Memory] = {}
    if keys:
        earlier = {
            m.idempotency_key: m
            for m in Memory.objects.filter(
                organization_id=principal.organization_id, created_by=principal.user, idempotency_key__in=keys
            )
        }
    items: dict[str, set[str]] = defaultdict(set)
    for p in cleaned:
        if p.draft.external_id and p.supersedes is None:
            items[p.source].add(p.draft.external_id)
    existing: dict[tuple[str, str], Memory] = {}
    if items:
        wanted = Q()
        for source, external_ids in items.items():
            wanted |= Q(source=source, external_id__in=external_ids)
        existing = {
            (m.source, m.external_id): m for m in Memory.objects.filter(Q(organization_id=principal.organization_id) & wanted)
        }
    outcomes: list[_PreparedWrite | WriteResult | CortexError] = []
    for p in cleaned:
        try:
            outcomes.append(_identity(p, earlier.get(p.draft.idempotency_key), existing.get((p.source, p.draft.external_id))))
        except CortexError as exc:
            outcomes.append(exc)
    undecided = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, _PreparedWrite)]
    duplicates = _readable_duplicates(principal, [cast(_PreparedWrite, outcomes[i]) for i in undecided])
    for i, duplicate in zip(undecided, duplicates, strict=True):
        p = cast(_PreparedWrite, outcomes[i])
        outcomes[i] = (
            WriteResult(duplicate, p.resolution, deduplicated=True)
            if duplicate is not None
            else replace(p, chunks=chunk_text(p.content))
        )
    return outcomes


def _identity(p: _PreparedWrite, earlier: Memory | None, existing: Memory | None) -> _PreparedWrite | WriteResult:
    """The idempotency key and the source item of one draft (see `_resolve`)."""
    if p.draft.idempotency_key and earlier is not None:
        return _replay(p.principal, earlier, p.resolution)
    if p.draft.external_id and p.supersedes is None and existing is not None:
        if existing.status == Memory.Status.ACTIVE and existing.content_hash == p.digest:
            return WriteResult(existing, p.resolution, deduplicated=True)
        if existing.status != Memory.Status.ACTIVE:
            raise Conflict(
                f"{p.source} item {p.draft.external_id!r} was {existing.status}; it is not recreated.",
                error_code="EXTERNAL_ITEM_CLOSED",
            )
        return replace(p, supersedes=existing)  # an edited source item supersedes its earlier memory
    return p


def _readable_duplicates(principal: Principal, writes: Sequence[_PreparedWrite]) -> list[Memory | None]:
    """For each write, the oldest active memory with its content in its scope that the writer may
    read (never the one it supersedes), or None: an invisible duplicate must not leak, so it does
    not count. One query for the candidates, one to load the chosen ones."""
    if not writes:
        return []
    candidates: dict[tuple[int, str], list[Memory]] = defaultdict(list)
    rows = (
        Memory.objects.filter(
            organization_id=principal.organization_id,
            scope_id__in={p.scope.pk for p in writes},
            content_hash__in={p.digest for p in writes},
            status=Memory.Status.ACTIVE,
        )
        .only("id", "organization_id", "scope_id", "content_hash", "clearance_rank", "status", "valid_until")
        .order_by("created_at")
    )
    for row in rows:
        candidates[(row.scope_id, row.content_hash)].append(row)
    chosen = [
        next(
            (
                m
                for m in candidates.get((p.scope.pk, p.digest), ())
                if (p.supersedes is None or m.pk != p.supersedes.pk) and principal.can_read_memory(m)
            ),
            None,
        )
        for p in writes
    ]
    ids = {m.pk for m in chosen if m is not None}
    loaded = Memory.objects.select_related("scope", "author").in_bulk(ids) if ids else {}
    return [None if m is None else loaded.get(m.pk) for m in chosen]


def _store(p: _PreparedWrite, vectors: Any) -> WriteResult:
    """One transaction (a savepoint inside a caller's): memory, chunks, audit event; post-write work on commit."""
    principal, supersedes = p.principal, p.supersedes
    try:
        with transaction.atomic():
            _lock_contents([p])
            (duplicate,) = _readable_duplicates(principal, [p])
            if duplicate is not None:
                return WriteResult(duplicate, p.resolution, deduplicated=True)
            memory = _write_memory_rows([p])[0]
            create_chunks_many([(memory, p.chunks, vectors)])
            if p.propose:
                assert supersedes is not None
                return _store_proposal(p, memory, supersedes)
            event = _created_event(p, memory)
            record(
                event.action,
                organization=principal.organization_id,
                actor=principal.actor,
                target_type=event.target_type,
                target_id=event.target_id,
                details=event.details,
            )
            transaction.on_commit(lambda: _enqueue_post_write(memory.pk))
    except IntegrityError:
        # Lost a race with the same idempotency key: the other request stored it; answer with that.
        earlier = _earlier_for_key(p)
        if earlier is not None:
            return _replay(principal, earlier, p.resolution)
        raise
    return WriteResult(memory, p.resolution)


def _store_many(principal: Principal, pending: Sequence[_PreparedWrite]) -> list[WriteResult | CortexError]:
    """Embed and store the batch's writes (see `memory_create_many`); one outcome per write, in order."""
    starts = list(itertools.accumulate((len(p.chunks) for p in pending), initial=0))
    outcomes: list[WriteResult | CortexError | None] = [None] * len(pending)
    stored: dict[int, Memory] = {}
    try:
        embedding = BackgroundEmbedding([text for p in pending for text in p.embedding_texts()])
        if not embedding.in_process:
            # A hosted provider may take up to its timeout: no transaction is held open meanwhile.
            embedding.result()
        with transaction.atomic():
            # While the model runs: the content locks (concurrent writers of the same content wait,
            # then find this batch's memory), duplicates re-checked under them, and the memory rows.
            _lock_contents(pending)
            first: list[int] = []
            followers: list[int] = []
            leader_of: dict[tuple[int, str], int] = {}
            for i, (p, duplicate) in enumerate(zip(pending, _readable_duplicates(principal, pending), strict=True)):
                if duplicate is not None:
                    outcomes[i] = WriteResult(duplicate, p.resolution, deduplicated=True)
                elif (p.scope.pk, p.digest) in leader_of:
                    followers.append(i)  # the same content as an earlier draft of this batch
                else:
                    leader_of[(p.scope.pk, p.digest)] = i
                    first.append(i)
            _insert_rows(pending, first, stored, outcomes)
            for i in followers:
                p = pending[i]
                leader = leader_of[(p.scope.pk, p.digest)]
                if leader in stored and principal.can_read_memory(stored[leader]):
                    outcomes[i] = WriteResult(stored[leader], p.resolution, deduplicated=True)
                    continue
                _insert_rows(pending, [i], stored, outcomes)
                if i in stored:
                    leader_of[(p.scope.pk, p.digest)] = i  # later copies are duplicates of this one
            vectors = embedding.result()
            written = sorted(stored)
            create_chunks_many([(stored[i], pending[i].chunks, vectors[starts[i] : starts[i + 1]]) for i in written])
            if written:
                record_many(
                    [_created_event(pending[i], stored[i]) for i in written],
                    organization=principal.organization_id,
                    actor=principal.actor,
                )
            for i in written:
                outcomes[i] = WriteResult(stored[i], pending[i].resolution)
            if written:
                transaction.on_commit(functools.partial(post_write_enqueue_many, [stored[i].pk for i in written]))
    except CortexError as exc:
        # The embedding failed (raised by result()): nothing of the batch is stored.
        return [exc] * len(pending)
    return [cast(WriteResult | CortexError, outcome) for outcome in outcomes]


def _insert_rows(
    pending: Sequence[_PreparedWrite],
    indexes: Sequence[int],
    stored: dict[int, Memory],
    outcomes: list[WriteResult | CortexError | None],
) -> None:
    """Insert the memory rows of `pending[i]` for each index (one INSERT), noting each stored one in
    `stored`; when one cannot be stored, each is written in its own savepoint and a refused one gets
    its error in `outcomes` (or, for an idempotency key a concurrent writer just used, that memory)."""
    if not indexes:
        return
    if len(indexes) > 1:
        try:
            with transaction.atomic():
                memories = _write_memory_rows([pending[i] for i in indexes])
        except (CortexError, IntegrityError):
            pass  # rolled back: one of them fails; find which, one by one
        else:
            stored.update(zip(indexes, memories, strict=True))
            return
    for i in indexes:
        p = pending[i]
        try:
            with transaction.atomic():
                stored[i] = _write_memory_rows([p])[0]
        except CortexError as exc:
            outcomes[i] = exc
        except IntegrityError:
            earlier = _earlier_for_key(p)
            try:
                outcomes[i] = (
                    _replay(p.principal, earlier, p.resolution)
                    if earlier is not None
                    else Conflict(
                        "Another memory took this item's identity meanwhile (the same source item twice?); it was not stored.",
                        error_code="DUPLICATE_ITEM",
                    )
                )
            except CortexError as exc:
                outcomes[i] = exc


def _write_memory_rows(writes: Sequence[_PreparedWrite]) -> list[Memory]:
    """The memory rows of these writes (one INSERT), retiring what each supersedes (unless it is a
    proposal) and linking both ways. Raises Conflict when a superseded memory changed meanwhile and
    IntegrityError when an identity (source item, idempotency key) is taken: the caller's savepoint
    rolls all of it back."""
    for p in writes:
        if p.supersedes is not None and not p.propose:
            retire(p.supersedes)
    memories = Memory.objects.bulk_create([_memory_row(p) for p in writes])
    for p, memory in zip(writes, memories, strict=True):
        if p.supersedes is not None and not p.propose:
            Memory.objects.filter(pk=p.supersedes.pk).update(superseded_by=memory)
            p.supersedes.superseded_by = memory
    return memories


def _memory_row(p: _PreparedWrite) -> Memory:
    principal, draft, supersedes = p.principal, p.draft, p.supersedes
    external_id = draft.external_id or (supersedes.external_id if supersedes is not None else "")
    if p.propose:
        external_id = ""  # the original keeps its source item until the revision is accepted
    return Memory(
        organization_id=principal.organization_id,
        scope=p.scope,
        title=p.title,
        content=p.content,
        category=p.category,
        source=p.source,
        source_url=p.source_url,
        author=None if draft.author_name else principal.user,
        author_name=draft.author_name.strip()[:200],
        author_given_by=p.author_given_by,
        created_by=principal.user,
        tags=p.tags,
        clearance_rank=p.clearance_rank,
        valid_from=p.valid_from,
        valid_until=draft.valid_until,
        external_id=external_id,
        content_hash=p.digest,
        idempotency_key=draft.idempotency_key,
        supersedes=supersedes,
        status=Memory.Status.PROPOSED if p.propose else Memory.Status.ACTIVE,
    )


def _created_event(p: _PreparedWrite, memory: Memory) -> EventSpec:
    supersedes = p.supersedes
    return EventSpec(
        "memory.create" if supersedes is None else "memory.supersede",
        target_type="memory",
        target_id=memory.pk,
        details={
            "scope": p.scope.slug,
            "scope_resolution": p.resolution,
            "source": p.source,
            "chunks": len(p.chunks),
            "supersedes": str(supersedes.pk) if supersedes else None,
        },
    )


def _earlier_for_key(p: _PreparedWrite) -> Memory | None:
    if not p.draft.idempotency_key:
        return None
    return Memory.objects.filter(
        organization_id=p.principal.organization_id, created_by=p.principal.user, idempotency_key=p.draft.idempotency_key
    ).first()


def _lock_contents(writes: Sequence[_PreparedWrite]) -> None:
    """Take the content locks of these writes — (organization, scope, content hash) — in one round
    trip, in ascending key order, so two batches with shared contents never wait on each other in a
    cycle; every content lock is taken before the audit-chain lock, as a single write does."""
    keys = sorted({_lock_key("memory-content", p.principal.organization_id, p.scope.pk, p.digest) for p in writes})
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) AS k", [keys])


def create_chunks(memory: Memory, chunks: Sequence[Chunk], vectors: Any) -> None:
    """A memory's chunks with their vectors and full-text vectors, carrying its filter columns."""
    create_chunks_many([(memory, chunks, vectors)])


def create_chunks_many(items: Sequence[tuple[Memory, Sequence[Chunk], Any]]) -> None:
    """The chunks of several memories (memory, its chunks, their vectors), in one INSERT.

    Written as one statement over arrays rather than through the ORM (whose per-row, per-field
    compilation was most of a batch's Python time): each chunk takes its memory's filter columns
    and, for its full-text vector, its title and tags from the memory's row (stored already, in
    this transaction) — the vector index_chunks computes."""
    memory_ids: list[Any] = []
    indexes: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    texts: list[str] = []
    embeddings: list[str | None] = []
    for memory, chunks, vectors in items:
        for i, c in enumerate(chunks):
            memory_ids.append(memory.pk)
            indexes.append(c.index)
            starts.append(c.start)
            ends.append(c.end)
            texts.append(c.text)
            embeddings.append(_vector_text(vectors[i]))
    if not memory_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_memorychunk (memory_id, index, char_start, char_end, text, embedding, search_vector,
                                              organization_id, scope_id, clearance_rank, status, valid_from, valid_until,
                                              category, source, tags)
            SELECT r.memory_id, r.index, r.char_start, r.char_end, r.text, r.embedding::vector,
                   setweight(to_tsvector('english', m.title), 'A')
                   || setweight(to_tsvector('english', array_to_string(m.tags, ' ')), 'A')
                   || setweight(to_tsvector('english', r.text), 'B'),
                   m.organization_id, m.scope_id, m.clearance_rank, m.status, m.valid_from, m.valid_until,
                   m.category, m.source, m.tags
              FROM unnest(%s::uuid[], %s::int[], %s::int[], %s::int[], %s::text[], %s::text[])
                   WITH ORDINALITY AS r(memory_id, index, char_start, char_end, text, embedding, n)
              JOIN memories_memory AS m ON m.id = r.memory_id
             ORDER BY r.n
            """,
            [memory_ids, indexes, starts, ends, texts, embeddings],
        )


def _vector_text(vector: Any) -> str | None:
    """A vector's text form, as pgvector's own field writes it (each float32 as the shortest
    decimal of its exact value, which parses back to the same float32)."""
    if vector is None:
        return None
    return "[" + ",".join(map(str, np.asarray(vector, dtype=np.float32).tolist())) + "]"


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
