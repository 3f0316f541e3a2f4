"""Reading jobs: a job is visible to the person who started it, in its organization, only."""

from __future__ import annotations

from typing import Any

from cortex_site.errors import NotFound
from memories.access import DenialRule, Principal, hidden, parse_id
from memories.models import Job


def job_for(principal: Principal, job_id: Any) -> Job:
    parsed = parse_id(job_id)
    if parsed is None:
        raise NotFound("Job not found.")
    job = Job.objects.filter(pk=parsed).first()
    if job is None or job.organization_id != principal.organization_id or job.created_by_id != principal.user.pk:
        raise NotFound("Job not found.", denial=hidden(principal, "job", job, DenialRule.OWNER))
    return job
