"""Connectors: what syncs into Cortex, each run of it, where it stopped, and what it received.

Every row carries `organization_id` (the tenant), also the ones reachable through a connector,
so tenant filters never need a join. Credentials are stored encrypted (see crypto.py) and are
only ever read through `Connector.credentials`.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import models

from connectors import crypto


class Connector(models.Model):
    class Kind(models.TextChoices):
        GITHUB = "github", "GitHub"
        SLACK = "slack", "Slack"
        GMAIL = "gmail", "Gmail"
        DRIVE = "drive", "Google Drive"
        NOTION = "notion", "Notion"

    class Status(models.TextChoices):
        ACTIVE = "active"
        PAUSED = "paused"
        ERROR = "error"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey("memories.Organization", on_delete=models.CASCADE, related_name="connectors")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=150)
    # Non-secret settings only (repositories, channels, api_url, mode, ...); secrets live in credentials.
    config = models.JSONField(default=dict, blank=True)
    credentials_encrypted = models.TextField(blank=True, default="")
    scope = models.ForeignKey("memories.Scope", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    clearance_rank = models.PositiveSmallIntegerField(default=0)
    # The member a connector acts as: its scopes and clearance bound what the connector may write.
    installed_by = models.ForeignKey("memories.Membership", on_delete=models.PROTECT, related_name="installed_connectors")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    last_error = models.TextField(blank=True, default="")
    per_run_cap = models.PositiveIntegerField(null=True, blank=True)
    first_run_days = models.PositiveIntegerField(null=True, blank=True)
    interval_minutes = models.PositiveIntegerField(default=15)
    backfill_next_run = models.BooleanField(default=False)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    next_sync_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # (organization, id): the target of same-organization foreign keys (see docs/scaling.md).
        constraints = [models.UniqueConstraint(fields=["organization", "id"], name="connector_org_id_unique")]
        indexes = [
            models.Index(fields=["organization", "kind"], name="connector_org_kind"),
            models.Index(fields=["status", "next_sync_at"], name="connector_due"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} connector {self.name!r}"

    @property
    def credentials(self) -> dict[str, Any]:
        if not self.credentials_encrypted:
            return {}
        return crypto.decrypt_json(self.credentials_encrypted)

    def set_credentials(self, credentials: dict[str, Any]) -> None:
        self.credentials_encrypted = crypto.encrypt_json(credentials) if credentials else ""


class SyncRun(models.Model):
    class Trigger(models.TextChoices):
        WEBHOOK = "webhook"
        SCHEDULE = "schedule"
        MANUAL = "manual"
        BACKFILL = "backfill"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SKIPPED = "skipped"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey("memories.Organization", on_delete=models.CASCADE, related_name="+")
    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="runs")
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The lease: a running run whose heartbeat is older than the lease is dead and may be taken over.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    items_seen = models.PositiveIntegerField(default=0)
    items_created = models.PositiveIntegerField(default=0)
    items_updated = models.PositiveIntegerField(default=0)
    items_redacted = models.PositiveIntegerField(default=0)
    items_skipped = models.PositiveIntegerField(default=0)
    items_failed = models.PositiveIntegerField(default=0)
    failures = models.JSONField(default=list, blank=True)  # [{"external_id", "reason"}]
    checkpoint_before = models.JSONField(default=dict, blank=True)
    checkpoint_after = models.JSONField(default=dict, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(null=True, blank=True)
    cap = models.PositiveIntegerField(null=True, blank=True)
    # Pages committed so far; sync_page(run_id, page) only runs page == pages_done, so a task
    # delivered twice (broker redelivery, a dispatcher taking over) never forks the chain.
    pages_done = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["connector", "-created_at"], name="syncrun_connector_recent"),
            models.Index(fields=["connector", "status"], name="syncrun_connector_status"),
        ]

    def __str__(self) -> str:
        return f"SyncRun {self.pk} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in {self.Status.QUEUED, self.Status.RUNNING}


class Checkpoint(models.Model):
    """One stream's cursor. A page's checkpoint dict {stream: cursor} is saved key by key (a None
    cursor deletes its stream) and handed back whole to the next fetch_page."""

    organization = models.ForeignKey("memories.Organization", on_delete=models.CASCADE, related_name="+")
    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="checkpoints")
    stream = models.CharField(max_length=200)  # "history", "channel:C123", "changes", "default"
    cursor = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connector", "stream", "organization"], name="checkpoint_connector_stream")
        ]

    def __str__(self) -> str:
        return f"Checkpoint {self.connector_id}/{self.stream}"


class Delivery(models.Model):
    class Status(models.TextChoices):
        RECEIVED = "received"
        PROCESSED = "processed"
        IGNORED = "ignored"
        FAILED = "failed"
        REJECTED = "rejected"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey("memories.Organization", on_delete=models.CASCADE, related_name="+")
    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.CharField(max_length=200)
    event = models.CharField(max_length=100, blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RECEIVED)
    payload = models.JSONField(default=dict, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # The answer writes no audit event (the organization's chain lock would serialise a burst):
    # its `webhook.accept`/`webhook.ignore` is appended later, by the worker or the batch step in
    # services/deliveries.py, which set this in the same transaction, so it is appended exactly once.
    audited = models.BooleanField(default=False)
    # What that event carries from the answer: how the delivery came (empty: its webhook;
    # "socket_mode"), the answer's request id and the sender's address.
    via = models.CharField(max_length=20, blank=True, default="")
    request_id = models.CharField(max_length=128, blank=True, default="")
    client_ip = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connector", "delivery_id", "organization"], name="delivery_connector_delivery_id")
        ]
        indexes = [
            models.Index(fields=["connector", "-received_at"], name="delivery_connector_recent"),
            models.Index(fields=["received_at"], condition=models.Q(audited=False), name="delivery_unaudited"),
        ]

    def __str__(self) -> str:
        return f"Delivery {self.delivery_id} ({self.status})"


class ConnectorItem(models.Model):
    """One item at the source and the memory that currently stands for it."""

    organization = models.ForeignKey("memories.Organization", on_delete=models.CASCADE, related_name="+")
    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=255)
    memory = models.ForeignKey("memories.Memory", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    content_hash = models.CharField(max_length=64, blank=True, default="")
    deleted = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["connector", "external_id", "organization"], name="connectoritem_connector_external_id"
            )
        ]

    def __str__(self) -> str:
        return f"ConnectorItem {self.connector_id}/{self.external_id}"
