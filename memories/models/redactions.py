"""Requests to redact a memory, made by a reader who may not redact it themselves.

The author and admins (who may redact, `Principal.can_redact`) decide them in a review queue;
approving one redacts the memory through the lifecycle service, so who, when and why are kept
on the memory and in the audit log as for any redaction.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from memories.models.memory import Memory
from memories.models.tenancy import Organization


class RedactionRequest(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        APPROVED = "approved"
        DECLINED = "declined"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="redaction_requests")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One open request per reader and memory: asking twice adds nothing for the reviewers.
            models.UniqueConstraint(
                fields=["memory", "requested_by", "organization"], condition=Q(status="open"), name="redaction_request_one_open"
            ),
            models.CheckConstraint(
                condition=(Q(status="open") & Q(decided_at__isnull=True)) | (~Q(status="open") & Q(decided_at__isnull=False)),
                name="redaction_request_decided_when_closed",
            ),
        ]
        indexes = [models.Index(fields=["organization", "status", "-created_at"], name="redaction_request_queue")]

    def __str__(self) -> str:
        return f"RedactionRequest {self.pk} ({self.status})"


class RedactionHold(models.Model):
    """What a redaction removed, held until `held_until` so an admin can restore it.

    The memory itself already shows the redaction marker and has no chunks or vectors; only this
    row keeps the words. An urgent redaction writes none; expired holds are deleted by a bounded
    periodic task, after which the redaction is final.
    """

    memory = models.OneToOneField(Memory, on_delete=models.CASCADE, primary_key=True, related_name="redaction_hold")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    title = models.CharField(max_length=500)
    content = models.TextField()
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    previous_status = models.CharField(max_length=16)
    held_until = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"RedactionHold {self.memory_id} until {self.held_until:%Y-%m-%d}"
