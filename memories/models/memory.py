"""Memories, their chunks, and the embedding signature of the store.

A Memory is one cited unit of knowledge; its content is split into MemoryChunks, each
embedded and full-text indexed. Chunks repeat the memory's filter columns (organization,
scope, clearance, status, validity, category, source, tags) so that permission filters run
on the chunk table inside the vector and full-text index scans.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import HnswIndex, VectorField

from memories.models.tenancy import Organization, Scope

# The dimension the migrations create the vector column with (the local MiniLM model).
# `cortex reembed` alters the column when the store switches to a model of another size.
DEFAULT_EMBEDDING_DIM = 384
# Tags a memory may carry (the write pipeline refuses more; the REST input schema says so).
MAX_TAGS = 20


class Memory(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        SUPERSEDED = "superseded"
        REDACTED = "redacted"
        # A new version by someone without authority over the original: it waits in the conflict
        # queue (a "revision" conflict) and is read only by its proposer and those who may accept it.
        PROPOSED = "proposed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memories")
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="memories")
    title = models.CharField(max_length=500)
    content = models.TextField()
    category = models.CharField(max_length=50, default="note")
    source = models.CharField(max_length=50, default="Manual")
    source_url = models.URLField(max_length=2000, blank=True, default="")
    # The author is who wrote the knowledge (a person in Cortex, or just a name from a source);
    # created_by is the Cortex user whose action stored it (idempotency keys are theirs).
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="authored_memories"
    )
    author_name = models.CharField(max_length=200, blank=True, default="")
    # Who stated author_name when it is not the writer: "import" (operator CLI) or "connector".
    author_given_by = models.CharField(max_length=16, blank=True, default="")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    clearance_rank = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    valid_from = models.DateTimeField()
    valid_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    supersedes = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    external_id = models.CharField(max_length=255, blank=True, default="")
    content_hash = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    redacted_at = models.DateTimeField(null=True, blank=True)
    redacted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    redaction_reason = models.TextField(blank=True, default="")
    # True from the write's own transaction until the post-write work (conflict detection, entity
    # extraction) has run: a memory whose task was never enqueued (Redis down), or was lost with a
    # killed worker, is found by the periodic sweep (memories.sweep_post_write) and processed then.
    post_write_pending = models.BooleanField(default=True)

    class Meta:
        constraints = [
            # (organization, id): the target of same-organization foreign keys (see docs/scaling.md).
            models.UniqueConstraint(fields=["organization", "id"], name="memory_org_id_unique"),
            models.UniqueConstraint(
                fields=["organization", "source", "external_id"], condition=~Q(external_id=""), name="memory_external_id_unique"
            ),
            models.UniqueConstraint(
                fields=["organization", "created_by", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="memory_idempotency_key_unique",
            ),
            models.CheckConstraint(
                condition=Q(valid_until__isnull=True) | Q(valid_until__gt=models.F("valid_from")), name="memory_valid_window"
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "status", "-created_at"], name="memory_org_recent"),
            models.Index(fields=["organization", "scope", "content_hash"], name="memory_scope_hash"),
            GinIndex(fields=["tags"], name="memory_tags"),
            # The sweep's scan: small, since almost every memory has had its post-write work.
            models.Index(
                fields=["updated_at"],
                name="memory_post_write_pending",
                condition=Q(post_write_pending=True, status="active"),
            ),
        ]

    def __str__(self) -> str:
        # The id, never the title: str() ends up in logs and the admin, which are not clearance-gated.
        return f"Memory {self.pk}"

    @property
    def author_display(self) -> str:
        if self.author_name:
            return self.author_name
        return self.author.display_name if self.author else ""


class MemoryChunk(models.Model):
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveSmallIntegerField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    text = models.TextField()
    embedding = VectorField(dimensions=DEFAULT_EMBEDDING_DIM, null=True)
    search_vector = SearchVectorField(null=True)
    # Denormalised from the memory (kept in step by the services in the same transaction).
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    # Indexed with the clearance (chunk_scope_clearance below), not alone.
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="+", db_index=False)
    clearance_rank = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=16, choices=Memory.Status.choices)
    valid_from = models.DateTimeField()
    valid_until = models.DateTimeField(null=True, blank=True)
    category = models.CharField(max_length=50)
    source = models.CharField(max_length=50)
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["memory", "index", "organization"], name="chunk_index_unique")]
        indexes = [
            # Exact (pre-filtered) scans when a principal sees a small slice of a large organization.
            models.Index(fields=["organization", "scope", "status"], name="chunk_filter"),
            # A reader's visible rows of their scopes (scope and clearance, the read rule's two ranges):
            # the full-text matches are intersected with these, not with every row of the scope.
            models.Index(fields=["scope", "clearance_rank"], name="chunk_scope_clearance"),
            # Built concurrently in their own migration (0003).
            HnswIndex(
                name="chunk_embedding_hnsw", fields=["embedding"], m=16, ef_construction=64, opclasses=["vector_cosine_ops"]
            ),
            GinIndex(fields=["search_vector"], name="chunk_search_gin"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id}#{self.index}"


class EmbeddingSignature(models.Model):
    """Which embedding model filled the store. One row; vectors from another model are refused."""

    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=200)
    dim = models.PositiveIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.provider}:{self.model} ({self.dim})"


class SourceScopeRule(models.Model):
    """Per-organization scope resolution by source: memories from `source` without an explicit
    scope land in `scope` (e.g. GitHub → engineering)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="source_rules")
    source = models.CharField(max_length=50)
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "source"], name="source_rule_unique")]

    def __str__(self) -> str:
        return f"{self.source} → {self.scope}"


class TermCount(models.Model):
    """How many active chunks of one cell — (organization, scope, clearance rank) — contain one
    lexeme, as deltas: recall's term statistics, read under the reader's read rule by summing the
    cells they may see (memories.retrieval.sql.term_document_frequencies). The empty lexeme counts
    the cell's active chunks.

    Written only by statement triggers on memories_memorychunk (migration 0021_term_counts), so
    every path that writes chunks keeps the counts in step in its own transaction. Each writing
    statement *appends* its changes (one row per cell and lexeme, negative when chunks leave):
    appends never wait on another writer, so concurrent writes cannot deadlock on a shared
    counter row. `compact_term_counts` (beat, every minute) folds each key's rows into one."""

    # No database constraints or indexes of their own: a write appends tens of rows, and a foreign-key
    # check per row (or an index per column) would be most of that cost; the lookup index leads with
    # the organization, and the ORM still deletes an organization's counts with it. A scope holds no
    # chunks when it is deleted (they protect it), so its counts sum to nothing and compaction drops them.
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    scope_id = models.BigIntegerField()
    clearance_rank = models.PositiveSmallIntegerField()
    lexeme = models.TextField()
    chunks = models.IntegerField()
    # False for a trigger's append until compaction folds it with the key's other rows.
    compacted = models.BooleanField(default=False)

    class Meta:
        indexes = [
            # A reader's counts: the cells of one lexeme, read from the index alone.
            models.Index(
                fields=["organization", "lexeme", "scope_id", "clearance_rank"],
                include=["chunks"],
                name="term_count_lookup",
            ),
            # What compaction has still to fold.
            models.Index(fields=["id"], condition=models.Q(compacted=False), name="term_count_pending"),
        ]

    def __str__(self) -> str:
        return f"{self.lexeme or '(chunks)'}: {self.chunks}"
