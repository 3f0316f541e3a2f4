"""Conflicts between two memories, and the record of how each was resolved.

A Conflict is found by the post-write worker (`memories.services.conflicts`) for a pair of
near-neighbour memories of one organization: `new_memory` is the one whose write triggered
detection, `existing_memory` the older one it was compared with. A pair is recorded at most
once, whichever way round (the functional unique constraint).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Greatest, Least

from memories.models.memory import Memory
from memories.models.tenancy import Organization


class Conflict(models.Model):
    class Kind(models.TextChoices):
        CONTRADICTION = "contradiction"
        DUPLICATE = "duplicate"
        STALE = "stale"
        # A proposed revision: new_memory (status proposed) would supersede existing_memory once accepted.
        REVISION = "revision"

    class Status(models.TextChoices):
        OPEN = "open"
        RESOLVED = "resolved"
        DISMISSED = "dismissed"

    class Resolution(models.TextChoices):
        KEEP_NEW = "keep_new"
        KEEP_EXISTING = "keep_existing"
        KEEP_BOTH = "keep_both"
        DISMISS = "dismiss"

    class Policy(models.TextChoices):
        """Which organization rule resolved a conflict when no person did."""

        AUTHORITY = "authority"  # the author with the higher clearance rung wins
        RECENCY = "recency"  # equal authority: the newer statement wins
        DUPLICATE = "duplicate"  # same information: the first record stays
        STALE = "stale"  # outdated: the newer memory stays

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="conflicts")
    new_memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="+")
    existing_memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    similarity = models.FloatField()
    explanation = models.TextField()
    # "content_hash", "heuristic", or the LLM's "<provider>:<model>".
    classifier = models.CharField(max_length=200)
    confidence = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    resolution = models.CharField(max_length=16, choices=Resolution.choices, blank=True, default="")
    resolved_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_by_policy = models.CharField(max_length=16, choices=Policy.choices, blank=True, default="")
    resolution_note = models.TextField(blank=True, default="")
    # The losing side's claim, kept when one memory supersedes the other: {memory_id, title, claim, author, ...}.
    dissent = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                Least(F("new_memory"), F("existing_memory")),
                Greatest(F("new_memory"), F("existing_memory")),
                F("organization"),
                name="conflict_pair_unique",
            ),
            models.CheckConstraint(condition=~Q(new_memory=F("existing_memory")), name="conflict_two_memories"),
            models.CheckConstraint(
                condition=(Q(status="open") & Q(resolution=""))
                | (Q(status="resolved") & Q(resolution__in=["keep_new", "keep_existing", "keep_both"]))
                | (Q(status="dismissed") & Q(resolution="dismiss")),
                name="conflict_status_matches_resolution",
            ),
            models.CheckConstraint(
                condition=Q(similarity__gte=-1.0) & Q(similarity__lte=1.0001), name="conflict_similarity_range"
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "status", "-created_at"], name="conflict_org_status"),
            models.Index(fields=["new_memory"], name="conflict_new_memory"),
            models.Index(fields=["existing_memory"], name="conflict_existing_memory"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.new_memory_id} × {self.existing_memory_id} ({self.status})"

    def other_memory_id(self, memory_id: object) -> object:
        return self.existing_memory_id if memory_id == self.new_memory_id else self.new_memory_id
