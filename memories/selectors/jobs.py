"""Reading jobs: a job is visible to the person who started it, in its organization, only."""

from __future__ import annotations

import uuid
from typing import Any

from cortex_site.errors import NotFound
from memories.access import Principal
from memories.models import Job


def job_for(principal: Principal, job_id: Any) -> Job:
    try:
        parsed = job_id if isinstance(job_id, uuid.UUID) else uuid.UUID(str(job_id))
    except (ValueError, TypeError):
        raise NotFound("Job not found.") from None
    job = Job.objects.filter(pk=parsed, organization_id=principal.organization_id, created_by=principal.user).first()
    if job is None:
        raise NotFound("Job not found.")
    return job
