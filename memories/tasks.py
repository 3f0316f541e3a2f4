"""Celery tasks of the memories app: thin wrappers over services, taking ids, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from memories.services.post_write import run_post_write


@shared_task(name="memories.after_memory_write", acks_late=True, ignore_result=False)
def after_memory_write(memory_id: str) -> dict[str, str]:
    return run_post_write(memory_id)
