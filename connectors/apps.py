from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core import checks


def check_connector_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from django.conf import settings

    if getattr(settings, "CORTEX_CONNECTOR_KEY", ""):
        return []
    return [
        checks.Error(
            "CORTEX_CONNECTOR_KEY is not set: connector credentials cannot be encrypted or read.",
            hint='Generate one with `python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`, '
            "set it in the environment and keep it safe (make run makes a development key under CORTEX_HOME).",
            id="connectors.E001",
        )
    ]


class ConnectorsConfig(AppConfig):
    # ready() imports nothing for side effects: the source registry is imported lazily on first use.
    name = "connectors"
    verbose_name = "Connectors"

    def ready(self) -> None:
        checks.register(check_connector_key)
