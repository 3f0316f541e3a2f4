"""Syncing: runs of bounded pages, items upserted into memories as the connector, checkpoints
committed in the same transaction as the page of memories they cover.

- `sync_start` opens a run (or records a skipped one when another run of the connector is
  alive) and enqueues its first page on commit; `sync_request` is Sync now for an admin.
- `sync_run_page(run_id, page)` runs one page: fetch from the source, upsert, save the
  checkpoint, count — one transaction. A task delivered twice, or a dead run taken over,
  can neither fork the chain (`pages_done` must equal `page`) nor write a page twice (the
  checkpoint moved with the memories).
- `upsert_items` is the one place a source item becomes a memory (pages and webhook
  deliveries alike): new → create, changed → supersede, deleted → redact, same → nothing.

One sync per connector at a time: an open run whose heartbeat is within the lease blocks a
second one (recorded as skipped), and every write for a connector holds its advisory lock.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from audit.services import record
from connectors.base import Page, Source, SourceItem
from connectors.errors import PermanentSourceError, RetryableSourceError
from connectors.models import Checkpoint, Connector, ConnectorItem, SyncRun
from connectors.registry import source_class, source_for
from connectors.selectors import access_connector, cursor_of, lease, open_run
from connectors.services import backoff
from connectors.services.connectors import connector_set_error, require_admin
from cortex_site.errors import Conflict, CortexError
from cortex_site.text import storable
from memories.access import Principal, clearance_names
from memories.models import Membership, Memory
from memories.services.memories import MemoryDraft, WriteResult, memory_create_many, memory_redact, memory_supersede

logger = logging.getLogger(__name__)

# How many times one page is retried after retryable errors before the run fails (the next
# scheduled run starts again from the same checkpoint, so nothing is lost either way).
PAGE_ATTEMPTS = 6
BACKFILL_CAP = 1000
MAX_RECORDED_FAILURES = 200


# -- starting runs ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StartResult:
    run: SyncRun
    running: SyncRun | None = None  # set when `run` was skipped because this one is alive

    @property
    def skipped(self) -> bool:
        return self.running is not None


def run_cap(connector: Connector, *, backfill: bool) -> int | None:
    default = source_class(connector.kind).default_cap
    cap = connector.per_run_cap if connector.per_run_cap is not None else default
    if backfill or connector.backfill_next_run:
        return max(cap or 0, BACKFILL_CAP)
    return cap


def _audit(action: str, connector: Connector, run: SyncRun, **details: Any) -> None:
    record(
        action,
        organization=connector.organization_id,
        actor=Principal.as_connector(connector).actor,
        target_type="sync_run",
        target_id=run.pk,
        details={"connector": str(connector.pk), "kind": connector.kind, "trigger": run.trigger, **details},
    )


def _fail_dead_runs(connector: Connector) -> None:
    """Runs whose worker stopped (no heartbeat within the lease) end as failed; their checkpoint stays."""
    cutoff = timezone.now() - lease()
    for run in SyncRun.objects.filter(connector=connector, status__in=[SyncRun.Status.QUEUED, SyncRun.Status.RUNNING]):
        if (run.heartbeat_at or run.created_at) < cutoff:
            _finish(
                run,
                connector,
                SyncRun.Status.FAILED,
                error="The worker running this sync stopped; the next run resumed from its last saved checkpoint.",
            )


def sync_start(*, connector: Connector, trigger: str, backfill: bool = False) -> StartResult:
    """Open a run and enqueue its first page on commit, unless another run of this connector is alive.

    Callers: Sync now (sync_request), the schedule dispatcher, and anything else that triggers
    a pull. A paused connector is never started (a skipped run says why).
    """
    with transaction.atomic():
        connector = Connector.objects.select_for_update().get(pk=connector.pk)
        _fail_dead_runs(connector)
        running = open_run(connector)
        if running is not None or connector.status == Connector.Status.PAUSED:
            reason = (
                f"Another sync of this connector is in progress (run {running.pk})."
                if running is not None
                else "The connector is paused."
            )
            now = timezone.now()
            skipped = SyncRun.objects.create(
                organization_id=connector.organization_id,
                connector=connector,
                trigger=trigger,
                status=SyncRun.Status.SKIPPED,
                started_at=now,
                finished_at=now,
                error=reason,
            )
            _audit("connector.sync_skip", connector, skipped, reason=reason, running=str(running.pk) if running else None)
            return StartResult(skipped, running)
        run = SyncRun.objects.create(
            organization_id=connector.organization_id,
            connector=connector,
            trigger=SyncRun.Trigger.BACKFILL if backfill else trigger,
            status=SyncRun.Status.QUEUED,
            cap=run_cap(connector, backfill=backfill),
            checkpoint_before=cursor_of(connector),
            heartbeat_at=timezone.now(),
        )
        _audit("connector.sync_start", connector, run, cap=run.cap)
        run_id = run.pk
        transaction.on_commit(lambda: _enqueue_page(run_id, 0))
    return StartResult(run)


def sync_request(*, principal: Principal, connector_id: Any, backfill: bool = False) -> SyncRun:
    """Sync now (admins): 202 with the run, or 409 SYNC_IN_PROGRESS naming the running run."""
    require_admin(principal)
    connector = access_connector(principal, connector_id)
    if connector.status == Connector.Status.PAUSED:
        raise Conflict("The connector is paused; resume it first.", error_code="CONNECTOR_PAUSED")
    result = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL, backfill=backfill)
    if result.running is not None:
        raise Conflict(
            "A sync of this connector is already running; wait for it to finish.",
            error_code="SYNC_IN_PROGRESS",
            details={"run_id": str(result.running.pk)},
        )
    return result.run


def _enqueue_page(run_id: Any, page: int, countdown: float | None = None) -> None:
    from connectors.tasks import sync_page

    if countdown:
        sync_page.apply_async(args=(str(run_id), page), countdown=countdown)
    else:
        sync_page.apply_async(args=(str(run_id), page))


# -- running a page ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PageOutcome:
    next_page: int | None = None  # enqueue this page next
    retry_after: float | None = None  # run the same page again after this many seconds


def _connector_lock(connector_id: Any) -> None:
    # Serialises every write for one connector (pages, deliveries) until the transaction ends.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(7302, hashtext(%s))", [str(connector_id)])


def _finish(run: SyncRun, connector: Connector, status: str, *, error: str = "") -> None:
    now = timezone.now()
    run.status = status
    run.finished_at = now
    run.heartbeat_at = now
    run.error = error or run.error if status != SyncRun.Status.SUCCEEDED else ""
    run.checkpoint_after = cursor_of(connector)
    run.save()
    if status == SyncRun.Status.SUCCEEDED:
        updates: dict[str, Any] = {
            "last_synced_at": now,
            "next_sync_at": now + timedelta(minutes=connector.interval_minutes),
            "backfill_next_run": False,
            "updated_at": now,
        }
        if connector.status == Connector.Status.ERROR:
            # Someone fixed the cause and synced by hand: the connector works again.
            updates.update(status=Connector.Status.ACTIVE, last_error="")
        Connector.objects.filter(pk=connector.pk).update(**updates)
    _audit(
        "connector.sync_finish",
        connector,
        run,
        status=status,
        created=run.items_created,
        updated=run.items_updated,
        redacted=run.items_redacted,
        skipped=run.items_skipped,
        failed=run.items_failed,
        error=run.error,
    )


def _save_checkpoint(connector: Connector, checkpoint: dict[str, Any]) -> None:
    for stream, cursor in checkpoint.items():
        if cursor is None:
            Checkpoint.objects.filter(connector=connector, stream=stream).delete()
        else:
            Checkpoint.objects.update_or_create(
                connector=connector, stream=str(stream), defaults={"cursor": cursor, "organization_id": connector.organization_id}
            )


def _apply_counts(run: SyncRun, counts: Counts) -> None:
    run.items_seen += counts.seen
    run.items_created += counts.created
    run.items_updated += counts.updated
    run.items_redacted += counts.redacted
    run.items_skipped += counts.skipped
    run.items_failed += counts.failed
    room = MAX_RECORDED_FAILURES - len(run.failures)
    if room > 0:
        run.failures = [*run.failures, *counts.failures[:room]]


def sync_run_page(*, run_id: Any, page: int, attempt: int = 0) -> PageOutcome:
    run = SyncRun.objects.select_related("connector").filter(pk=run_id).first()
    if run is None or not run.is_open or run.pages_done != page:
        return PageOutcome()  # finished, or this page ran already (a redelivered task)
    connector = run.connector
    if connector.status == Connector.Status.PAUSED:
        _finish(run, connector, SyncRun.Status.SKIPPED, error="The connector was paused during the run.")
        return PageOutcome()
    wait = backoff.remaining(connector.pk)
    if wait > 0:
        if attempt >= 4 * PAGE_ATTEMPTS:
            _finish(run, connector, SyncRun.Status.FAILED, error="The source kept asking Cortex to wait; the next run resumes.")
            return PageOutcome()
        SyncRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
        return PageOutcome(retry_after=wait)

    failure: RetryableSourceError | PermanentSourceError | Exception | None = None
    with transaction.atomic():
        try:
            run = SyncRun.objects.select_for_update(nowait=True).select_related("connector").get(pk=run_id)
        except DatabaseError:
            return PageOutcome()  # another worker is running this very page
        if not run.is_open or run.pages_done != page:
            return PageOutcome()
        connector = run.connector
        _connector_lock(connector.pk)
        now = timezone.now()
        if run.status == SyncRun.Status.QUEUED:
            run.status = SyncRun.Status.RUNNING
            run.started_at = now
        run.heartbeat_at = now
        checkpoint = cursor_of(connector)
        limit = settings.CORTEX_CONNECTOR_PAGE_SIZE
        if run.cap is not None:
            limit = max(1, min(limit, run.cap - run.progress_done))
        days = (
            connector.first_run_days
            if connector.first_run_days is not None
            else source_class(connector.kind).default_first_run_days
        )
        first_run_since = now - timedelta(days=days) if (not checkpoint and days) else None
        source = source_for(connector)
        try:
            result = source.fetch_page(checkpoint, limit=limit, first_run_since=first_run_since)
        except (RetryableSourceError, PermanentSourceError) as exc:
            failure = exc
        except Exception as exc:  # a bug or an SDK surprise: the run fails, the connector stays usable
            logger.exception("connector %s: page %s of run %s failed", connector.pk, page, run.pk)
            failure = exc
        if failure is None:
            done = _apply_page(run, connector, source, result)
            run.save()
            if done:
                _finish(run, connector, SyncRun.Status.SUCCEEDED)
                return PageOutcome()
            return PageOutcome(next_page=run.pages_done)
        run.save()
    return _page_failed(run, connector, failure, attempt)


def _apply_page(run: SyncRun, connector: Connector, source: Source, result: Page) -> bool:
    counts = upsert_items(connector=connector, source=source, items=result.items)
    for external_id, reason in result.failures:
        counts.fail(external_id, reason)
    _save_checkpoint(connector, result.checkpoint)
    _apply_counts(run, counts)
    run.progress_done += len(result.items) + len(result.failures)
    if result.total_hint is not None:
        run.progress_total = run.progress_done + max(0, result.total_hint)
    run.pages_done += 1
    run.error = ""
    capped = run.cap is not None and run.progress_done >= run.cap
    return result.done or capped


def _page_failed(run: SyncRun, connector: Connector, failure: Exception, attempt: int) -> PageOutcome:
    if isinstance(failure, PermanentSourceError):
        with transaction.atomic():
            connector_set_error(connector=connector, message=failure.message)
            _finish(run, connector, SyncRun.Status.FAILED, error=failure.message)
        return PageOutcome()
    if isinstance(failure, RetryableSourceError):
        if failure.retry_after:
            backoff.set(connector.pk, failure.retry_after)
        if attempt + 1 < PAGE_ATTEMPTS:
            delay = failure.retry_after or min(600.0, 15.0 * 2**attempt)
            SyncRun.objects.filter(pk=run.pk).update(
                error=f"{failure.message} Retrying in {int(delay)} s.", heartbeat_at=timezone.now()
            )
            return PageOutcome(retry_after=delay)
        message = (
            f"Gave up after {PAGE_ATTEMPTS} attempts: {failure.message} The next run starts again from the saved checkpoint."
        )
    else:
        message = f"An unexpected error stopped the run ({type(failure).__name__}); it is logged. The checkpoint is kept."
    with transaction.atomic():
        _finish(run, connector, SyncRun.Status.FAILED, error=message)
    return PageOutcome()


def sync_give_up(*, run_id: Any, message: str) -> None:
    """End an open run as failed (a task that could not run it at all)."""
    run = SyncRun.objects.select_related("connector").filter(pk=run_id).first()
    if run is not None and run.is_open:
        with transaction.atomic():
            _finish(run, run.connector, SyncRun.Status.FAILED, error=message)


# -- items → memories ---------------------------------------------------------------------------
@dataclass
class Counts:
    seen: int = 0
    created: int = 0
    updated: int = 0
    redacted: int = 0
    skipped: int = 0
    failed: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)

    def fail(self, external_id: str, reason: str) -> None:
        self.failed += 1
        self.failures.append({"external_id": external_id, "reason": reason})

    def note(self, external_id: str, reason: str) -> None:
        """A reason recorded for an item that was still handled (e.g. extra details not fetched)."""
        self.failures.append({"external_id": external_id, "reason": reason})


def item_hash(item: SourceItem, scope: str | None) -> str:
    blob = json.dumps(
        [
            item.title,
            item.content,
            item.source_url,
            item.author_name,
            item.category,
            sorted(item.tags),
            item.valid_from.isoformat() if item.valid_from else None,
            scope,
        ],
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _current(memory: Memory | None) -> Memory | None:
    """Follow supersessions to the memory that stands for the item now (a person may have edited it)."""
    seen = 0
    while memory is not None and memory.status == Memory.Status.SUPERSEDED and memory.superseded_by_id and seen < 50:
        memory = Memory.objects.filter(pk=memory.superseded_by_id).first()
        seen += 1
    return memory


def _link_author(connector: Connector, memory_id: Any, email: str) -> None:
    if not email:
        return
    membership = Membership.objects.filter(organization_id=connector.organization_id, user__email__iexact=email.strip()).first()
    if membership is not None:
        Memory.objects.filter(pk=memory_id, author__isnull=True).update(author_id=membership.user_id)


def upsert_items(*, connector: Connector, source: Source, items: list[SourceItem]) -> Counts:
    """Apply items to memories as the connector; call inside a transaction holding the connector's lock."""
    principal = Principal.as_connector(
        Connector.objects.select_related("installed_by__organization", "installed_by__user", "scope").get(pk=connector.pk)
    )
    counts = Counts()
    latest: dict[str, SourceItem] = {}
    for item in items:  # the same item twice in one page: its last state wins
        latest[item.external_id] = item
    counts.seen = len(latest)
    clearance = clearance_names(connector.organization_id).get(connector.clearance_rank)
    default_scope = connector.scope.slug if connector.scope_id and connector.scope else None
    known = {ci.external_id: ci for ci in ConnectorItem.objects.filter(connector=connector, external_id__in=list(latest))}
    creates: list[tuple[SourceItem, str, MemoryDraft]] = []

    for external_id, item in latest.items():
        scope = item.scope or default_scope
        digest = item_hash(item, scope)
        ci = known.get(external_id)
        memory = _current(Memory.objects.filter(pk=ci.memory_id).first() if ci and ci.memory_id else None)
        if memory is None and not ci:
            # Written before this connector knew it (an earlier connector of the same source)?
            memory = Memory.objects.filter(
                organization_id=connector.organization_id, source=source.label, external_id=external_id
            ).first()
        if item.warning:
            counts.note(external_id, item.warning)
        if item.deleted:
            if memory is None or memory.status == Memory.Status.REDACTED:
                counts.skipped += 1
            elif _guarded(
                counts,
                external_id,
                lambda m=memory: memory_redact(principal=principal, memory_id=m.pk, reason=f"deleted in {source.label}"),
            ):
                counts.redacted += 1
            _remember(connector, ci, external_id, memory, digest="", deleted=True)
            continue
        if ci is not None and ci.content_hash == digest and memory is not None and memory.status == Memory.Status.ACTIVE:
            counts.skipped += 1  # a replay: nothing changed at the source
            continue
        # A NUL or half an emoji from the source would have the memory refused (INVALID_TEXT) and the
        # item lost once the checkpoint moves past it: kept as PostgreSQL can store it instead.
        draft = MemoryDraft(
            content=storable(item.content),
            title=storable(item.title),
            scope=scope,
            category=item.category,
            source=source.label,
            source_url=storable(item.source_url),
            author_name=storable(item.author_name),
            tags=storable(list(item.tags)),
            clearance_min=clearance,
            valid_from=item.valid_from,
            external_id=external_id,
        )
        if memory is not None and memory.status == Memory.Status.REDACTED:
            counts.skipped += 1
            counts.note(external_id, "Its memory was redacted in Cortex; it is not recreated.")
            _remember(connector, ci, external_id, memory, digest=digest)
            continue
        if memory is not None and memory.status == Memory.Status.ACTIVE:
            # No scope/clearance of its own: the new version stays where the current one is.
            changes = {
                k: v
                for k, v in draft.__dict__.items()
                if k != "external_id" and not (k in ("scope", "clearance_min") and v is None)
            }
            outcome = _guarded(
                counts, external_id, lambda m=memory, c=changes: memory_supersede(principal=principal, memory_id=m.pk, changes=c)
            )
            if isinstance(outcome, WriteResult):
                if outcome.deduplicated:
                    counts.skipped += 1
                else:
                    counts.updated += 1
                    counts.memory_ids.append(str(outcome.memory.pk))
                    _link_author(connector, outcome.memory.pk, item.author_email)
                _remember(connector, ci, external_id, outcome.memory, digest=digest)
            continue
        creates.append((item, digest, draft))

    if creates:
        results = memory_create_many(principal=principal, drafts=[draft for _, _, draft in creates])
        for (item, digest, _draft), result in zip(creates, results, strict=True):
            ci = known.get(item.external_id)
            if isinstance(result, CortexError):
                counts.fail(item.external_id, result.message)
                continue
            if result.deduplicated and result.memory.external_id != item.external_id:
                counts.skipped += 1
                counts.note(item.external_id, "Same content as an existing memory; not stored twice.")
                continue
            if result.deduplicated:
                counts.skipped += 1
            else:
                counts.created += 1
                counts.memory_ids.append(str(result.memory.pk))
                _link_author(connector, result.memory.pk, item.author_email)
            _remember(connector, ci, item.external_id, result.memory, digest=digest)
    return counts


