"""The daily digest e-mail: each opted-in member's Activity items they have not seen yet.

"Not seen" is newer than both their last visit to the Activity page and their last digest. The
items come from `memories.selectors.activity` as the member's own Principal, so the digest shows
exactly what their Activity page would — never a memory they cannot read — and links each item
absolutely (`CORTEX_BASE_URL`). Nothing is sent when there is nothing new.

At most one digest per member per day (the server's `TIME_ZONE` day): the membership row is
claimed (`digest_sent_at` set, only if it was not set today) in the same transaction that sends
the mail and records `digest.sent` (item counts by kind, never their content) in the organization's
audit chain, so a second run the same day — or a concurrent one — sends nothing, and a mail that
fails to go out releases the claim (and its event) for the next run. A member with nothing new is not claimed
(a later item that day still makes a digest on a later run). Deactivated members, and accounts that can
no longer sign in, get nothing.
"""

from __future__ import annotations

import html
import logging
import smtplib
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe

from audit.services import Actor, record
from memories.access import Principal
from memories.models import Membership
from memories.selectors.activity import ActivityItem, activity_items

logger = logging.getLogger(__name__)
# The most items one digest lists (the Activity page has the rest).
DIGEST_ITEMS = 50
KIND_LABELS = {
    "superseded": "Superseded",
    "redacted": "Redacted",
    "conflict": "Conflict",
    "revision": "Revision to review",
    "redaction_request": "Redaction request",
    "hold_expiring": "Hold expiring",
    "connector_error": "Connector error",
}


@dataclass(frozen=True)
class DigestBatch:
    sent: int  # digests that went out
    examined: int  # due members looked at
    last_id: int  # the next batch starts above it
    more: bool  # members may remain (the task enqueues itself again)


def digest_preference_set(*, principal: Principal, enabled: bool) -> None:
    """The member's own opt-in (or out) for this organization's daily digest."""
    with transaction.atomic():
        Membership.objects.filter(pk=principal.membership.pk).update(digest_email=enabled)
        record(
            "digest.preference",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="membership",
            target_id=principal.membership.pk,
            details={"enabled": enabled},
        )
    principal.membership.digest_email = enabled


def _start_of_today(now: datetime) -> datetime:
    return timezone.make_aware(datetime.combine(timezone.localdate(now), time.min))


def _due(now: datetime) -> Q:
    """Opted in, active, an account that may sign in, and no digest claimed today."""
    return Q(digest_email=True, deactivated_at__isnull=True, user__is_active=True) & (
        Q(digest_sent_at__isnull=True) | Q(digest_sent_at__lt=_start_of_today(now))
    )


def _unseen(principal: Principal) -> list[ActivityItem]:
    membership = principal.membership
    marks = [m for m in (membership.activity_seen_at, membership.digest_sent_at) if m is not None]
    since = max(marks) if marks else None
    return [item for item in activity_items(principal, limit=DIGEST_ITEMS) if since is None or item.at > since]


def _rows(items: list[ActivityItem]) -> list[dict[str, Any]]:
    base = settings.CORTEX_BASE_URL.rstrip("/")
    rows = []
    for item in items:
        # The Activity page's own sentence (autoescaped), as HTML and, unescaped, as plain text.
        sentence = " ".join(render_to_string("activity/_sentence.html", {"item": item}).split())
        rows.append(
            {
                "label": KIND_LABELS.get(item.kind, item.kind),
                "html": mark_safe(sentence),  # noqa: S308 - rendered by an autoescaping template
                "text": html.unescape(sentence),
                "url": f"{base}{item.url}",
                "at": item.at,
            }
        )
    return rows


def _message(principal: Principal, items: list[ActivityItem]) -> EmailMultiAlternatives:
    base = settings.CORTEX_BASE_URL.rstrip("/")
    context = {
        "organization": principal.organization,
        "person": principal.user,
        "rows": _rows(items),
        "activity_url": f"{base}/activity/",
        "settings_url": f"{base}/settings/?tab=account",
    }
    count = len(items)
    subject = f"Cortex · {principal.organization.name}: {count} new item{'s' if count != 1 else ''} for you"
    message = EmailMultiAlternatives(
        subject=subject,
        body=render_to_string("email/digest.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[principal.user.email],
    )
    message.attach_alternative(render_to_string("email/digest.html", context), "text/html")
    return message


def digest_send(*, membership_id: int, now: datetime | None = None) -> bool:
    """Send one member's digest for today if they are due and have something new; True when it went out."""
    now = now or timezone.now()
    membership = Membership.objects.select_related("organization", "user").filter(_due(now), pk=membership_id).first()
    if membership is None:
        return False
    principal = Principal(membership)
    items = _unseen(principal)
    if not items:
        return False
    message = _message(principal, items)
    with transaction.atomic():
        claimed = Membership.objects.filter(_due(now), pk=membership_id).update(digest_sent_at=now)
        if claimed != 1:
            return False  # another run claimed today's digest first
        # What went out, to whom, and how many of each kind — never the items themselves (the
        # audit log is read by auditors who need not be able to read those memories).
        kinds: dict[str, int] = {}
        for item in items:
            kinds[item.kind] = kinds.get(item.kind, 0) + 1
        record(
            "digest.sent",
            organization=membership.organization_id,
            actor=Actor.system("daily digest"),
            target_type="membership",
            target_id=membership.pk,
            details={"items": len(items), "kinds": kinds},
        )
        message.send()  # raises on failure: the claim rolls back and the next run tries again
    return True


def digests_send_due(*, batch_size: int, after_id: int = 0, now: datetime | None = None) -> DigestBatch:
    """One bounded batch of today's digests: the due members with ids above `after_id`, lowest first.

    The task passes the batch's `last_id` to the next one, so every batch moves on and the run ends.
    A mail server that refuses one message is logged and that member skipped: their claim rolled
    back, so the next day's run (or a later run today) tries again.
    """
    now = now or timezone.now()
    ids = list(Membership.objects.filter(_due(now), pk__gt=after_id).order_by("pk").values_list("pk", flat=True)[:batch_size])
    sent = 0
    for membership_id in ids:
        try:
            if digest_send(membership_id=membership_id, now=now):
                sent += 1
        except (smtplib.SMTPException, OSError):
            logger.warning("The daily digest of membership %s could not be sent", membership_id, exc_info=True)
    return DigestBatch(sent=sent, examined=len(ids), last_id=ids[-1] if ids else after_id, more=len(ids) == batch_size)
