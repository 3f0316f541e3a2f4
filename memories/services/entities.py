"""Entity extraction after a write (best effort) and forgetting a memory's entities.

`entities_extract` is a post-write step: it reads the memory, asks the LLM when one is
configured (the heuristic otherwise, or when the LLM fails), and records entities, mentions
and relations with insert-or-ignore, so a re-run adds nothing. It never touches the memory;
a failure is logged by the post-write runner and the memory is unaffected.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from memories.analysis.entities import LLM_SCHEMA as ENTITY_SCHEMA
from memories.analysis.entities import LLM_SYSTEM as ENTITY_SYSTEM
from memories.analysis.entities import Extraction, FoundEntity, entity_key, ground_llm, heuristic_extract
from memories.analysis.entities import llm_prompt as entity_prompt
from memories.llm import LLMInvalidOutput, LLMUnavailable, get_llm
from memories.models import Entity, EntityMention, Membership, Memory, Relation

logger = logging.getLogger(__name__)

HEURISTIC = "heuristic"
MAX_TEXT_CHARS = 40_000


def extract(text: str, *, people: Iterable[str] = ()) -> tuple[Extraction, str]:
    """Entities and relations of `text`, and which extractor found them; `people` (full names) are
    recognised as people by the heuristic however the sentence around them reads."""
    llm = get_llm()
    if llm is not None:
        try:
            generation = llm.generate(
                entity_prompt(text), json_schema=ENTITY_SCHEMA, system=ENTITY_SYSTEM, max_output_tokens=1500, temperature=0.0
            )
            return ground_llm(generation.data, text), llm.label
        except (LLMUnavailable, LLMInvalidOutput) as exc:
            logger.info("entity extraction by %s failed (%s); using the heuristic", llm.label, exc)
    return heuristic_extract(text, people=people), HEURISTIC


def entities_extract(memory_id: Any) -> int:
    """Record the entities of an active memory; returns how many mentions were added (0 on a re-run)."""
    memory = (
        Memory.objects.filter(pk=memory_id, status=Memory.Status.ACTIVE)
        .only("id", "organization_id", "title", "content", "author_name")
        .first()
    )
    if memory is None or EntityMention.objects.filter(memory_id=memory.pk).exists():
        return 0
    text = f"{memory.title}\n\n{memory.content[:MAX_TEXT_CHARS]}"
    extraction, extractor = extract(text, people=known_people(memory.organization_id, also=[memory.author_name]))
    if not extraction.entities:
        return 0
    organization_id = memory.organization_id
    with transaction.atomic():
        Entity.objects.bulk_create(
            [
                Entity(organization_id=organization_id, kind=e.kind, name=e.name, key=entity_key(e.name))
                for e in extraction.entities
            ],
            ignore_conflicts=True,
        )
        ids = _entity_ids(organization_id, extraction.entities)
        created = EntityMention.objects.bulk_create(
            [
                EntityMention(organization_id=organization_id, entity_id=ids[(e.kind, e.key)], memory=memory, extractor=extractor)
                for e in extraction.entities
            ],
            ignore_conflicts=True,
        )
        Relation.objects.bulk_create(
            [
                Relation(
                    organization_id=organization_id,
                    source_id=ids[(r.source.kind, r.source.key)],
                    target_id=ids[(r.target.kind, r.target.key)],
                    kind=r.kind,
                    memory=memory,
                    extractor=extractor,
                )
                for r in extraction.relations
                if (r.source.kind, r.source.key) in ids and (r.target.kind, r.target.key) in ids and r.source.key != r.target.key
            ],
            ignore_conflicts=True,
        )
    return len(created)


def known_people(organization_id: int, *, also: Iterable[str] = ()) -> list[str]:
    """The organization's members' names (deactivated ones too: they are still who wrote and was named), and `also`."""
    members = Membership.objects.filter(organization_id=organization_id).exclude(user__name="")
    return sorted({*members.values_list("user__name", flat=True), *(name for name in also if name)})


def _entity_ids(organization_id: int, entities: list[FoundEntity]) -> dict[tuple[str, str], int]:
    rows = Entity.objects.filter(organization_id=organization_id, key__in={e.key for e in entities}).values_list(
        "kind", "key", "pk"
    )
    return {(kind, key): pk for kind, key, pk in rows}


def entities_forget_memory(memory_id: Any) -> None:
    """A redacted memory's words must not survive as entities: drop its mentions and relations,
    and entities no other memory mentions."""
    organization_ids = set(EntityMention.objects.filter(memory_id=memory_id).values_list("organization_id", flat=True))
    EntityMention.objects.filter(memory_id=memory_id).delete()
    Relation.objects.filter(memory_id=memory_id).delete()
    Entity.objects.filter(organization_id__in=organization_ids, mentions__isnull=True).delete()
