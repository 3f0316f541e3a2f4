"""A live Cortex for the load, fault and backup steps: embedded services, then per phase a child
process with its own database, which starts the same web / worker / beat processes `make run`
starts (cortex_site.runner's commands) and drives them over loopback HTTP.

The driver half (`drive`) has no Django: it starts PostgreSQL + Redis under $CORTEX_BENCH_HOME and
runs each phase as `python <step> --phase <name> ...` (bench/recall.py's pattern, whose helpers are
reused here). The phase half (`Live`, `seed`) runs inside that child, with Django set up on the
phase's database.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "bench", ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from harness import run_phase  # noqa: E402
from recall import database_url, drop_database, ensure_database, loadavg  # noqa: E402


def home_for(step: str) -> Path:
    base = os.environ.get("CORTEX_BENCH_HOME") or str(Path(tempfile.gettempdir()) / "cortex-reliability")
    return (Path(base) / step).resolve()


def bench_module(name: str) -> ModuleType:
    """A module of bench/ by file (bench/connectors.py shares its name with the connectors app)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quantiles(values: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/max by nearest rank (the same rule as bench/recall.py's percentiles)."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0, "n": 0}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 1)

    return {"p50": pick(0.5), "p95": pick(0.95), "p99": pick(0.99), "max": round(ordered[-1], 1), "n": len(ordered)}


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> float:
    """Seconds until `predicate()` is truthy; SystemExit naming `what` after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


# -- driver ----------------------------------------------------------------------------------------------


def drive(
    script: Path, step: str, phases: Sequence[Sequence[str]], extra_env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Start embedded PostgreSQL + Redis under home_for(step), run each phase in its own child with
    its own database (cortex_rel_<step>_<phase>), and return their results in order."""
    import redis

    from cortex_site.runner import embedded_services, ensure_dev_connector_key

    home = home_for(step)
    home.mkdir(parents=True, exist_ok=True)
    ensure_dev_connector_key(home)
    results = []
    with embedded_services(home) as services:
        base = {**os.environ, **services}
        base.update(
            DJANGO_SETTINGS_MODULE="cortex_site.settings",
            CORTEX_HOME=str(home),
            CORTEX_BENCH_STEP_HOME=str(home),
            SECRET_KEY=base.get("SECRET_KEY") or "reliability-only-secret-key",
            CELERY_TASK_ALWAYS_EAGER="0",
            CORTEX_EMBEDDER=base.get("CORTEX_EMBEDDER") or "hash",
            CORTEX_LLM="none",
            DEBUG="0",
            ALLOWED_HOSTS="127.0.0.1,localhost",
            PYTHONUNBUFFERED="1",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            **(extra_env or {}),
        )
        for phase in phases:
            # Tasks left in the broker by an earlier phase name rows of another database. Every
            # database by FLUSHDB: the embedded Redis has FLUSHALL disabled (cortex_site/embedded.py).
            for number in range(16):
                redis.Redis.from_url(base["REDIS_URL"], db=number).flushdb()
            env = {**base, "DATABASE_URL": database_url(base["DATABASE_URL"], f"cortex_rel_{step}_{phase[0]}")}
            results.append(run_phase(script, env, *phase))
    return results


# -- phase (child) -----------------------------------------------------------------------------------------
def step_home() -> Path:
    return Path(os.environ["CORTEX_BENCH_STEP_HOME"])


def setup_django(*, fresh: bool = True) -> None:
    if fresh:
        drop_database()
    ensure_database()
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    # DEBUG is off, as under `make run`: pages need the hashed static files' manifest.
    call_command("collectstatic", interactive=False, verbosity=0)
    cache.clear()


@dataclass
class Seeded:
    organization: Any
    membership: Any
    principal: Any
    token: str
    scopes: list[str]


def seed(slug: str = "rel", scopes: Sequence[str] = ("engineering", "sales")) -> Seeded:
    """An organization with granted scopes and an Executive admin who writes them all, with a token."""
    from memories.access import Principal
    from memories.models import Membership, Scope
    from memories.services import tenancy

    org = tenancy.organization_create(slug=slug, name=slug.title())
    for scope_slug in scopes:
        tenancy.scope_create(organization=org, slug=scope_slug, visibility=Scope.Visibility.GRANTED)
    member = tenancy.member_add(organization=org, email=f"admin@{slug}.test", clearance="Executive", role=Membership.Role.ADMIN)
    for scope in Scope.objects.filter(organization=org):
        tenancy.grant_set(membership=member, scope=scope, can_write=True)
    _, secret = tenancy.token_create(membership=member, name="reliability")
    principal = Principal(Membership.objects.select_related("organization", "user").get(pk=member.pk))
    return Seeded(org, member, principal, secret, ["public-docs", *scopes])


@dataclass
class Live:
    """The web server, worker and beat of `make run` on a free loopback port, logging under the step home."""

    env_extra: dict[str, str] = field(default_factory=dict)
    port: int = 0
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, IO[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env_extra, "HOST": "127.0.0.1", "PORT": str(self.port)}

    def start(self, *names: str) -> None:
        from cortex_site.embedded import free_port
        from cortex_site.runner import beat_command, web_command, worker_command

        if not self.port:
            self.port = free_port()
        os.environ.update(HOST="127.0.0.1", PORT=str(self.port))  # web_command() reads them
        commands = {"web": web_command(), "worker": worker_command(), "beat": beat_command(step_home())}
        logs = step_home() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name in names:
            self.logs[name] = (logs / f"{name}.log").open("ab")
            # Own process group: a fault kills the whole worker (main process and pool children).
            self.processes[name] = subprocess.Popen(
                commands[name],
                env=self._env(),
                cwd=ROOT,
                stdout=self.logs[name],
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if "web" in names:
            self.wait_web()
        if "worker" in names:
            self.wait_worker()

    def wait_web(self, timeout: float = 90) -> None:
        import httpx

        def up() -> bool:
            try:
                return httpx.get(self.url + "/healthz", timeout=2).status_code in {200, 503}
            except httpx.HTTPError:
                return False

        wait_until(up, timeout, what="the web server")

    def wait_worker(self, timeout: float = 90) -> None:
        from cortex_site.celery import app

        wait_until(lambda: bool(app.control.ping(timeout=1.0)), timeout, interval=0.5, what="the Celery worker")

    def kill(self, name: str) -> None:
        """SIGKILL the process group: no shutdown, no acknowledgement, as the OOM killer would."""
        process = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for name, process in list(self.processes.items()):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            self.processes.pop(name)
        for log in self.logs.values():
            log.close()


@contextmanager
def live(*names: str, **env_extra: str) -> Iterator[Live]:
    instance = Live(env_extra=dict(env_extra))
    try:
        instance.start(*names)
        yield instance
    finally:
        instance.stop()


def emit(result: dict[str, Any]) -> None:
    result.setdefault("loadavg", loadavg())
    print("RESULT " + json.dumps(result), flush=True)


__all__ = ["database_url", "drive", "emit", "live", "quantiles", "seed", "setup_django", "wait_until"]
