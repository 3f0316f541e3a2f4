"""The environment a fresh interpreter needs to load Cortex's real settings, for tests that start one."""

from __future__ import annotations

import os


def settings_env(**env: str) -> dict[str, str]:
    """The real settings' environment, with a database and a Redis nobody listens at, and `env`."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "DJANGO_SETTINGS_MODULE": "cortex_site.settings",
        "DATABASE_URL": "postgresql://nobody@/nothing",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "SECRET_KEY": "test-only",
        "CORTEX_CONNECTOR_KEY": os.environ["CORTEX_CONNECTOR_KEY"],
        "CORTEX_HOME": os.environ["CORTEX_HOME"],
        **env,
    }
