"""Rate limits on the Redis cache: a budget per token, per signed-in person and per client address
(every caller from one address, however many tokens it holds); 429 RATE_LIMITED with Retry-After
in the header and the envelope. A forged X-Forwarded-For buys no fresh budget, for the API or for
sign-in guesses. Each test sets its own small rates; the defaults are far above what tests use.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from support import assert_envelope, signed_in

from cortex_site.api import AddressRateThrottle, PrincipalRateThrottle

pytestmark = pytest.mark.django_db


@pytest.fixture
def rates(monkeypatch: pytest.MonkeyPatch) -> Any:
    def set_rates(principal: str = "1000/min", address: str = "1000/min") -> None:
        monkeypatch.setattr(PrincipalRateThrottle, "THROTTLE_RATES", {"principal": principal})
        monkeypatch.setattr(AddressRateThrottle, "THROTTLE_RATES", {"address": address})

    return set_rates


def limited(response: Any) -> dict[str, Any]:
    body = assert_envelope(response, 429, "RATE_LIMITED")
    assert int(response["Retry-After"]) > 0
    assert body["details"]["retry_after_seconds"] == int(response["Retry-After"])
    return body


def test_each_token_has_its_own_budget(acme: dict[str, Any], api: Any, rates: Any) -> None:
    rates(principal="3/min")
    first, second = api(acme["employee"]), api(acme["employee"])
    assert [first.get("/api/me").status_code for _ in range(3)] == [200, 200, 200]
    limited(first.get("/api/me"))
    assert second.get("/api/me").status_code == 200  # another token of the same person: its own budget


def test_a_signed_in_person_has_a_budget_of_their_own(acme: dict[str, Any], rates: Any) -> None:
    rates(principal="2/min")
    eve, mo = signed_in(acme["employee"]), signed_in(acme["manager"])
    assert [eve.get("/api/me").status_code for _ in range(2)] == [200, 200]
    limited(eve.get("/api/me"))
    assert mo.get("/api/me").status_code == 200


def test_a_forged_forwarded_for_buys_no_fresh_address_budget(acme: dict[str, Any], api: Any, rates: Any) -> None:
    rates(principal="100/min", address="2/min")
    forged = [api(acme["employee"]).get("/api/me", headers={"X-Forwarded-For": f"203.0.113.{n}"}).status_code for n in range(2)]
    assert forged == [200, 200]
    limited(api(acme["manager"]).get("/api/me", headers={"X-Forwarded-For": "198.51.100.7"}))
    elsewhere = api(acme["manager"])
    assert elsewhere.get("/api/me", REMOTE_ADDR="192.0.2.50").status_code == 200


def test_one_address_shares_a_budget_across_all_its_tokens(acme: dict[str, Any], api: Any, rates: Any) -> None:
    rates(principal="100/min", address="4/min")
    clients = [api(acme[rung]) for rung in ("exec", "manager", "employee", "contractor")]
    assert [c.get("/api/me").status_code for c in clients] == [200, 200, 200, 200]
    limited(api(acme["employee"]).get("/api/me"))


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_budget(
    acme: dict[str, Any], api: Any, rates: Any, settings: Any
) -> None:
    from audit.middleware import _trusted_proxies

    settings.CORTEX_TRUSTED_PROXIES = ["127.0.0.1"]
    _trusted_proxies.cache_clear()
    try:
        rates(principal="100/min", address="1/min")
        token = api(acme["employee"])
        assert token.get("/api/me", headers={"X-Forwarded-For": "203.0.113.1"}).status_code == 200
        limited(token.get("/api/me", headers={"X-Forwarded-For": "203.0.113.1"}))
        assert token.get("/api/me", headers={"X-Forwarded-For": "203.0.113.2"}).status_code == 200
    finally:
        settings.CORTEX_TRUSTED_PROXIES = []
        _trusted_proxies.cache_clear()


def test_sign_in_guesses_from_one_address_are_throttled_whatever_forwarded_for_says(acme: dict[str, Any], settings: Any) -> None:
    settings.CORTEX_LOGIN_FAILURES_PER_ADDRESS = 3
    for n in range(3):
        guess = Client().post(
            "/login/",
            {"username": f"guess{n}@example.test", "password": "not-the-password"},
            headers={"X-Forwarded-For": f"203.0.113.{n}"},
        )
        assert guess.status_code == 200
    blocked = Client().post(
        "/login/",
        {"username": acme["manager"].user.email, "password": "pw-for-tests-1"},
        headers={"X-Forwarded-For": "198.51.100.9"},
    )
    assert blocked.status_code == 429 and int(blocked["Retry-After"]) > 0
