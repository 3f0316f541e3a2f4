"""Jobs: work a person asked for that runs on a worker and whose outcome they poll.

The row is the source of truth for `GET /api/jobs/{id}` (not the Celery result backend):
it is tenant-owned, so only its creator in its organization ever sees it, and it survives a
flushed Redis.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from memories.models.tenancy import Organization


class Job(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    class Kind(models.TextChoices):
        EXTRACT_DECISIONS = "extract_decisions"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(null=True, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(progress__isnull=True) | Q(progress__lte=100), name="job_progress_range"),
        ]
        indexes = [models.Index(fields=["organization", "created_by", "-created_at"], name="job_owner_recent")]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.FAILED}
