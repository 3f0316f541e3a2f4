"""What every UI view shares: the Principal, 404s for anything it may not see, memory rows, cursors."""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import wraps
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import render, resolve_url
from django.utils.dateparse import parse_datetime
from django_htmx.http import HttpResponseClientRedirect

from cortex_site.errors import NotFound, PermissionDenied
from memories.access import Principal, clearance_names
from memories.models import Memory
from memories.selectors.memories import memory_for_history
from memories.selectors.recall import RecallHit
from memories.services.denials import denial_record, denials_audited
from memories.sessions import session_principal
from memories.templatetags.cortex_ui import highlight_terms, plain_text

PrincipalView = Callable[..., HttpResponseBase]  # a page, or a streamed one (Ask)


def principal_view(view: PrincipalView) -> Callable[..., HttpResponseBase]:
    """Sign-in required; the view receives the session's Principal after the request.

    A signed-in user without an organization gets the "not in an organization yet" page. A
    NotFound or PermissionDenied a view lets through becomes the shell's 404 or 403 page, and goes
    to the audit log when it refused something (memories.services.denials).
    An htmx request whose session ended is sent to sign in as a whole page, not swapped into a fragment.
    """

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated and request.headers.get("HX-Request") == "true":
            return HttpResponseClientRedirect(f"{resolve_url(settings.LOGIN_URL)}?next={quote(request.get_full_path())}")
        return _signed_in(request, *args, **kwargs)

    @login_required
    def _signed_in(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        principal = session_principal(request)
        if principal is None:
            return render(request, "memories/no_organization.html", status=403)
        try:
            with denials_audited(principal, via="ui", path=request.path):
                return view(request, principal, *args, **kwargs)
        except NotFound as exc:
            denial_record(exc, principal=principal, via="ui", path=request.path)  # only when it hid something that exists
            raise Http404("Not found") from None
        except PermissionDenied as exc:
            denial_record(exc, principal=principal, via="ui", path=request.path)
            raise DjangoPermissionDenied(exc.message) from None

    return wrapper


def memory_or_404(principal: Principal, memory_id: Any) -> Memory:
    """A memory the principal may see (any status); missing, foreign and forbidden are one 404."""
    try:
        return memory_for_history(principal, memory_id)
    except NotFound as exc:
        denial_record(exc)  # called inside principal_view, which bound the principal
        raise Http404("No such memory") from None


def may_redact(principal: Principal, memory: Memory) -> bool:
    """Whether to offer Redact: the Principal's rule (which memory_redact enforces) on a memory not yet redacted."""
    return memory.status != Memory.Status.REDACTED and principal.can_redact(memory)


def may_request_redaction(principal: Principal, memory: Memory) -> bool:
    """Whether to offer Request redaction: a reader who may not redact it (redaction_request_create's rule)."""
    return memory.status != Memory.Status.REDACTED and principal.can_request_redaction(memory)


def may_supersede(principal: Principal, memory: Memory) -> bool:
    """Whether to offer Edit: the Principal's rule (which memory_supersede enforces) on the active version."""
    return memory.status == Memory.Status.ACTIVE and principal.can_supersede(memory)


def may_propose_revision(principal: Principal, memory: Memory) -> bool:
    """Whether to offer Propose a revision: a writer without authority over the active version's author."""
    return memory.status == Memory.Status.ACTIVE and principal.can_propose_revision(memory)


def memory_rows(
    principal: Principal, memories: Iterable[Memory], *, hits: Sequence[RecallHit] = (), terms: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Rows for components/memory_row.html: one clearance-ladder query, no query per row."""
    names = clearance_names(principal.organization_id)
    by_hit = {hit.memory.pk: hit for hit in hits}
    rows = []
    for memory in memories:
        hit = by_hit.get(memory.pk)
        row: dict[str, Any] = {
            "id": memory.pk,
            "title": memory.title,
            "url": f"/memories/{memory.pk}/",
            "scope": memory.scope.slug,
            "category": memory.category,
            "source": memory.source,
            "clearance": names.get(memory.clearance_rank, str(memory.clearance_rank)),
            "author": memory.author_display,
            "valid_from": memory.valid_from,
            "tags": list(memory.tags),
            "status": memory.status,
            "snippet": preview(memory),
        }
        if hit is not None:
            row.update(
                snippet_html=highlight_terms(plain_text(hit.snippet), terms),
                score=hit.score,
                relevance=hit.relevance,
                recency=hit.recency,
                match=hit.match,
                confidence=hit.confidence.value,
                chunk_index=hit.chunk_index,
                earlier_version=hit.earlier_version,
                explain=True,
            )
        rows.append(row)
    return rows


PREVIEW_CHARS = 180


def preview(memory: Memory) -> str:
    """The start of a memory's content as one plain line, without a heading that repeats its title."""
    content = memory.content or ""
    first, _, rest = content.lstrip().partition("\n")
    if first.lstrip("# ").strip().lower() == memory.title.strip().lower():
        content = rest
    text = plain_text(content[: PREVIEW_CHARS * 4])
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1].rsplit(" ", 1)[0] + "…"


# -- cursor pagination (newest first: created_at desc, id desc) ----------------------------------------


def encode_cursor(memory: Memory) -> str:
    raw = f"{memory.created_at.isoformat()}|{memory.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(value: str) -> tuple[datetime, uuid.UUID] | None:
    """The position a cursor names, or None for anything that is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        moment_text, id_text = raw.split("|", 1)
        moment = parse_datetime(moment_text)
        return (moment, uuid.UUID(id_text)) if moment is not None else None
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


def keyset_page(
    memories: QuerySet[Memory], cursor: str, size: int, *, ascending: bool = False
) -> tuple[list[Memory], str | None]:
    """One page after `cursor` of a queryset ordered newest first (oldest first when `ascending`),
    and the cursor of the next page."""
    position = decode_cursor(cursor) if cursor else None
    if position is not None:
        moment, last_id = position
        if ascending:
            memories = memories.filter(Q(created_at__gt=moment) | Q(created_at=moment, id__gt=last_id))
        else:
            memories = memories.filter(Q(created_at__lt=moment) | Q(created_at=moment, id__lt=last_id))
    page = list(memories[: size + 1])
    if len(page) <= size:
        return page, None
    return page[:size], encode_cursor(page[size - 1])
