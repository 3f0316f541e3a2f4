"""The write pipeline through POST /api/memories: validation, scope resolution, no write-up,
idempotency, chunking and embedding, one transaction, and nothing stored on failure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import assert_envelope

from audit.models import AuditEvent
from memories.embeddings.factory import get_embedder
from memories.models import EmbeddingSignature, Memory, MemoryChunk, SourceScopeRule


def _post(client: Any, **body: Any) -> Any:
    return client.post("/api/memories", body)


@pytest.mark.django_db
def test_remember_returns_the_memory_shape_with_resolution(acme: dict[str, Any], api: Any) -> None:
    response = _post(
        api(acme["manager"]),
        title="API Rate Limiting Policy",
        content="All external API endpoints must implement rate limiting.",
        scope="engineering",
        category="policy",
        source_url="https://github.com/acme/api/pull/123",
        tags=["API", "security", "api"],
        clearance_min="Employee",
        valid_from="2025-01-15T10:30:00Z",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) >= {
        "id",
        "title",
        "content",
        "scope",
        "category",
        "source",
        "source_url",
        "author",
        "tags",
        "clearance_min",
        "status",
        "valid_from",
        "valid_until",
        "created_at",
        "updated_at",
        "supersedes",
        "superseded_by",
        "scope_resolution",
        "deduplicated",
    }
    assert body["scope"] == "engineering"
    assert body["scope_resolution"] == "explicit"
    assert body["deduplicated"] is False
    assert body["tags"] == ["api", "security"]
    assert body["clearance_min"] == "Employee"
    assert body["valid_from"] == "2025-01-15T10:30:00Z"
    assert body["source"] == "API"
    assert body["author"] == {"id": str(acme["manager"].user.pk), "name": acme["manager"].user.display_name, "given_by": None}
    assert body["status"] == "active"
    memory = Memory.objects.get(pk=body["id"])
    chunk = MemoryChunk.objects.get(memory=memory)
    assert chunk.embedding is not None and len(chunk.embedding) == get_embedder().dim
    assert chunk.search_vector is not None
    assert (chunk.organization_id, chunk.scope_id, chunk.clearance_rank) == (
        memory.organization_id,
        memory.scope_id,
        memory.clearance_rank,
    )
    event = AuditEvent.objects.get(action="memory.create", target_id=body["id"])
    assert event.details["scope_resolution"] == "explicit"
    assert event.actor_token_id is not None


@pytest.mark.django_db
def test_title_is_derived_from_content_when_missing(acme: dict[str, Any], api: Any) -> None:
    body = _post(api(acme["employee"]), content="# Deploy freeze\n\nNo deploys during the Dec 20 - Jan 2 freeze.").json()
    assert body["title"] == "Deploy freeze"


@pytest.mark.django_db
def test_long_content_is_chunked_and_every_chunk_embedded(acme: dict[str, Any], api: Any) -> None:
    content = "\n\n".join(
        f"Paragraph {i}: " + "the dock controller retries the handshake before failing over. " * 12 for i in range(12)
    )
    body = _post(api(acme["employee"]), title="Dock runbook", content=content).json()
    chunks = list(MemoryChunk.objects.filter(memory_id=body["id"]).order_by("index"))
    assert len(chunks) > 3
    assert all(c.embedding is not None for c in chunks)
    assert all(content[c.char_start : c.char_end] == c.text for c in chunks)


@pytest.mark.django_db
def test_full_text_weighs_title_and_tags_above_the_body(acme: dict[str, Any], api: Any) -> None:
    from django.db import connection

    body = _post(api(acme["employee"]), title="Dock firmware", content="Rollouts pause on Fridays.", tags=["pathfinder"]).json()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.search_vector::text,
                   (setweight(to_tsvector('english', 'Dock firmware'), 'A')
                    || setweight(to_tsvector('english', 'pathfinder'), 'A')
                    || setweight(to_tsvector('english', c.text), 'B'))::text
              FROM memories_memorychunk AS c WHERE c.memory_id = %s
            """,
            [body["id"]],
        )
        stored, expected = cursor.fetchone()
    assert stored == expected
    assert "'dock':1A" in stored and "'pathfind':3A" in stored and "'friday':7B" in stored


