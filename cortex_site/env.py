"""Strict environment helpers: a typo in a setting is an error at start-up, not a silent default."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: set[str]) -> str:
    value = os.environ.get(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of: {', '.join(sorted(choices))}")
    return value


def cortex_home() -> Path:
    """Where embedded services keep their data and the generated secret key lives: CORTEX_HOME, or
    `.cortex` in the checkout (the runner's default too, whatever directory either starts from)."""
    return Path(os.environ.get("CORTEX_HOME") or Path(__file__).resolve().parent.parent / ".cortex").resolve()


def read_secret_key(home: Path) -> str | None:
    try:
        return (home / "secret_key").read_text().strip() or None
    except FileNotFoundError:
        return None


def ensure_secret_key(home: Path) -> str:
    """The key in `home/secret_key`, generated on first use.

    Written under a temporary name created 0600 and renamed: the key is never readable by
    others, and a start interrupted mid-write never leaves an empty key behind.
    """
    existing = read_secret_key(home)
    if existing:
        return existing
    home.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    partial = home / f".secret_key.{os.getpid()}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    os.replace(partial, home / "secret_key")
    return key
