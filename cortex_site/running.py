"""What a running `make run` tells the operator CLI: its services' URLs and its secret.

While `python -m cortex_site.runner run` (or `dev`, or `services`) runs, it keeps
`$CORTEX_HOME/run/services.json` (mode 0600: it holds the Redis password and the secret key)
with the environment its web server, worker and beat got. `manage.py` and the `cortex` console
script read it, so `cortex org create ...` in another terminal talks to the same database with
the same settings. The file is removed when the runner stops; one left by a runner that died
(its pid is gone) is ignored.

Nothing here imports Django settings: it runs before them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cortex_site.embedded import _pid_alive
from cortex_site.env import cortex_home

NOTHING_RUNNING = "Cortex is not running from {home}: start `make run` first, or set DATABASE_URL."

# Which of the runner's variables the CLI takes over: the service URLs, the secret and the switches
# that change what a write does (embedder, demo, ...). Provider API keys are not written to disk;
# an operator who needs them exports them as the runner's terminal did.
_RECORDED = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS")


def state_path(home: Path) -> Path:
    return home / "run" / "services.json"


def recorded_environment(env: dict[str, str]) -> dict[str, str]:
    return {
        key: value
        for key, value in env.items()
        if key in _RECORDED or (key.startswith("CORTEX_") and key not in {"CORTEX_HOME", "CORTEX_TESTING"})
    }


def write_state(home: Path, env: dict[str, str]) -> Path:
    """Record what the children run with; created 0600 under a temporary name, then renamed, so a
    reader never sees half a file and nobody else can read the secrets in it."""
    path = state_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".services.{os.getpid()}.json")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"pid": os.getpid(), "environment": recorded_environment(env)}, handle, indent=1)
    os.replace(partial, path)
    return path


def clear_state(home: Path) -> None:
    path = state_path(home)
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (FileNotFoundError, ValueError):
        pass


def read_state(home: Path) -> dict[str, str] | None:
    """The running runner's environment, or None when none runs from this home."""
    try:
        state = json.loads(state_path(home).read_text())
    except (FileNotFoundError, ValueError, PermissionError):
        return None
    pid = state.get("pid")
    if not isinstance(pid, int) or not _pid_alive(pid):
        return None
    environment = state.get("environment")
    if not isinstance(environment, dict):
        return None
    return {str(key): str(value) for key, value in environment.items()}


def use_running_services() -> str | None:
    """Fill the environment from the running runner unless DATABASE_URL is already set.

    Returns None when the CLI can go on, else the one sentence to print. Variables the operator
    exported win over recorded ones.
    """
    if os.environ.get("DATABASE_URL"):
        return None
    home = cortex_home()
    recorded = read_state(home)
    if recorded is None:
        return NOTHING_RUNNING.format(home=home)
    os.environ.setdefault("CORTEX_HOME", str(home))
    for key, value in recorded.items():
        os.environ.setdefault(key, value)
    return None
