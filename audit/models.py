"""The audit log: append-only, hash-chained per organization.

Rows are never updated or deleted (a database trigger refuses both). Actors are stored
as plain ids and a label rather than foreign keys, so erasing a user or a token never
rewrites history.
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.db import models


class AuditEvent(models.Model):
    class ActorKind(models.TextChoices):
        SESSION = "session"
        TOKEN = "token"  # noqa: S105 - an actor kind, not a secret
        CONNECTOR = "connector"
        SYSTEM = "system"
        CLI = "cli"
        ANONYMOUS = "anonymous"

    class Outcome(models.TextChoices):
        OK = "ok"
        DENIED = "denied"
        ERROR = "error"

    organization = models.ForeignKey(
        "memories.Organization", null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    created_at = models.DateTimeField()
    actor_kind = models.CharField(max_length=16, choices=ActorKind.choices)
    actor_user_id = models.UUIDField(null=True, blank=True)
    actor_token_id = models.UUIDField(null=True, blank=True)
    actor_connector_id = models.CharField(max_length=64, blank=True, default="")
    actor_label = models.CharField(max_length=320, blank=True, default="")
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64, blank=True, default="")
    target_id = models.CharField(max_length=128, blank=True, default="")
    outcome = models.CharField(max_length=8, choices=Outcome.choices, default=Outcome.OK)
    request_id = models.CharField(max_length=128, blank=True, default="")
    ip = models.GenericIPAddressField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        indexes = [
            models.Index(fields=["organization", "-id"], name="audit_org_recent"),
            models.Index(fields=["organization", "action", "-id"], name="audit_org_action"),
            models.Index(fields=["organization", "target_type", "target_id"], name="audit_org_target"),
            # "Who read this": recall events name the memories they returned in details.results.
            GinIndex(fields=["details"], name="audit_details_gin", opclasses=["jsonb_path_ops"]),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_label or self.actor_kind} {self.action} {self.outcome}"


class AuditCheckpoint(models.Model):
    """A signed statement about a chain, kept outside the events table.

    `head`: at `created_at` the chain ended at event `last_event_id` with hash `last_hash` —
    so removing the newest events (or all of them) is detected. `retention`: the events up to
    `last_event_id` were removed by the retention policy and the first one left must follow
    `last_hash` — so the chain stays verifiable across the cut. The HMAC (server key from the
    environment) makes a forged checkpoint detectable; rows are append-only like the events.
    """

    class Kind(models.TextChoices):
        HEAD = "head"
        RETENTION = "retention"

    organization = models.ForeignKey(
        "memories.Organization", null=True, blank=True, on_delete=models.PROTECT, related_name="audit_checkpoints"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    created_at = models.DateTimeField()
    last_event_id = models.BigIntegerField()
    last_hash = models.CharField(max_length=64)
    event_count = models.BigIntegerField()
    signature = models.CharField(max_length=64)

    class Meta:
        indexes = [models.Index(fields=["organization", "kind", "-id"], name="audit_ckpt_org_kind")]

    def __str__(self) -> str:
        return f"{self.kind} checkpoint @ {self.last_event_id}"
