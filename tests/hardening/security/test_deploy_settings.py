"""`manage.py check --deploy` is clean with the settings `make run` uses, and the response headers
and cookies are what those settings promise — over plain http on loopback and behind TLS.

The settings are built in a fresh interpreter from exactly the environment the runner gives its
children (`runner._one_machine_defaults`), so what is checked is what runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.test import Client

ROOT = Path(__file__).resolve().parents[3]

# Runs in a fresh interpreter: the runner's own defaults for `make run`, then Django.
_AS_MAKE_RUN = """
import os, sys
from pathlib import Path
from cortex_site import runner
runner._one_machine_defaults(Path(os.environ["CORTEX_HOME"]), dev=False)
if sys.argv[1] == "check":
    os.execv(sys.executable, [sys.executable, "manage.py", "check", "--deploy", *sys.argv[2:]])
import json, django
django.setup()
from django.conf import settings
names = ["DEBUG", "SESSION_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY", "SESSION_COOKIE_SAMESITE", "CSRF_COOKIE_SECURE",
         "CSRF_COOKIE_HTTPONLY", "CSRF_COOKIE_SAMESITE", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
         "SECURE_SSL_REDIRECT", "SECURE_PROXY_SSL_HEADER", "ALLOWED_HOSTS", "CONTENT_SECURITY_POLICY"]
print(json.dumps({name: getattr(settings, name) for name in names}))
"""


def _as_make_run(tmp_path: Path, what: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ.get("PATH", ""),
        "CORTEX_HOME": str(tmp_path),
        # Settings parse these; nothing connects to them during the checks.
        "DATABASE_URL": "postgresql://nobody@/nothing",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "CORTEX_CONNECTOR_KEY": Fernet.generate_key().decode(),
    }
    return subprocess.run(
        [sys.executable, "-c", _AS_MAKE_RUN, what, *args],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _reported(output: str) -> list[str]:
    """Check ids reported, leaving out drf-spectacular's schema warnings: the OpenAPI contract is
    helper "schema"'s work (tests/hardening/test_openapi_contract.py), not a deployment setting."""
    return [found for found in re.findall(r"\(([a-z_]+\.[WE]\d+)\)", output) if not found.startswith("drf_spectacular.")]


def test_check_deploy_is_clean_for_make_run_on_loopback_http(tmp_path: Path) -> None:
    result = _as_make_run(tmp_path, "check")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert _reported(output) == [], output[-3000:]


def test_check_deploy_is_clean_behind_a_tls_proxy(tmp_path: Path) -> None:
    # The security checks only (Django's and the OAuth toolkit's): the full run above also builds the
    # OpenAPI schema, which takes tens of seconds and does not depend on how Cortex is served.
    result = _as_make_run(
        tmp_path, "check", "--tag", "security", CORTEX_BASE_URL="https://cortex.example.com", BEHIND_TLS_PROXY="1"
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert _reported(output) == [], output[-3000:]


def test_served_over_http_beyond_loopback_the_https_warnings_stay(tmp_path: Path) -> None:
    # Listening on a network address over plain http is not what the loopback exemption covers.
    result = _as_make_run(tmp_path, "check", "--tag", "security", HOST="10.0.0.5")
    reported = _reported(result.stdout + result.stderr)
    assert {"security.W004", "security.W008", "security.W012", "security.W016"} <= set(reported), reported


def _settings_of(tmp_path: Path, **env: str) -> dict[str, Any]:
    result = _as_make_run(tmp_path, "settings", **env)
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def _cookie_flags(response: Any, name: str) -> dict[str, Any]:
    morsel = response.cookies[name]
    return {"secure": bool(morsel["secure"]), "httponly": bool(morsel["httponly"]), "samesite": morsel["samesite"]}


def _sign_in(client: Client, email: str, *, secure: bool) -> Any:
    page = client.get("/login/", secure=secure)
    assert page.status_code == 200
    token = page.cookies["csrftoken"].value
    response = client.post(
        "/login/", {"username": email, "password": "pw-for-tests-1", "csrfmiddlewaretoken": token}, secure=secure
    )
    assert response.status_code == 302, response.content[:500]
    return page, response


@pytest.mark.parametrize(
    ("env", "https"),
    [({}, False), ({"CORTEX_BASE_URL": "https://cortex.example.com", "BEHIND_TLS_PROXY": "1"}, True)],
    ids=["make-run-loopback-http", "behind-tls"],
)
def test_cookies_and_headers_follow_how_cortex_is_served(
    tmp_path: Path, env: dict[str, str], https: bool, settings: Any, make_org: Any, make_member: Any
) -> None:
    served = _settings_of(tmp_path, **env)
    assert served["DEBUG"] is False
    for name, value in served.items():
        if name not in {"DEBUG", "ALLOWED_HOSTS"}:
            setattr(settings, name, tuple(value) if isinstance(value, list) else value)
    settings.ALLOWED_HOSTS = [*served["ALLOWED_HOSTS"], "testserver"]
    member = make_member(make_org(), "Employee")

    client = Client()
    login_page, signed_in = _sign_in(client, member.user.email, secure=https)
    csrf, session = _cookie_flags(login_page, "csrftoken"), _cookie_flags(signed_in, "sessionid")
    # HttpOnly and SameSite always; Secure exactly when the public address is https.
    assert csrf == {"secure": https, "httponly": True, "samesite": "Lax"}
    assert session == {"secure": https, "httponly": True, "samesite": "Lax"}

    home = client.get("/", secure=https)
    assert home.status_code == 200
    csp = home["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in csp.split(";") if part.strip())
    assert directives["script-src"] == "'self'"  # no 'unsafe-inline', no 'unsafe-eval', no hosts
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'self'"
    assert "unsafe-inline" not in directives["default-src"] and "unsafe-eval" not in csp
    assert home["X-Frame-Options"] == "DENY"
    assert home["X-Content-Type-Options"] == "nosniff"
    assert home["Referrer-Policy"] == "same-origin"
    assert home["Cross-Origin-Opener-Policy"] == "same-origin"
    if https:
        assert home["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
        # Plain http reaching the proxy is redirected to https (the health check is exempt).
        redirected = Client().get("/login/")
        assert redirected.status_code == 301
        assert redirected["Location"].startswith("https://")
        assert Client().get("/healthz").status_code in {200, 503}
    else:
        assert "Strict-Transport-Security" not in home


def test_no_template_carries_an_inline_script_or_event_handler() -> None:
    """What the CSP would block in the browser, found in the source: <script> without src, on*=
    attributes, javascript: URLs and htmx's eval-based attributes (hx-on, js: values)."""
    offenders = []
    patterns = [
        re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/(?:ld\+)?json\")[^>]*>", re.IGNORECASE),
        re.compile(r"\son[a-z]+\s*=\s*[\"']", re.IGNORECASE),
        re.compile(r"javascript:", re.IGNORECASE),
        re.compile(r"\bhx-on[:-]|hx-vals=['\"]\s*js:|hx-vars=", re.IGNORECASE),
    ]
    for template in sorted((ROOT / "templates").rglob("*.html")):
        text = template.read_text()
        for pattern in patterns:
            for match in pattern.finditer(text):
                offenders.append(f"{template.relative_to(ROOT)}: {match.group(0)[:60]}")
    assert offenders == []
    config = re.search(r'name="htmx-config" content=\'([^\']+)\'', (ROOT / "templates" / "base.html").read_text())
    assert config is not None
    assert json.loads(config.group(1)) == {"includeIndicatorStyles": False, "allowEval": False}
