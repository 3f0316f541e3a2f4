"""Retry and failure behaviour shared by every real provider: one retry on a
transient failure, none on a rejected request, LLMUnavailable in the end."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from support.stub_server import ANY_PATH, StubResponse, StubServer

from memories.llm.base import LLMInvalidOutput, LLMProvider, LLMUnavailable
from memories.llm.factory import build_llm

SECRET = "sk-test-do-not-leak"


@dataclass(frozen=True)
class Provider:
    name: str
    path_prefix: str  # where the SDK expects the API root under the stub
    ok: str  # fixture names
    overloaded: str
    overloaded_status: int
    rejected: str

    def build(self, stub_url: str, *, timeout: float = 5.0) -> LLMProvider:
        llm = build_llm(
            self.name,
            api_key=SECRET,
            base_url=f"{stub_url}{self.path_prefix}",
            timeout=timeout,
            retry_backoff=0.01,
        )
        assert llm is not None
        return llm


PROVIDERS = [
    Provider("openai", "/v1", "openai_chat_completion", "openai_error_500", 500, "openai_error_401"),
    Provider("anthropic", "", "anthropic_message_text", "anthropic_error_529", 529, "anthropic_error_401"),
    Provider("gemini", "", "gemini_generate_content", "gemini_error_503", 503, "gemini_error_401"),
]
ids = [provider.name for provider in PROVIDERS]


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
def test_one_transient_failure_is_retried_once_and_then_succeeds(
    provider: Provider, stub_server: StubServer, payload: Callable[[str], Any]
) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=provider.overloaded_status, json=payload(provider.overloaded)),
        StubResponse(json=payload(provider.ok)),
    )

    answer = provider.build(stub_server.url).generate("Summarise the meeting.")

    assert answer.text
    assert answer.provider == provider.name
    assert len(stub_server.received) == 2


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
def test_two_transient_failures_make_the_llm_unavailable(
    provider: Provider, stub_server: StubServer, payload: Callable[[str], Any]
) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=provider.overloaded_status, json=payload(provider.overloaded)),
        StubResponse(status=provider.overloaded_status, json=payload(provider.overloaded)),
        StubResponse(json=payload(provider.ok)),  # must never be reached
    )

    with pytest.raises(LLMUnavailable) as caught:
        provider.build(stub_server.url).generate("Summarise the meeting.")

    assert caught.value.retryable
    assert str(provider.overloaded_status) in str(caught.value)
    assert len(stub_server.received) == 2


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
def test_rate_limit_is_retried(provider: Provider, stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=429, json={"error": {"message": "Rate limit reached", "code": 429}}),
        StubResponse(json=payload(provider.ok)),
    )

    provider.build(stub_server.url).generate("Summarise the meeting.")

    assert len(stub_server.received) == 2


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
def test_rejected_key_is_unavailable_without_retry_and_without_the_key(
    provider: Provider, stub_server: StubServer, payload: Callable[[str], Any]
) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=401, json=payload(provider.rejected)),
        StubResponse(json=payload(provider.ok)),  # must never be reached
    )

    with pytest.raises(LLMUnavailable, match="rejected the API key") as caught:
        provider.build(stub_server.url).generate("Summarise the meeting.")

    assert not caught.value.retryable
    assert SECRET not in str(caught.value)
    assert len(stub_server.received) == 1


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
def test_other_client_errors_are_not_retried_and_carry_the_server_message(provider: Provider, stub_server: StubServer) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=404, json={"error": {"message": "model 'nope' not found", "code": 404}}),
    )

    with pytest.raises(LLMUnavailable, match="HTTP 404: model 'nope' not found") as caught:
        provider.build(stub_server.url).generate("Summarise the meeting.")

    assert not caught.value.retryable
    assert len(stub_server.received) == 1


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
def test_a_server_slower_than_the_timeout_makes_the_llm_unavailable(
    provider: Provider, stub_server: StubServer, payload: Callable[[str], Any]
) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload(provider.ok), delay=3.0),
        StubResponse(json=payload(provider.ok), delay=3.0),
    )

    with pytest.raises(LLMUnavailable, match="timed out") as caught:
        provider.build(stub_server.url, timeout=0.2).generate("Summarise the meeting.")

    assert caught.value.retryable
    # A timeout counts as transient: exactly one retry.
    assert len(stub_server.received) == 2


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
def test_an_unreachable_server_makes_the_llm_unavailable(provider: Provider) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    # Nothing listens on a port that was just released.
    with pytest.raises(LLMUnavailable, match="could not be reached") as caught:
        provider.build(f"http://127.0.0.1:{closed_port}").generate("Summarise the meeting.")

    assert caught.value.retryable


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
def test_missing_key_is_unavailable_without_a_request(provider: Provider, stub_server: StubServer) -> None:
    llm = build_llm(provider.name, api_key=None, base_url=f"{stub_server.url}{provider.path_prefix}")
    assert llm is not None

    with pytest.raises(LLMUnavailable, match="API_KEY is not set") as caught:
        llm.generate("Summarise the meeting.")

    assert not caught.value.retryable
    assert stub_server.received == []


@pytest.mark.parametrize("provider", PROVIDERS, ids=ids)
@pytest.mark.parametrize("body", [{"detail": "Not Found"}, "<html>Welcome</html>", []], ids=["other-api", "web-page", "list"])
def test_a_server_that_does_not_speak_the_api_gives_an_llm_error_not_a_crash(
    provider: Provider, body: Any, stub_server: StubServer
) -> None:
    # What a wrong base URL (a proxy's landing page, another service) looks like.
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=body),
    )

    with pytest.raises((LLMUnavailable, LLMInvalidOutput)):
        provider.build(stub_server.url).generate("Summarise the meeting.", json_schema={"type": "object"})

    assert len(stub_server.received) == 1
