"""The organization's entity graph: people, teams, projects, repos, customers, vendors, tickets.

Entities are derived from memories (best effort, after the write). An entity has no access
rule of its own: a principal sees it only through a memory it may read that mentions it, so
the graph never reveals what a person cannot read (see memories.selectors.entities).
"""

from __future__ import annotations

from django.db import models

from memories.models.memory import Memory
from memories.models.tenancy import Organization


class Entity(models.Model):
    class Kind(models.TextChoices):
        PERSON = "person"
        TEAM = "team"
        PROJECT = "project"
        REPO = "repo"
        CUSTOMER = "customer"
        VENDOR = "vendor"
        TICKET = "ticket"
        OTHER = "other"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="entities")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=200)
    # Case- and spacing-insensitive identity within (organization, kind).
    key = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "kind", "key"], name="entity_unique"),
            # (organization, id): the target of same-organization foreign keys (see docs/scaling.md).
            models.UniqueConstraint(fields=["organization", "id"], name="entity_org_id_unique"),
        ]
        ordering = ["kind", "name"]

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


class EntityMention(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="mentions")
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="entity_mentions")
    extractor = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entity", "memory", "organization"], name="entity_mention_unique")]
        indexes = [models.Index(fields=["memory"], name="entity_mention_memory")]

    def __str__(self) -> str:
        return f"{self.entity_id} in {self.memory_id}"


class Relation(models.Model):
    """`source` —kind→ `target`, as stated in (or inferred from) one memory, its evidence."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    source = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="relations_out")
    target = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="relations_in")
    kind = models.CharField(max_length=50)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="+")
    extractor = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "target", "kind", "memory", "organization"], name="relation_unique"),
            models.CheckConstraint(condition=~models.Q(source=models.F("target")), name="relation_two_entities"),
        ]
        indexes = [models.Index(fields=["memory"], name="relation_memory")]

    def __str__(self) -> str:
        return f"{self.source_id} -{self.kind}-> {self.target_id}"
