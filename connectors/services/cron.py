"""The cron endpoint's service: an external scheduler runs the dispatcher once for one organization.

For hosts where Celery beat cannot run (a serverless web tier driven by a hosted cron), each
organization may have a cron secret. The secrets live in the environment, never in the database
or the code: `CORTEX_CRON_SECRETS="acme=<long random>,globex=<long random>"` (settings), the same
place the scheduler keeps its copy. The request names its organization and carries the secret;
the secret is compared in constant time (over digests, so its length does not leak either), and
an unknown organization, one without a secret and a wrong secret are one and the same refusal.
Every call is audited: dispatches in the organization's log, refusals too (in the organization-less
chain when the organization is unknown).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from django.conf import settings

from audit.models import AuditEvent
from audit.services import Actor, record
from connectors.services.schedule import DispatchReport, dispatch_due
from cortex_site.errors import NotAuthenticated
from memories.access import Principal
from memories.models import Organization

CRON_PATH = "/api/cron/connectors"
ACTOR = Actor(kind=AuditEvent.ActorKind.SYSTEM, label="external cron")
REFUSAL = "The organization and cron secret do not match a configured cron secret."


def _secret_for(slug: str) -> str:
    secrets: dict[str, str] = getattr(settings, "CORTEX_CRON_SECRETS", {})
    return secrets.get(slug, "")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def cron_dispatch(*, organization_slug: str, secret: str) -> DispatchReport:
    """Run the dispatcher once for the organization whose cron secret this is.

    Raises NotAuthenticated (error_code INVALID_CRON_SECRET) for a wrong secret, an unknown
    organization or one without a secret, after recording the refusal.
    """
    organization = Organization.objects.filter(slug=organization_slug).first() if organization_slug else None
    expected = _secret_for(organization.slug) if organization is not None else ""
    # Compare even when there is nothing to compare with, so timing does not tell which part was wrong.
    matches = hmac.compare_digest(_digest(secret or ""), _digest(expected or "\0unset"))
    if organization is None or not expected or not secret or not matches:
        record(
            "connector.cron_reject",
            organization=organization,
            actor=ACTOR,
            target_type="organization",
            target_id=organization_slug[:128],
            outcome=AuditEvent.Outcome.DENIED,
            details={"reason": "no secret configured" if organization is not None and not expected else "secret mismatch"},
        )
        raise NotAuthenticated(REFUSAL, error_code="INVALID_CRON_SECRET")
    report = dispatch_due(organization_id=organization.pk)
    record(
        "connector.cron_dispatch",
        organization=organization,
        actor=ACTOR,
        target_type="organization",
        target_id=organization.slug,
        details={"started": len(report.started), "busy": len(report.busy), "reaped": len(report.reaped)},
    )
    return report


def cron_status(principal: Principal) -> dict[str, Any]:
    """What the Connectors page tells an admin about the cron endpoint (never the secret itself)."""
    return {
        "configured": bool(_secret_for(principal.organization.slug)),
        "url": f"{settings.CORTEX_BASE_URL.rstrip('/')}{CRON_PATH}?organization={principal.organization.slug}",
        "organization": principal.organization.slug,
    }
