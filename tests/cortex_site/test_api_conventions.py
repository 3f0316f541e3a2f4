"""The API's conventions: the error envelope for every status, request ids, no HTML under /api/."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client, override_settings
from support import assert_envelope

from cortex_site.api import PrincipalRateThrottle

pytestmark = pytest.mark.urls("support_urls")


@pytest.fixture
def member_client(make_org: Any, make_member: Any, api: Any) -> Any:
    return api(make_member(make_org()))


@pytest.mark.django_db
def test_every_response_carries_a_generated_request_id(member_client: Any) -> None:
    first = member_client.get("/api/me")
    second = member_client.get("/api/me")
    assert re.fullmatch(r"[0-9a-f]{32}", first["X-Request-ID"])
    assert first["X-Request-ID"] != second["X-Request-ID"]


@pytest.mark.django_db
def test_client_request_id_is_echoed_in_header_and_error_body(member_client: Any) -> None:
    ok = member_client.get("/api/me", headers={"X-Request-ID": "client-abc.123"})
    assert ok["X-Request-ID"] == "client-abc.123"
    error = member_client.get("/api/nope", headers={"X-Request-ID": "trace-42"})
    assert assert_envelope(error, 404)["request_id"] == "trace-42"


@pytest.mark.django_db
def test_unsafe_client_request_id_is_replaced(member_client: Any) -> None:
    response = member_client.get("/api/me", headers={"X-Request-ID": "bad id\n<script>"})
    assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])


def test_request_id_is_set_on_html_pages_too(client: Client, db: Any) -> None:
    assert client.get("/login/")["X-Request-ID"]


@pytest.mark.django_db
def test_unknown_api_path_is_a_json_404(member_client: Any) -> None:
    assert_envelope(member_client.get("/api/does-not-exist"), 404, "NOT_FOUND")


@pytest.mark.django_db
def test_wrong_method_is_405_envelope(member_client: Any) -> None:
    response = member_client.delete("/api/me")
    assert_envelope(response, 405, "METHOD_NOT_ALLOWED")


@pytest.mark.django_db
def test_unauthenticated_is_401_envelope() -> None:
    assert_envelope(Client().get("/api/scopes"), 401, "NOT_AUTHENTICATED")


@pytest.mark.django_db
def test_member_of_no_organization_is_403_envelope(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("lonely@example.test", password="pw-for-tests-1")
    client = Client()
    client.force_login(user)
    assert_envelope(client.get("/api/me"), 403, "NO_ORGANIZATION")


@pytest.mark.django_db
def test_session_api_write_without_csrf_is_403(make_org: Any, make_member: Any) -> None:
    member = make_member(make_org())
    client = Client(enforce_csrf_checks=True)
    client.force_login(member.user)
    assert client.get("/api/me").status_code == 200
    assert_envelope(client.post("/api/me", "{}", content_type="application/json"), 403, "PERMISSION_DENIED")


@pytest.mark.django_db
def test_malformed_json_is_400_envelope(member_client: Any) -> None:
    # Any JSON-accepting endpoint parses before it validates; /api/me accepts no POST, so use a view that does.
    from rest_framework.request import Request
    from rest_framework.test import APIRequestFactory
    from rest_framework.views import APIView

    class Echo(APIView):
        authentication_classes: list[Any] = []
        permission_classes: list[Any] = []

        def post(self, request: Request) -> Any:
            return request.data

    request = APIRequestFactory().post("/api/echo", "{not json", content_type="application/json")
    response = Echo.as_view()(request)
    response.render()
    assert response.status_code == 400
    assert json.loads(response.content)["error_code"] == "MALFORMED_REQUEST"


@pytest.mark.django_db
def test_wrong_content_type_is_415_envelope(member_client: Any, make_org: Any) -> None:
    response = member_client.post("/api/test-echo", "a=b", content_type="application/x-www-form-urlencoded")
    assert_envelope(response, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.django_db
def test_an_accept_header_without_json_is_a_documented_406_envelope(member_client: Any) -> None:
    response = member_client.get("/api/scopes", headers={"Accept": "application/xml"})
    assert_envelope(response, 406, "NOT_ACCEPTABLE")
    assert member_client.get("/api/scopes", headers={"Accept": "text/html, */*;q=0.1"}).status_code == 200
    schema = json.loads(Client().get("/api/schema/", headers={"Accept": "application/json"}).content)
    assert "406" in schema["paths"]["/api/scopes"]["get"]["responses"]


@pytest.mark.django_db
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024)
def test_oversized_body_is_413_envelope(member_client: Any) -> None:
    response = member_client.post("/api/test-echo", json.dumps({"text": "x" * 5000}))
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE")


@pytest.mark.django_db
def test_validation_error_is_400_envelope_with_field_details(member_client: Any) -> None:
    response = member_client.post("/api/test-echo", json.dumps({"text": ""}))
    body = assert_envelope(response, 400, "VALIDATION_ERROR")
    assert "text" in body["details"]["fields"]
    assert body["message"].startswith("text:")


@pytest.mark.django_db
def test_domain_conflict_is_409_envelope(member_client: Any) -> None:
    assert_envelope(member_client.post("/api/test-echo", json.dumps({"text": "conflict"})), 409, "TEST_CONFLICT")


@pytest.mark.django_db
def test_unexpected_crash_is_500_envelope_without_internals(member_client: Any) -> None:
    body = assert_envelope(member_client.post("/api/test-echo", json.dumps({"text": "crash"})), 500, "INTERNAL_ERROR")
    assert "ZeroDivisionError" not in json.dumps(body)


@pytest.mark.django_db
def test_unprocessable_is_422_envelope(member_client: Any) -> None:
    assert_envelope(member_client.post("/api/test-echo", json.dumps({"text": "unprocessable"})), 422, "TEST_UNPROCESSABLE")


@pytest.mark.django_db
def test_rate_limit_is_429_envelope_with_retry_after(member_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PrincipalRateThrottle, "THROTTLE_RATES", {"principal": "3/min"})
    statuses = [member_client.get("/api/me").status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    response = member_client.get("/api/me")
    body = assert_envelope(response, 429, "RATE_LIMITED")
    assert int(response["Retry-After"]) > 0
    assert body["details"]["retry_after_seconds"] > 0


# Routes that fetch one tenant object by id (url name, method, id keyword, which foreign object, body).
ONE_OBJECT_ROUTES = [
    ("api-memory", "get", "memory_id", "memory", None),
    ("api-memory", "patch", "memory_id", "memory", {"tags": ["x"]}),
    ("api-memory", "delete", "memory_id", "memory", None),
    ("api-memory-supersede", "post", "memory_id", "memory", {"content": "Changed."}),
    ("api-memory-redact", "post", "memory_id", "memory", {"reason": "x"}),
    ("api-memory-restore", "post", "memory_id", "memory", {}),
    ("api-memory-redaction-requests", "post", "memory_id", "memory", {"reason": "x"}),
    ("api-conflict", "get", "conflict_id", "conflict", None),
    ("api-conflict-resolve", "post", "conflict_id", "conflict", {"resolution": "keep_new"}),
    ("api-conflict-reopen", "post", "conflict_id", "conflict", {}),
    ("api-job", "get", "job_id", "job", None),
    ("api-entity", "get", "entity_id", "entity", None),
]
MISSING = {"memory": "00000000-0000-4000-8000-000000000000", "conflict": "00000000-0000-4000-8000-000000000001"}
MISSING |= {"job": "00000000-0000-4000-8000-000000000002", "entity": "999999999"}


@pytest.fixture
def foreign_objects(
    make_org: Any, make_member: Any, principal_of: Any, django_capture_on_commit_callbacks: Any
) -> dict[str, str]:
    """A memory, a conflict, a job and an entity of another organization, made by its own admin."""
    from memories.models import Conflict, Entity, Job, Organization
    from memories.services import jobs
    from memories.services.memories import MemoryDraft, memory_create

    globex = make_org("globex", "Globex")
    Organization.objects.filter(pk=globex.pk).update(conflict_policy="manual")
    admin = principal_of(make_member(globex, "Executive", admin=True))
    stored = []
    for content in ("Initech Corp pays net 30 on every invoice.", "Initech Corp pays net 60 on every invoice."):
        with django_capture_on_commit_callbacks(execute=True):
            stored.append(memory_create(principal=admin, draft=MemoryDraft(content=content, title="Initech terms")).memory)
    with django_capture_on_commit_callbacks(execute=False):
        job = jobs.job_create(principal=admin, kind=Job.Kind.EXTRACT_DECISIONS, payload={"summary": "We ship.", "transcript": ""})
    entity = Entity.objects.filter(organization=globex).values_list("pk", flat=True).first()
    assert entity is not None  # the post-write extraction found "Initech Corp"
    return {
        "memory": str(stored[0].pk),
        "conflict": str(Conflict.objects.get(organization=globex).pk),
        "job": str(job.pk),
        "entity": str(entity),
    }


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "method", "keyword", "kind", "body"), ONE_OBJECT_ROUTES)
def test_foreign_and_missing_look_the_same(
    name: str, method: str, keyword: str, kind: str, body: Any, foreign_objects: dict[str, str], member_client: Any
) -> None:
    """An object of another organization answers exactly like a missing one: the same 404 envelope,
    byte for byte apart from the request id. The routes are looked up by name, so a renamed or removed
    route fails here instead of turning this into a comparison of two unknown paths."""
    from django.urls import resolve, reverse

    foreign_path = reverse(name, kwargs={keyword: foreign_objects[kind]})
    missing_path = reverse(name, kwargs={keyword: MISSING[kind]})
    assert resolve(foreign_path).url_name == name

    def answer(path: str) -> dict[str, Any]:
        send = getattr(member_client, method)
        response = send(path) if body is None else send(path, body)
        envelope = assert_envelope(response, 404, "NOT_FOUND")
        envelope.pop("request_id")
        return envelope

    foreign, missing = answer(foreign_path), answer(missing_path)
    assert foreign == missing
    assert foreign_objects[kind] not in json.dumps(foreign)
    # The route's own "not found" (e.g. "Memory not found."), not the answer to a path no route matches.
    unknown = member_client.get("/api/does-not-exist").json()
    assert foreign["message"] != unknown["message"]


def test_security_headers_on_pages(client: Client, db: Any) -> None:
    response = client.get("/login/")
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.django_db
def test_openapi_schema_and_docs_are_served(member_client: Any, make_org: Any, make_member: Any) -> None:
    client = Client()
    client.force_login(make_member(make_org()).user)
    schema = client.get("/api/schema/", headers={"Accept": "application/json"})
    assert schema.status_code == 200
    assert "/api/scopes" in schema.content.decode()
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()
