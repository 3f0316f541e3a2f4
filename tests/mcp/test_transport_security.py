"""The MCP endpoint's Host/Origin rules come from Django's settings (no server needed)."""

from __future__ import annotations

from django.test import override_settings

from memories.mcp.endpoint import transport_security


@override_settings(
    DEBUG=False,
    TESTING=False,
    ALLOWED_HOSTS=["cortex.example.com", ".example.org", "*"],
    CORTEX_BASE_URL="https://memory.example.com",
    CSRF_TRUSTED_ORIGINS=["https://admin.example.com", "https://*.example.net"],
)
def test_hosts_and_origins_follow_allowed_hosts_base_url_and_trusted_origins() -> None:
    security = transport_security()
    assert security.enable_dns_rebinding_protection is True
    assert set(security.allowed_hosts) == {
        "cortex.example.com",
        "cortex.example.com:*",
        "memory.example.com",
        "memory.example.com:*",
    }
    assert "https://memory.example.com" in security.allowed_origins
    assert "https://admin.example.com" in security.allowed_origins
    assert "https://cortex.example.com" in security.allowed_origins
    # Wildcards cannot be expressed in the SDK's exact matching, so they are not widened into "anything".
    assert not any("*." in origin or origin.startswith(".") for origin in security.allowed_origins + security.allowed_hosts)
    assert "127.0.0.1" not in security.allowed_hosts  # loopback only in development and tests


@override_settings(DEBUG=True, ALLOWED_HOSTS=[], CORTEX_BASE_URL="http://127.0.0.1:8000", CSRF_TRUSTED_ORIGINS=[])
def test_development_allows_loopback_on_any_port() -> None:
    security = transport_security()
    assert {"127.0.0.1:*", "localhost:*", "[::1]:*"} <= set(security.allowed_hosts)
    assert {"http://127.0.0.1:*", "http://localhost:*"} <= set(security.allowed_origins)
