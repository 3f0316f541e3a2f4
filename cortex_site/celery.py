"""The Celery app: Redis broker and result backend; queues and routes are in settings (CORTEX_TASK_QUEUES)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")

app = Celery("cortex")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    # A task is acknowledged only after it ran, so a worker crash re-delivers it; tasks are idempotent.
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_soft_time_limit=300,
    task_time_limit=360,
    task_track_started=True,
    result_expires=7 * 24 * 3600,
    broker_connection_retry_on_startup=True,
    broker_transport_options={"visibility_timeout": 3600},
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    timezone="UTC",
)
app.autodiscover_tasks()
