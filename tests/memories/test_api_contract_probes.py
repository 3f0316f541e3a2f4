"""What an outside pass over the REST API with bad input found: each answer a 4xx error envelope that
changes nothing, never a 500, and the OpenAPI document naming every field an answer carries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import ApiClient
from support import assert_envelope, remember

from memories.models import Memory, RedactionRequest

# Half an emoji: valid JSON ("\ud83d"), but no UTF-8 text can hold it.
HALF_EMOJI = "\ud83d"
MISSING_ID = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def admin_client(acme: dict[str, Any], api: Callable[..., ApiClient]) -> ApiClient:
    """The admin's token, answering a crash as the server would (a 500 response) instead of raising it."""
    return ApiClient(api(acme["exec"]).secret, raise_request_exception=False)


@pytest.fixture
def openapi(client: Any, db: Any) -> dict[str, Any]:
    response = client.get("/api/schema/", headers={"Accept": "application/json"})
    assert response.status_code == 200
    return json.loads(response.content)


def _documented(openapi: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A response schema with its $ref followed."""
    while "$ref" in schema:
        schema = openapi["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _response_properties(openapi: dict[str, Any], path: str, method: str, status: int) -> dict[str, Any]:
    content = openapi["paths"][path][method]["responses"][str(status)]["content"]["application/json"]
    return _documented(openapi, content["schema"])["properties"]


# -- a value the API refuses is never echoed into an answer it cannot encode -----------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/api/conflicts/{MISSING_ID}/resolve", {"resolution": HALF_EMOJI}),
        (f"/api/redaction-requests/{MISSING_ID}/decide", {"decision": "a" + HALF_EMOJI}),
        (
            "/api/meeting-briefs",
            {
                "title": "Standup",
                "summary": "We decided to ship on Friday.",
                "decisions": [{"text": "Ship", "quote": "We decided", "source": HALF_EMOJI, "start": 0, "end": 10}],
            },
        ),
    ],
)
def test_a_choice_holding_half_an_emoji_is_a_400_envelope_not_a_500(
    admin_client: ApiClient, path: str, body: dict[str, Any]
) -> None:
    memories, requests = Memory.objects.count(), RedactionRequest.objects.count()

    envelope = assert_envelope(admin_client.post(path, body), 400, "VALIDATION_ERROR")

    # The refusal repeats the value, its half emoji as U+FFFD: what JSON can carry.
    assert "\ufffd" in envelope["message"] and "is not a valid choice" in envelope["message"]
    assert (Memory.objects.count(), RedactionRequest.objects.count()) == (memories, requests)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/memories", {"content": "A note with an odd field.", HALF_EMOJI: 1}),
        ("/api/recall", {"query": "deploys", HALF_EMOJI: 1}),
        ("/api/ask", {"question": "When do we deploy?", HALF_EMOJI: 1}),
    ],
)
def test_an_unknown_field_named_with_half_an_emoji_is_a_400_envelope_not_a_500(
    admin_client: ApiClient, path: str, body: dict[str, Any]
) -> None:
    memories = Memory.objects.count()

    assert_envelope(admin_client.post(path, body), 400, "VALIDATION_ERROR")

    assert Memory.objects.count() == memories


# -- the schema names every field an answer carries -------------------------------------------------------
@pytest.mark.django_db
def test_memory_detail_documents_every_field_it_answers(
    acme: dict[str, Any], admin_client: ApiClient, openapi: dict[str, Any]
) -> None:
    memory = remember(acme["exec"], "The deploy freeze runs from Dec 20 to Jan 2.", scope="engineering")
    body = admin_client.get(f"/api/memories/{memory.pk}").json()
    documented = _response_properties(openapi, "/api/memories/{memory_id}", "get", 200)

    assert set(body) <= set(documented), sorted(set(body) - set(documented))
    assert {"chunk_count", "history", "citation", "redaction", "conflicts", "entities"} <= set(documented)
    history = _documented(openapi, documented["history"]["items"])["properties"]
    assert set(body["history"][0]) == set(history)
    assert set(body["citation"]) == set(_documented(openapi, documented["citation"])["properties"])


@pytest.mark.django_db
def test_a_redaction_answer_documents_its_redaction(
    acme: dict[str, Any], admin_client: ApiClient, openapi: dict[str, Any]
) -> None:
    memory = remember(acme["exec"], "The staging password is hunter2.", scope="engineering")
    body = admin_client.post(f"/api/memories/{memory.pk}/redact", {"reason": "a leaked secret"}).json()
    documented = _response_properties(openapi, "/api/memories/{memory_id}/redact", "post", 200)

    assert set(body) <= set(documented), sorted(set(body) - set(documented))
    redaction = _documented(openapi, documented["redaction"])["properties"]
    assert set(body["redaction"]) == set(redaction)


# -- a scope the input names ------------------------------------------------------------------------------
@pytest.mark.django_db
def test_listing_a_scope_one_may_not_read_is_the_404_of_a_missing_one(
    acme: dict[str, Any], api: Callable[..., ApiClient]
) -> None:
    remember(acme["exec"], "Q3 quota is 1.2M.", scope="sales")
    employee = api(acme["employee"])  # granted engineering, not sales

    hidden = assert_envelope(employee.get("/api/memories", {"scope": "sales"}), 404, "UNKNOWN_SCOPE")
    missing = assert_envelope(employee.get("/api/memories", {"scope": "no-such-scope"}), 404, "UNKNOWN_SCOPE")

    assert hidden["message"].replace("sales", "X") == missing["message"].replace("no-such-scope", "X")
    # As recall answers a scope it cannot search.
    assert_envelope(employee.post("/api/recall", {"query": "quota", "scopes": ["sales"]}), 404, "UNKNOWN_SCOPE")
    assert api(acme["exec"]).get("/api/memories", {"scope": "sales"}).json()["results"][0]["content"] == "Q3 quota is 1.2M."


@pytest.mark.django_db
def test_a_supersede_that_changes_nothing_is_refused_and_the_memory_stays_current(
    acme: dict[str, Any], admin_client: ApiClient
) -> None:
    memory = remember(acme["exec"], "Deploys need two approvals.", scope="engineering")

    assert_envelope(admin_client.post(f"/api/memories/{memory.pk}/supersede", {}), 422, "NOTHING_TO_CHANGE")

    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE and Memory.objects.count() == 1
