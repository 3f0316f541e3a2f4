"""Error reports never show a credential: not in settings, not in the request, not in a frame's
variables — even on the debug page `make dev` shows."""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.test import RequestFactory
from django.views.debug import technical_500_response

from cortex_site.reporting import CredentialMaskingFilter, mask_url_passwords


def _redis_password() -> str:
    password = urlsplit(str(settings.REDIS_URL)).password
    assert password, "the embedded Redis of the test run is password-protected"
    return password


def test_a_password_inside_a_url_is_replaced_and_nothing_else_is() -> None:
    assert mask_url_passwords("redis://:s3cr3t@127.0.0.1:6390/0", "***") == "redis://:***@127.0.0.1:6390/0"
    assert mask_url_passwords("postgresql://cortex:pw@db:5432/cortex", "***") == "postgresql://cortex:***@db:5432/cortex"
    assert mask_url_passwords("http://127.0.0.1:8000/memories/", "***") == "http://127.0.0.1:8000/memories/"
    assert mask_url_passwords("see https://user@example.test/x", "***") == "see https://user@example.test/x"


def test_settings_holding_service_credentials_are_masked() -> None:
    safe = CredentialMaskingFilter().get_safe_settings()
    password = _redis_password()
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CACHES", "SECRET_KEY", "DATABASES"):
        assert password not in repr(safe[name]), name
    assert safe["REDIS_URL"].startswith("redis://:")  # still says which server, without the password
    assert settings.SECRET_KEY not in repr(safe)


def test_the_debug_500_page_shows_no_redis_password(settings: Any) -> None:
    settings.DEBUG = True
    password = _redis_password()
    request = RequestFactory().get("/boom/", HTTP_X_BROKER=settings.CELERY_BROKER_URL)
    broker_url = settings.CELERY_BROKER_URL  # a local variable of the failing frame, as in real code
    try:
        raise RuntimeError(f"cannot reach {broker_url}")
    except RuntimeError:
        page = technical_500_response(request, *sys.exc_info()).content.decode()
    # The exception message itself is the code's own text; the page's settings, META and frame
    # variables are what the filter answers for.
    page_without_message = page.replace(f"cannot reach {broker_url}", "")
    assert "CELERY_BROKER_URL" in page_without_message
    assert password not in page_without_message
