"""The memory lifecycle after the first write: supersede, patch, redact, delete, and the steps
conflict resolution uses (supersede with an existing memory, reinstate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.services import Actor, lock_chain, record
from cortex_site.errors import Conflict, PermissionDenied, Unprocessable, ValidationFailed
from memories.access import Principal, clearance_names, parse_id
from memories.chunking import chunk_text
from memories.embeddings.store import embed_for_store
from memories.models import Memory, MemoryChunk, RedactionHold, RedactionRequest
from memories.selectors.memories import memory_for_history
from memories.services.memories.pipeline import (
    MemoryDraft,
    WriteResult,
    create_chunks,
    embedding_text,
    index_chunks,
    memory_create,
    retire,
)
from memories.services.memories.validation import check_validity, clean_category, clearance_rank_of, derive_title, normalise_tags
from memories.services.post_write import post_write_enqueue

REDACTED_TITLE = "[redacted]"
REDACTED_CONTENT = "[This memory was redacted.]"


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
        loser_pk, winner_pk = parse_id(loser_id), parse_id(winner_id)
        organization_id = (
            Memory.objects.filter(pk=loser_pk).values_list("organization_id", flat=True).first() if loser_pk else None
        )
        if organization_id is not None:
            lock_chain(organization_id)  # chain before rows: the order webhook and sync writes take them in
        rows = {m.pk: m for m in Memory.objects.select_for_update().filter(pk__in=[loser_id, winner_id]).order_by("pk")}
        loser = rows.get(loser_pk) if loser_pk is not None else None
        winner = rows.get(winner_pk) if winner_pk is not None else None
        if loser is None or winner is None or loser.organization_id != winner.organization_id or loser.pk == winner.pk:
            raise Conflict("These memories cannot supersede one another.", error_code="MEMORY_NOT_ACTIVE")
        if winner.status != Memory.Status.ACTIVE:
            raise Conflict("The memory that should stay is no longer active.", error_code="MEMORY_NOT_ACTIVE")
        retire(loser, release_external_id=False)
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


def memory_activate_proposal(*, memory_id: Any, actor: Actor, reason: str, details: dict[str, Any] | None = None) -> None:
    """A proposed revision becomes an active memory (the step before it supersedes the original).

    Only a memory still proposed is activated (Conflict(MEMORY_NOT_PROPOSED) otherwise); its
    post-write work (conflict detection, entities) runs on commit, as for any new memory.
    """
    with transaction.atomic():
        updated = Memory.objects.filter(pk=memory_id, status=Memory.Status.PROPOSED).update(
            status=Memory.Status.ACTIVE, updated_at=timezone.now()
        )
        if updated != 1:
            raise Conflict("This revision is no longer a proposal; it cannot be accepted.", error_code="MEMORY_NOT_PROPOSED")
        MemoryChunk.objects.filter(memory_id=memory_id).update(status=Memory.Status.ACTIVE)
        organization_id = Memory.objects.filter(pk=memory_id).values_list("organization_id", flat=True).get()
        record(
            "memory.accept_revision",
            organization=organization_id,
            actor=actor,
            target_type="memory",
            target_id=memory_id,
            details={"reason": reason, **(details or {})},
        )
        transaction.on_commit(lambda: post_write_enqueue(memory_id))


def memory_supersede(*, principal: Principal, memory_id: Any, changes: dict[str, Any]) -> WriteResult:
    """A new active memory replaces an active one; both keep their audit trail and link each other.

    `changes` may hold any MemoryDraft field; the rest is carried over from the old memory, except
    the author (the person superseding) and valid_from (now, unless given).

    A writer of the scope without authority over the memory's author (`Principal.can_supersede`)
    gets a proposed revision instead (`WriteResult.proposal` set; the old memory stays current).
    """
    old = memory_for_history(principal, memory_id)
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    propose = principal.can_propose_revision(old)
    if not propose and not principal.can_supersede(old):
        raise PermissionDenied(
            "You cannot change this memory: its scope is not writable for you.", error_code="MEMORY_NOT_WRITABLE"
        )
    if old.status != Memory.Status.ACTIVE:
        raise Conflict(f"This memory is {old.status}; only active memories can be superseded.", error_code="MEMORY_NOT_ACTIVE")
    unknown = set(changes) - {f for f in MemoryDraft.__dataclass_fields__ if f not in {"external_id"}}
    if unknown:
        raise ValidationFailed(f"Unknown fields: {', '.join(sorted(unknown))}.", error_code="UNKNOWN_FIELDS")
    if not changes:
        # A new version saying exactly what the old one said would only push it out of date. (422, not 400:
        # every field is optional in the schema; "at least one" is a rule it does not state.)
        raise Unprocessable("Nothing to change: give the new content, or the fields that change.", error_code="NOTHING_TO_CHANGE")
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
    return memory_create(principal=principal, draft=draft, supersedes=old, propose=propose)


def memory_patch(*, principal: Principal, memory_id: Any, changes: dict[str, Any]) -> Memory:
    """Change metadata only (tags, category, valid_until, clearance_min). Content changes supersede."""
    allowed = {"tags", "category", "valid_until", "clearance_min"}
    unknown = set(changes) - allowed
    if unknown:
        raise ValidationFailed(
            f"Only {', '.join(sorted(allowed))} can be patched; change "
            f"content with supersede. Unknown: {', '.join(sorted(unknown))}.",
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
        if {"clearance_min", "valid_until"} & set(changes) and not principal.outranks_author_of(memory):
            # Who may read it and until when decide as much as its content: the supersede rule's authority.
            raise PermissionDenied(
                "Changing who can read this memory, or until when, needs authority at least its author's; "
                "propose a revision instead.",
                error_code="MEMORY_NOT_WRITABLE",
            )
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
            index_chunks(memory.pk)
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


def memory_redact(*, principal: Principal, memory_id: Any, reason: str, urgent: bool = False) -> Memory:
    """Remove a memory from search for good, keeping the row for provenance.

    Title and content become a marker, tags are cleared, chunks and vectors are deleted; who,
    why and when are kept. Allowed to the author, an admin, or the connector that wrote it
    (`Principal.can_redact`); other readers may request it (`memories.services.redactions`).
    Open redaction requests for the memory are closed as approved by this redaction.

    The removed title, content and tags are held for CORTEX_REDACTION_HOLD_DAYS (a RedactionHold)
    so an admin can restore them; `urgent` (the author or an admin: a leaked secret, personal
    data) keeps nothing, and the redaction is final at once.
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
                "Only the memory's author, an admin, or the connector that wrote it can redact it; "
                "you can request its redaction instead.",
                error_code="REDACTION_NOT_ALLOWED",
            )
        if memory.status == Memory.Status.REDACTED:
            raise Conflict("This memory is already redacted.", error_code="ALREADY_REDACTED")
        if urgent and not (principal.is_author_of(memory) or principal.is_admin):
            raise PermissionDenied(
                "Only the memory's author or an admin can make a redaction final at once (urgent).",
                error_code="URGENT_REDACTION_NOT_ALLOWED",
            )
        now = timezone.now()
        held_until = None
        if not urgent and settings.CORTEX_REDACTION_HOLD_DAYS > 0:
            held_until = now + timedelta(days=settings.CORTEX_REDACTION_HOLD_DAYS)
            RedactionHold.objects.create(
                memory=memory,
                organization_id=memory.organization_id,
                title=memory.title,
                content=memory.content,
                tags=list(memory.tags),
                previous_status=memory.status,
                held_until=held_until,
            )
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
        closed = RedactionRequest.objects.filter(memory_id=memory.pk, status=RedactionRequest.Status.OPEN).update(
            status=RedactionRequest.Status.APPROVED, decided_by=principal.user, decided_at=now
        )
        record(
            "memory.redact",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="memory",
            target_id=memory.pk,
            details={
                "reason": reason,
                "previous_status": memory.status,
                "chunks_deleted": deleted_chunks,
                "requests_closed": closed,
                "urgent": urgent,
                "held_until": held_until.isoformat() if held_until else None,
            },
        )
    memory.refresh_from_db()
    return memory


