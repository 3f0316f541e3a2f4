"""A probe task the two-worker test loads into real workers (`--include scale_probe`).

It records every execution as a row — deliberately not idempotent — so a task delivered to
two workers, or run twice by one, shows up as two rows. Each row keeps the PostgreSQL backend
that wrote it: a worker process that kept its connection wrote all its rows from one.
"""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task
from django.db import connection

TABLE = "scale_probe_execution"


@shared_task(bind=True, name="scale.probe", acks_late=True)
def probe(self: Any, number: int) -> int:
    time.sleep(0.01)  # long enough for the workers' processes to interleave
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (task_id, number, worker, queue, backend) "  # noqa: S608 - a constant
            "VALUES (%s, %s, %s, %s, pg_backend_pid())",
            [self.request.id, number, self.request.hostname, self.request.delivery_info.get("routing_key", "")],
        )
    return number
