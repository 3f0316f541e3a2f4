"""The Celery app: Redis broker and result backend; queues and routes are in settings (CORTEX_TASK_QUEUES)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from celery import Celery
from celery.signals import celeryd_init, task_postrun, task_prerun, worker_process_init

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
    # Celery's Django fixup closes the database connections before and after every task unless this
    # is set; it then closes them every this many tasks, and keep_database_connections below decides
    # the rest as Django does between requests.
    CELERY_DB_REUSE_MAX=1000,
)
app.autodiscover_tasks()

logger = logging.getLogger(__name__)
AUTOGROUP = Path("/proc/self/autogroup")

# How long a worker process keeps its database connection between tasks (seconds).
WORKER_CONN_MAX_AGE = 600


@worker_process_init.connect
def keep_database_connections(**_: object) -> None:
    """A worker process runs one task after another on one thread, so it keeps its database
    connection between them instead of opening one for every task — a new server backend and a
    SCRAM exchange, 25-45 ms of CPU each. Between tasks it is treated as Django treats one between
    requests (`close_if_unusable_or_obsolete`: closed after an error or when too old, checked before
    reuse with CONN_HEALTH_CHECKS), so a restarted PostgreSQL costs a reconnect, not a failed task.

    Celery's Django fixup would close every connection before and after each task unless
    `CELERY_DB_REUSE_MAX` is set; it is (above), and these handlers do the closing that matters.
    Connected here, in worker processes only: an eager task in a test runs inside the test's
    transaction, whose connection must stay as it is.
    """
    from django.db import connections

    for connection in connections.all(initialized_only=False):
        if connection.settings_dict.get("CONN_MAX_AGE") == 0 and "pool" not in connection.settings_dict.get("OPTIONS", {}):
            connection.settings_dict["CONN_MAX_AGE"] = WORKER_CONN_MAX_AGE
    task_prerun.connect(_close_unusable_connections, weak=False)
    task_postrun.connect(_close_unusable_connections, weak=False)


def _close_unusable_connections(**_: object) -> None:
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()


@celeryd_init.connect
def yield_cpu_to_answers(**_: object) -> None:
    """Lower the worker's CPU priority to CORTEX_WORKER_NICE before it starts its pool processes
    (which inherit it). A burst of webhook deliveries is answered by the web server and then turned
    into memories by the worker, on the same cores under `make run`: at equal priority the worker's
    writes took ~0.45 of the two cores in the middle of a burst and the answers queued behind them
    (docs/benchmarks.md). A niced worker still gets the CPU whenever the web server leaves it idle.
    """
    from django.conf import settings

    lower_priority(settings.CORTEX_WORKER_NICE)


def lower_priority(nice: int) -> None:
    """This process at nice `nice` unless it already runs lower, and — when it leads a session of
    its own, as `make run` starts each of its processes — its session's autogroup too: with the
    kernel's autogroup scheduling, CPU time is shared between sessions first, so a process's own
    nice value only weighs against processes of its session. Never raises priority (that needs
    privileges); a platform without autogroups keeps the process's nice value alone."""
    if nice <= 0:
        return
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current < nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    session = _lower_own_session(nice) if os.getsid(0) == os.getpid() else "shared with its caller, left alone"
    logger.info("worker at nice %d (its session: %s): it yields the CPU to the web server's answers", max(current, nice), session)


def _lower_own_session(nice: int) -> str:
    """Lower the autogroup of the session this process leads to `nice` unless it is already lower;
    says what it did, for the start-up log."""
    current = session_autogroup_nice()
    if current is None:
        return "no autogroup of its own here"
    if current >= nice:
        return f"already at nice {current}"
    try:
        AUTOGROUP.write_text(f"{nice}\n")
    except OSError as exc:
        return f"left as it was ({type(exc).__name__})"
    return f"lowered to nice {nice}"


def session_autogroup_nice() -> int | None:
    """The nice value of this process's session autogroup ("/autogroup-<id> nice <n>"), or None
    where there is none: no autogroup scheduling, or a session in the root group (the kernel then
    prints nothing — as for a container's first session)."""
    try:
        fields = AUTOGROUP.read_text().split()
    except OSError:
        return None
    if len(fields) != 3 or fields[1] != "nice":
        return None
    return int(fields[2])
