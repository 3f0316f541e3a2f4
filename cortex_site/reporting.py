"""Error reports that never show a credential, even where a debug page is shown (`make dev`).

Django's own filter hides settings whose *names* look secret (KEY, PASS, TOKEN, ...); our
service URLs carry passwords in their *values* (REDIS_URL, CELERY_BROKER_URL, the cache
LOCATION, DATABASE_URL in the environment), so every string that holds a URL with a password
has that password replaced, wherever it appears: settings, request META, local variables.
"""

from __future__ import annotations

import re
from typing import Any

from django.views.debug import SafeExceptionReporterFilter

# scheme://user:password@host — the password is whatever lies between the user's colon and the @.
_URL_PASSWORD = re.compile(r"(?P<prefix>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<password>[^@\s/]+)(?=@)", re.IGNORECASE)


def mask_url_passwords(text: str, substitute: str) -> str:
    return _URL_PASSWORD.sub(lambda match: match.group("prefix") + substitute, text)


class CredentialMaskingFilter(SafeExceptionReporterFilter):
    hidden_settings = re.compile("API|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|FERNET|DSN", flags=re.IGNORECASE)

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)
        return self._mask(cleansed)

    def get_traceback_frame_variables(self, request: Any, tb_frame: Any) -> Any:
        # A local called `password` or `api_key` is hidden as a setting of that name would be.
        return [
            (name, self.cleansed_substitute if self.hidden_settings.search(name) else self._mask(value))
            for name, value in super().get_traceback_frame_variables(request, tb_frame)
        ]

    def _mask(self, value: Any) -> Any:
        if isinstance(value, str):
            return mask_url_passwords(value, self.cleansed_substitute)
        if isinstance(value, dict):
            return {key: self._mask(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._mask(item) for item in value)
        return value
