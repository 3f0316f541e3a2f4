"""Activity: what happened to my knowledge (and the badge in the nav that points here)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from memories.access import Principal
from memories.selectors.activity import activity_items
from memories.services.accounts import activity_mark_seen
from memories.views.common import principal_view


@principal_view
@require_GET
def activity(request: HttpRequest, principal: Principal) -> HttpResponse:
    seen = principal.membership.activity_seen_at
    items = activity_items(principal)
    activity_mark_seen(membership=principal.membership)
    return render(request, "activity/list.html", {"items": items, "seen": seen, "activity_unseen": 0})
