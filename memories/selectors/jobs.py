"""Reading jobs: a job is visible to the person who started it, in its organization, only."""

from __future__ import annotations

from typing import Any

from cortex_site.errors import NotFound
from memories.access import Principal, parse_id
from memories.models import Job


def job_for(principal: Principal, job_id: Any) -> Job:
    parsed = parse_id(job_id)
    if parsed is None:
        raise NotFound("Job not found.")
    job = Job.objects.filter(pk=parsed, organization_id=principal.organization_id, created_by=principal.user).first()
    if job is None:
        raise NotFound("Job not found.")
    return job
