"""docker-compose.yml and the Dockerfile run the same runner commands as `make run`, every
service has a healthcheck, and the image's collectstatic build step really works."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cortex_site import runner

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ["python", "-m", "cortex_site.runner"]
APP_SERVICES = {"migrate": "migrate", "web": "web", "worker": "worker", "beat": "beat", "slack-socket": "socket"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _dockerfile_lines() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    return _dockerfile_lines()


def _instruction(dockerfile: list[str], keyword: str) -> list[str]:
    return [line[len(keyword) :].strip() for line in dockerfile if line.split()[0].upper() == keyword]


def test_app_services_run_the_runners_own_commands(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for service, subcommand in APP_SERVICES.items():
        assert services[service]["command"] == [*RUNNER, subcommand], service
    # Each of them is a real subcommand of the runner, the one `make run` supervises.
    for subcommand in APP_SERVICES.values():
        result = subprocess.run(
            [sys.executable, "-m", "cortex_site.runner", subcommand, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, (subcommand, result.stderr)
    assert "cortex_site.runner run" in (ROOT / "Makefile").read_text()


def test_image_default_command_is_the_web_command(dockerfile: list[str]) -> None:
    (cmd,) = _instruction(dockerfile, "CMD")
    assert json.loads(cmd) == [*RUNNER, "web"]
    assert _instruction(dockerfile, "FROM") == ["python:3.11-slim"]
    users = _instruction(dockerfile, "USER")
    assert users and users[-1] not in {"root", "0"}
    (run,) = _instruction(dockerfile, "RUN")
    assert "pip install ." in run
    assert "collectstatic" in run


def test_every_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        check = service.get("healthcheck")
        assert check and not check.get("disable"), f"{name} has no healthcheck"
        assert check["test"] and check["test"][0] in {"CMD", "CMD-SHELL"}, name
    tests = {name: " ".join(service["healthcheck"]["test"][1:]) for name, service in compose["services"].items()}
    assert "/healthz" in tests["web"]
    assert "pg_isready" in tests["postgres"]
    assert "redis-cli ping" in tests["redis"]
    assert "inspect ping" in tests["worker"]


def test_worker_healthcheck_pings_the_worker_name_the_runner_gives(compose: dict[str, Any]) -> None:
    command = runner.worker_command()
    name = command[command.index("-n") + 1]
    assert name == "cortex@%h"
    # `$$` is compose's escape: the container's shell sees $HOSTNAME, which celery's %h expands to as well.
    healthcheck = " ".join(compose["services"]["worker"]["healthcheck"]["test"])
    assert "--destination $${CORTEX_WORKER_NAME:-cortex}@$$HOSTNAME" in healthcheck


def test_services_are_the_production_shape(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert re.fullmatch(r"pgvector/pgvector:pg1[78]", services["postgres"]["image"])
    assert services["redis"]["image"].startswith("redis:")
    assert services["migrate"]["restart"] == "no"
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}
    assert services["migrate"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    # Data survives container re-creation (PostgreSQL 18 images keep PGDATA under /var/lib/postgresql).
    assert "postgres-data:/var/lib/postgresql" in services["postgres"]["volumes"]
    assert set(compose["volumes"]) >= {"postgres-data", "redis-data"}


def test_configuration_comes_from_the_environment_and_secret_key_is_required(compose: dict[str, Any]) -> None:
    raw = (ROOT / "docker-compose.yml").read_text()
    required = set(re.findall(r"\$\{(\w+):\?", raw))
    assert {"SECRET_KEY", "POSTGRES_PASSWORD", "ALLOWED_HOSTS"} <= required
    for name in APP_SERVICES:
        env = compose["services"][name]["environment"]
        assert env["SECRET_KEY"].startswith("${SECRET_KEY:?")
        assert env["DATABASE_URL"].startswith("postgresql://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["REDIS_URL"] == "redis://redis:6379/0"
        assert compose["services"][name]["env_file"] == ".env"
    documented = (ROOT / ".env.example").read_text()
    for variable in required:
        assert re.search(rf"^{variable}=", documented, re.MULTILINE), f"{variable} is not in .env.example"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".env", ".venv", ".cortex", ".git"} <= set(ignored)


def test_the_images_collectstatic_step_builds_a_manifest_every_page_can_use(dockerfile: list[str], tmp_path: Path) -> None:
    (run,) = _instruction(dockerfile, "RUN")
    (step,) = [part.strip() for part in run.split("&&") if "collectstatic" in part]
    venv_bin = str(Path(sys.executable).parent)
    env = {"PATH": f"{venv_bin}:/usr/bin:/bin", "CORTEX_HOME": str(tmp_path)}
    built = subprocess.run(["sh", "-c", step], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    manifest = tmp_path / "staticfiles" / "staticfiles.json"
    assert manifest.exists()
    # With DEBUG off (as in the container) every {% static %} of the sign-in page resolves from the manifest.
    render = (
        "import django; django.setup(); from django.test import Client; "
        "r = Client().get('/login/'); print(r.status_code); "
        "import re; print('\\n'.join(re.findall(r'/static/[^\"\\' )]+', r.content.decode())))"
    )
    page = subprocess.run(
        [sys.executable, "-c", render],
        env={
            **os.environ,
            "DEBUG": "0",
            "CORTEX_TESTING": "0",
            "CORTEX_HOME": str(tmp_path),
            "ALLOWED_HOSTS": "testserver",
            "SECURE_HSTS_SECONDS": "0",
        },
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert page.returncode == 0, page.stderr[-3000:]
    status, *assets = page.stdout.split()
    assert status == "200", page.stdout[-2000:]
    assert any(asset.endswith(".css") for asset in assets), assets
    hashed = json.loads(manifest.read_text())["paths"].values()
    for asset in assets:
        assert asset.removeprefix("/static/") in hashed, asset


def test_compose_runs_every_process_make_run_supervises(compose: dict[str, Any], tmp_path: Path) -> None:
    """`make run` and compose stay in step: each process `make run` keeps alive is a compose service
    running the same runner subcommand, and that subcommand runs the very command `make run` spawns."""
    supervised = runner.supervised_commands(tmp_path)
    services_by_subcommand = {subcommand: service for service, subcommand in APP_SERVICES.items()}
    assert set(supervised) == set(APP_SERVICES.values()) - {"migrate"}
    for subcommand in supervised:
        service = compose["services"][services_by_subcommand[subcommand]]
        assert service["command"] == [*RUNNER, subcommand]
    assert supervised["worker"] == runner.worker_command()
    assert supervised["web"] == runner.web_command()
    # migrate is the one-off: it runs to completion before anything that serves starts.
    assert compose["services"]["migrate"]["restart"] == "no"


def test_the_compose_worker_takes_every_queue_unless_the_environment_narrows_it(compose: dict[str, Any]) -> None:
    from cortex_site.queues import TASK_QUEUES

    environment = compose["services"]["worker"]["environment"]
    assert "CORTEX_WORKER_QUEUES" not in environment  # only from .env, when the operator sets it
    command = runner.worker_command()
    assert command[command.index("-Q") + 1].split(",") == list(TASK_QUEUES)
    assert re.search(r"^# CORTEX_WORKER_QUEUES=", (ROOT / ".env.example").read_text(), re.MULTILINE)