# -- scope resolution --------------------------------------------------------------------------
@pytest.mark.django_db
def test_scope_resolution_order_explicit_then_source_rule_then_default(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["manager"])
    assert _post(client, content="explicit one", scope="sales", source="GitHub").json()["scope_resolution"] == "explicit"
    github = _post(client, content="merged PR: add retries", source="GitHub").json()
    assert (github["scope"], github["scope_resolution"]) == ("engineering", "source_rule")
    plain = _post(client, content="a plain note").json()
    assert (plain["scope"], plain["scope_resolution"]) == ("public-docs", "default")
    from memories.models import Scope

    SourceScopeRule.objects.create(
        organization=acme["org"], source="Slack", scope=Scope.objects.get(organization=acme["org"], slug="sales")
    )
    slack = _post(client, content="deal closed with Initech", source="Slack").json()
    assert (slack["scope"], slack["scope_resolution"]) == ("sales", "source_rule")


@pytest.mark.django_db
def test_github_default_rule_falls_back_to_public_docs_when_no_engineering_scope(
    make_org: Any, make_member: Any, api: Any
) -> None:
    member = make_member(make_org())
    body = _post(api(member), content="merged PR", source="GitHub").json()
    assert (body["scope"], body["scope_resolution"]) == ("public-docs", "default")


@pytest.mark.django_db
def test_source_rule_never_widens_a_refused_write(acme: dict[str, Any], api: Any) -> None:
    # The contractor reads engineering but cannot write it: a GitHub memory is refused, not moved to public-docs.
    response = _post(api(acme["contractor"]), content="merged PR by a contractor", source="GitHub")
    assert_envelope(response, 403, "SCOPE_NOT_WRITABLE")
    assert not Memory.objects.exists()


# -- no write-up ----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_scope_readable_but_not_writable_is_403(acme: dict[str, Any], api: Any) -> None:
    body = assert_envelope(_post(api(acme["contractor"]), content="x", scope="engineering"), 403, "SCOPE_NOT_WRITABLE")
    assert "engineering" in body["message"]
    assert_envelope(_post(api(acme["employee"]), content="x", scope="handbook"), 403, "SCOPE_NOT_WRITABLE")
    assert not Memory.objects.exists()


