"""Template tags for conflicts, meeting briefs and entities, for pages other issues own.

- `{{ conflicts|open_conflict_count }}`: open conflicts in a list of conflicts (or of the
  memory-detail entries `{"conflict": …}`);
- `{% memory_entities memory %}`: the entities a memory mentions, as chips linking to their
  pages (the principal comes from the context);
- `{% brief_form %}`: the Meeting Brief form (the Add memory page's brief tab).
"""

from __future__ import annotations

from typing import Any

from django import template

from memories.forms import BriefForm
from memories.models import Conflict, Memory
from memories.selectors.entities import memory_entities as entities_of

register = template.Library()


@register.filter
def open_conflict_count(entries: Any) -> int:
    count = 0
    for entry in entries or ():
        conflict = entry.get("conflict") if isinstance(entry, dict) else entry
        if isinstance(conflict, Conflict) and conflict.status == Conflict.Status.OPEN:
            count += 1
    return count


@register.inclusion_tag("entities/_memory_entities.html", takes_context=True)
def memory_entities(context: template.Context, memory: Memory) -> dict[str, Any]:
    principal = context.get("principal")
    return {"entities": entities_of(principal, memory) if principal is not None else []}


@register.inclusion_tag("briefs/_form.html", takes_context=True)
def brief_form(context: template.Context, form: Any = None) -> dict[str, Any]:
    if form is None:
        form = BriefForm(principal=context["principal"])
    return {"form": form, "request": context.get("request"), "csrf_token": context.get("csrf_token")}


@register.filter
def relation_label(kind: Any) -> str:
    """`mentioned_with` → "mentioned with"."""
    return str(kind or "").replace("_", " ")