def _guarded(counts: Counts, external_id: str, write: Any) -> Any:
    """Run one item's write in its own savepoint: a refused item is a failure of that item only."""
    try:
        with transaction.atomic():
            return write() or True
    except CortexError as exc:
        counts.fail(external_id, exc.message)
    except IntegrityError:
        counts.fail(external_id, "Another write took this item's identity meanwhile; it will be retried on the next sync.")
    return None


def _remember(
    connector: Connector, ci: ConnectorItem | None, external_id: str, memory: Memory | None, *, digest: str, deleted: bool = False
) -> None:
    if ci is None:
        ConnectorItem.objects.update_or_create(
            connector=connector,
            external_id=external_id,
            defaults={
                "organization_id": connector.organization_id,
                "memory": memory,
                "content_hash": digest,
                "deleted": deleted,
            },
        )
        return
    ci.memory = memory
    ci.content_hash = digest
    ci.deleted = deleted
    ci.save(update_fields=["memory", "content_hash", "deleted", "updated_at"])


def run_enqueue(*, connector: Connector, trigger: str) -> SyncRun:
    """The scheduler's entry: start a run (or record it skipped); the run, whichever it is."""
    return sync_start(connector=connector, trigger=trigger, backfill=trigger == SyncRun.Trigger.BACKFILL).run