def memory_restore(*, principal: Principal, memory_id: Any) -> Memory:
    """Undo a held redaction (admins, while the hold lasts): the words come back from the hold, the
    chunks are embedded again, and the memory returns to the status it had. Raises
    Conflict(REDACTION_FINAL) when nothing is held (urgent, or the hold expired)."""
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    memory = memory_for_history(principal, memory_id)
    principal.require_admin("Only organization admins can restore a redacted memory.")
    hold = RedactionHold.objects.filter(memory_id=memory.pk, held_until__gt=timezone.now()).first()
    if memory.status != Memory.Status.REDACTED or hold is None:
        raise Conflict("This redaction is final: nothing is held to restore.", error_code="REDACTION_FINAL")
    chunks = chunk_text(hold.content)
    # Embedded before the transaction, like a write: a provider failure restores nothing.
    vectors = embed_for_store([embedding_text(hold.title, c.text) for c in chunks], for_write=True)
    with transaction.atomic():
        memory = memory_for_history(principal, memory_id, for_update=True)
        held = RedactionHold.objects.select_for_update().filter(memory_id=memory.pk, held_until__gt=timezone.now()).first()
        if memory.status != Memory.Status.REDACTED or held is None:
            raise Conflict("This redaction is final: nothing is held to restore.", error_code="REDACTION_FINAL")
        redaction = {"reason": memory.redaction_reason, "redacted_by": memory.redacted_by_id}
        Memory.objects.filter(pk=memory.pk).update(
            status=held.previous_status,
            title=held.title,
            content=held.content,
            tags=held.tags,
            redacted_at=None,
            redacted_by=None,
            redaction_reason="",
            updated_at=timezone.now(),
            post_write_pending=held.previous_status == Memory.Status.ACTIVE,  # new chunks: conflicts, entities again
        )
        held.delete()
        memory.refresh_from_db()
        create_chunks(memory, chunks, vectors)
        record(
            "memory.restore",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="memory",
            target_id=memory.pk,
            details={"status": memory.status, "redaction": redaction, "chunks": len(chunks)},
        )
        if memory.status == Memory.Status.ACTIVE:
            transaction.on_commit(lambda: post_write_enqueue(memory.pk))
    return memory


HOLD_BATCH = 200


def redaction_holds_finalise(*, batch_size: int = HOLD_BATCH) -> tuple[int, bool]:
    """Make one bounded batch of expired redaction holds final (their words deleted); returns
    (finalised, more remain). Idempotent: a hold is deleted once, whoever gets there first."""
    now = timezone.now()
    with transaction.atomic():
        expired = list(
            RedactionHold.objects.select_for_update(skip_locked=True)
            .filter(held_until__lte=now)
            .order_by("held_until")
            .values_list("memory_id", "organization_id")[: batch_size + 1]
        )
        batch, more = expired[:batch_size], len(expired) > batch_size
        RedactionHold.objects.filter(memory_id__in=[memory_id for memory_id, _ in batch]).delete()
        for memory_id, organization_id in batch:
            record(
                "memory.redaction_final",
                organization=organization_id,
                actor=Actor.system("redaction hold"),
                target_type="memory",
                target_id=memory_id,
                details={"hold_expired": True},
            )
    return len(batch), more


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
