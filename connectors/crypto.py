"""Credentials at rest: Fernet (AES-128-CBC + HMAC-SHA256) with the key from CORTEX_CONNECTOR_KEY.

Several comma-separated keys may be given: the first encrypts, all decrypt (MultiFernet), so
the key can be rotated without re-entering every connector's credentials.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class CredentialsUnreadable(Exception):
    """The stored credentials do not decrypt with the configured key(s)."""


@lru_cache(maxsize=4)
def _fernet(keys: str) -> MultiFernet:
    parts = [part.strip() for part in keys.split(",") if part.strip()]
    if not parts:
        raise ImproperlyConfigured("CORTEX_CONNECTOR_KEY is not set; connectors cannot store credentials without it.")
    try:
        return MultiFernet([Fernet(part.encode()) for part in parts])
    except ValueError:
        raise ImproperlyConfigured(
            "CORTEX_CONNECTOR_KEY must be Fernet keys (32 url-safe base64 bytes each, comma-separated); "
            'generate one with: python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
        ) from None


def fernet() -> MultiFernet:
    return _fernet(settings.CORTEX_CONNECTOR_KEY or "")


def encrypt_json(value: dict[str, Any]) -> str:
    return fernet().encrypt(json.dumps(value, sort_keys=True).encode()).decode()


def decrypt_json(token: str) -> dict[str, Any]:
    try:
        data = json.loads(fernet().decrypt(token.encode()))
    except InvalidToken:
        raise CredentialsUnreadable(
            "The connector's credentials cannot be decrypted with CORTEX_CONNECTOR_KEY; "
            "restore the key they were saved with, or enter the credentials again."
        ) from None
    if not isinstance(data, dict):
        raise CredentialsUnreadable("The connector's stored credentials are not a JSON object.")
    return data


def rotate(token: str) -> str:
    """Re-encrypt with the first (newest) key."""
    return fernet().rotate(token.encode()).decode()