@pytest.mark.django_db
def test_invisible_granted_scope_answers_like_a_missing_one(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    hidden = assert_envelope(_post(client, content="x", scope="sales"), 404, "UNKNOWN_SCOPE")
    missing = assert_envelope(_post(client, content="x", scope="nope"), 404, "UNKNOWN_SCOPE")
    assert hidden["message"].replace("sales", "S") == missing["message"].replace("nope", "S")


@pytest.mark.django_db
def test_other_organizations_scope_is_unknown(acme: dict[str, Any], outsider: Any, api: Any) -> None:
    assert_envelope(_post(api(outsider), content="x", scope="engineering"), 404, "UNKNOWN_SCOPE")


@pytest.mark.django_db
def test_clearance_above_own_is_403_and_unknown_rung_is_400(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    assert_envelope(_post(client, content="x", scope="engineering", clearance_min="Executive"), 403, "CLEARANCE_ABOVE_OWN")
    body = assert_envelope(_post(client, content="x", clearance_min="Janitor"), 404, "UNKNOWN_CLEARANCE")
    assert "Contractor < Employee < Manager < Executive" in body["message"]
    assert _post(client, content="x", clearance_min="employee").json()["clearance_min"] == "Employee"
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_read_only_token_cannot_remember(acme: dict[str, Any], api: Any) -> None:
    assert_envelope(_post(api(acme["manager"], read_only=True), content="x"), 403, "TOKEN_READ_ONLY")
    assert not Memory.objects.exists()


@pytest.mark.django_db
def test_token_narrowed_to_one_scope_cannot_write_elsewhere(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["manager"], scope_slugs=["sales"])
    assert _post(client, content="pipeline review", scope="sales").status_code == 201
    assert_envelope(_post(client, content="x", scope="engineering"), 404, "UNKNOWN_SCOPE")


# -- idempotency ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_idempotency_key_retry_returns_the_original(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    first = _post(client, content="Deploys need two approvals.", idempotency_key="req-1")
    again = _post(client, content="Deploys need two approvals (retry with edits).", idempotency_key="req-1")
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["deduplicated"] is True
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_idempotency_keys_are_per_person(acme: dict[str, Any], api: Any) -> None:
    a = _post(api(acme["employee"]), content="note A", idempotency_key="same").json()
    b = _post(api(acme["manager"]), content="note B", idempotency_key="same").json()
    assert a["id"] != b["id"]


@pytest.mark.django_db
def test_exact_duplicate_in_the_same_scope_is_deduplicated(acme: dict[str, Any], api: Any) -> None:
    first = _post(api(acme["employee"]), content="On-call rotates weekly.", scope="engineering").json()
    second = _post(api(acme["manager"]), content="On-call rotates weekly.\n", scope="engineering")
    assert second.status_code == 200
    assert second.json()["id"] == first["id"]
    assert second.json()["deduplicated"] is True
    other_scope = _post(api(acme["manager"]), content="On-call rotates weekly.", scope="sales").json()
    assert other_scope["id"] != first["id"]


@pytest.mark.django_db
def test_duplicate_above_the_writers_clearance_is_not_revealed(acme: dict[str, Any], api: Any) -> None:
    secret = _post(api(acme["exec"]), content="Layoffs planned for Q3.", scope="engineering", clearance_min="Executive").json()
    response = _post(api(acme["employee"]), content="Layoffs planned for Q3.", scope="engineering")
    assert response.status_code == 201
    assert response.json()["id"] != secret["id"]
    assert response.json()["deduplicated"] is False


# -- bad input: clear errors, nothing stored ---------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"content": ""}, 400, "EMPTY_CONTENT"),
        ({"content": "   \n\t"}, 400, "EMPTY_CONTENT"),
        ({"title": "t"}, 400, "VALIDATION_ERROR"),
        ({"content": "x", "colour": "blue"}, 400, "VALIDATION_ERROR"),
        ({"content": "x", "valid_from": "yesterday"}, 400, "VALIDATION_ERROR"),
        (
            {"content": "x", "valid_from": "2025-02-01T00:00:00Z", "valid_until": "2025-01-01T00:00:00Z"},
            422,
            "INVALID_VALIDITY_WINDOW",
        ),
        ({"content": "x", "tags": ["has space"]}, 400, "INVALID_TAGS"),
        ({"content": "x", "tags": "notalist"}, 400, "VALIDATION_ERROR"),
        ({"content": "x", "category": "Big Decision!"}, 400, "INVALID_CATEGORY"),
        ({"content": "x", "source_url": "javascript:alert(1)"}, 400, "INVALID_SOURCE_URL"),
        ({"content": "x" * 200_001}, 413, "CONTENT_TOO_LONG"),
        ({"content": "x", "title": "t" * 301}, 413, "TITLE_TOO_LONG"),
    ],
)
def test_bad_input_gets_a_clear_error_and_stores_nothing(
    body: dict[str, Any], status: int, code: str, acme: dict[str, Any], api: Any, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
    response = api(acme["employee"]).post("/api/memories", json.dumps(body))
    assert_envelope(response, status, code)
    assert not Memory.objects.exists()
    assert not MemoryChunk.objects.exists()
    assert not AuditEvent.objects.filter(action="memory.create").exists()


@pytest.mark.django_db
def test_unknown_field_is_named_in_the_error(acme: dict[str, Any], api: Any) -> None:
    body = assert_envelope(_post(api(acme["employee"]), content="x", colour="blue"), 400, "VALIDATION_ERROR")
    assert "colour" in body["details"]["fields"]


# -- embedding failures -------------------------------------------------------------------------------
@pytest.mark.django_db
def test_embedding_provider_down_is_503_and_nothing_is_stored(acme: dict[str, Any], api: Any, use_embedder: Any) -> None:
    from cortex_site.embedded import free_port

    # The real OpenAI SDK against a closed loopback port: a genuine connection failure.
    use_embedder("openai", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    response = _post(api(acme["employee"]), content="Retry me later.")
    assert_envelope(response, 503, "EMBEDDING_UNAVAILABLE")
    assert not Memory.objects.exists()
    assert not MemoryChunk.objects.exists()
    assert not EmbeddingSignature.objects.exists()


@pytest.mark.django_db
def test_a_different_model_is_refused_for_writes_and_recall_naming_both(
    acme: dict[str, Any], api: Any, use_embedder: Any
) -> None:
    client = api(acme["employee"])
    assert _post(client, content="Stored with the first model.").status_code == 201
    use_embedder("hash", CORTEX_EMBED_DIM=256)
    write = assert_envelope(_post(client, content="Another note."), 503, "EMBEDDING_MODEL_MISMATCH")
    assert "384" in write["message"] and "256" in write["message"] and "cortex reembed" in write["message"]
    assert_envelope(client.post("/api/recall", {"query": "note"}), 503, "EMBEDDING_MODEL_MISMATCH")
    assert Memory.objects.count() == 1
