"""The OpenAPI document is the API's contract: schemathesis finds no failure, and the failures an
outside pass found stay fixed (undocumented statuses, schema-valid input refused, schema-violating
input accepted, a response unlike its schema).

The full run — every phase, a bigger budget, every principal — is `make reliability`
(bench/reliability/r20_schema.py); here a small budget keeps `make test` fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from support import assert_envelope, remember, signed_in
from support.asgi_client import asgi_post
from support.openapi_contract import run_schemathesis, seed_contract_org

from cortex_site.api import PrincipalRateThrottle
from cortex_site.api_schema import ENVELOPE


@pytest.fixture
def openapi(client: Any, db: Any) -> dict[str, Any]:
    response = client.get("/api/schema/", headers={"Accept": "application/json"})
    assert response.status_code == 200
    return json.loads(response.content)


def _response_validator(openapi: dict[str, Any], path: str, method: str, status: int) -> Draft202012Validator:
    """A validator for one documented response body (OpenAPI 3.0's `nullable` read as JSON Schema's null type)."""

    def nullable(node: Any) -> Any:
        if isinstance(node, dict):
            node = {key: nullable(value) for key, value in node.items()}
            if node.pop("nullable", False):
                return {"anyOf": [node, {"type": "null"}]}
            return node
        return [nullable(item) for item in node] if isinstance(node, list) else node

    document = nullable({"components": openapi["components"]})
    registry = Registry().with_resource("urn:cortex", Resource.opaque(document))
    schema = openapi["paths"][path][method]["responses"][str(status)]["content"]["application/json"]["schema"]
    return Draft202012Validator(
        json.loads(json.dumps(nullable(schema)).replace('"#/components', '"urn:cortex#/components')), registry=registry
    )


# -- the run ------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_no_failure_in_any_operation(
    live_server: Any, stub_server: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    # The contract is under test, not the rate limits: raise them so no case is answered 429.
    monkeypatch.setattr(PrincipalRateThrottle, "THROTTLE_RATES", {"principal": "1000000/min"})
    settings.CORTEX_LOGIN_FAILURES_PER_ADDRESS = 1_000_000
    tokens = seed_contract_org(stub_url=stub_server.url)
    for principal in ("admin", "read_only"):
        run = run_schemathesis(
            live_server.url, principal=principal, token=tokens[principal], max_examples=3, phases="examples,fuzzing", workers=2
        )
        assert run.operations >= 39 and run.cases > run.operations, run.output[-3000:]
        assert run.clean, "\n".join([principal, *run.failures, *run.errors, run.output[-20000:]])


# -- the document -------------------------------------------------------------------------------------
def test_every_operation_documents_the_error_envelope_for_the_statuses_it_can_answer(openapi: dict[str, Any]) -> None:
    assert set(openapi["components"]["schemas"][ENVELOPE]["required"]) == {"error_code", "message", "request_id", "details"}
    checked = 0
    for path, item in openapi["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            expected = {"401", "429", "503"}
            if "{" in path:
                expected |= {"404"}
            if "requestBody" in operation or any(p["in"] == "query" for p in operation.get("parameters", [])):
                expected |= {"400", "404"}
            if method in ("post", "patch"):
                expected |= {"413", "415"}
            if method != "get" and path not in (
                "/api/recall",
                "/api/ask",
                "/api/memories/extract-decisions",
                "/api/cron/connectors",
            ):
                expected |= {"409"}
            assert expected <= set(responses), (method, path, sorted(expected - set(responses)))
            for code in expected:
                schema = responses[code]["content"]["application/json"]["schema"]
                assert schema == {"$ref": f"#/components/schemas/{ENVELOPE}"}, (method, path, code)
            checked += 1
    assert checked >= 39


def test_query_parameters_are_typed_and_bounded_as_the_api_validates_them(openapi: dict[str, Any]) -> None:
    def parameter(path: str, name: str) -> dict[str, Any]:
        found = [p for p in openapi["paths"][path]["get"]["parameters"] if p["name"] == name]
        assert found, (path, name)
        return found[0]["schema"]

    assert parameter("/api/entities", "limit") == {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}
    assert parameter("/api/memories", "limit")["maximum"] == 100
    assert sorted(parameter("/api/entities", "kind")["enum"]) == [
        "customer",
        "other",
        "person",
        "project",
        "repo",
        "team",
        "ticket",
        "vendor",
    ]
    assert sorted(parameter("/api/conflicts", "status")["enum"]) == ["all", "dismissed", "open", "resolved"]
    assert sorted(parameter("/api/memories", "status")["enum"]) == ["active", "all", "redacted", "superseded"]


def test_request_bodies_refuse_unknown_fields_and_blank_required_text(openapi: dict[str, Any]) -> None:
    schemas = openapi["components"]["schemas"]
    create = schemas["MemoryCreateInputRequest"]
    assert create["additionalProperties"] is False
    assert create["properties"]["content"]["minLength"] == 1
    assert "pattern" in create["properties"]["content"]  # whitespace only is EMPTY_CONTENT
    assert schemas["RedactInputRequest"]["properties"]["reason"]["minLength"] == 1


# -- the failures the outside pass found ----------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("limit", ["2.2e-308", "0", "-1", "201", "null", "", "5.0"])
def test_a_limit_that_is_not_a_whole_number_in_range_is_refused(
    acme: dict[str, Any], api: Callable[..., Any], limit: str
) -> None:
    body = assert_envelope(api(acme["employee"]).get(f"/api/entities?limit={limit}"), 400, "INVALID_LIMIT")
    assert body["details"] == {"maximum": 200}


@pytest.mark.django_db
def test_a_limit_given_twice_is_refused_and_one_in_range_is_used(acme: dict[str, Any], api: Callable[..., Any]) -> None:
    client = api(acme["employee"])
    for number in range(3):
        remember(acme["employee"], f"Runbook step {number}: restart the ingest worker.", scope="engineering")
    assert_envelope(client.get("/api/memories?limit=1&limit=2"), 400, "INVALID_LIMIT")
    assert_envelope(client.get("/api/memories?limit=101"), 400, "INVALID_LIMIT")
    page = client.get("/api/memories?limit=2")
    assert page.status_code == 200 and len(page.json()["results"]) == 2 and page.json()["next"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/api/entities?kind=galaxy", "INVALID_KIND"),
        ("/api/entities?kind=", "INVALID_KIND"),
        ("/api/conflicts?kind=galaxy", "INVALID_KIND"),
        ("/api/conflicts?status=AAA", "INVALID_STATUS"),
        ("/api/redaction-requests?status=", "INVALID_STATUS"),
        ("/api/memories?status=gone", "INVALID_STATUS"),
    ],
)
def test_a_value_outside_an_enum_is_a_400_envelope_not_a_200(
    acme: dict[str, Any], api: Callable[..., Any], path: str, code: str
) -> None:
    assert_envelope(api(acme["employee"]).get(path), 400, code)


@pytest.mark.django_db
def test_scopes_answer_the_documented_list_shape(
    acme: dict[str, Any], api: Callable[..., Any], openapi: dict[str, Any], outsider: Any
) -> None:
    validator = _response_validator(openapi, "/api/scopes", "get", 200)
    response = api(acme["employee"]).get("/api/scopes")
    assert response.status_code == 200
    assert not list(validator.iter_errors(response.json()))
    slugs = {row["slug"] for row in response.json()["results"]}
    assert {"engineering", "handbook"} <= slugs and "sales" not in slugs  # granted and all-members, not the rest
    foreign = api(outsider).get("/api/scopes")
    assert not list(validator.iter_errors(foreign.json()))
    assert not {"engineering", "sales", "handbook"} & {row["slug"] for row in foreign.json()["results"]}


@pytest.mark.django_db
def test_connectors_and_redaction_requests_answer_their_documented_shapes(
    acme: dict[str, Any], api: Callable[..., Any], openapi: dict[str, Any], outsider: Any
) -> None:
    for path in ("/api/connectors", "/api/redaction-requests"):
        for who in (acme["exec"], acme["contractor"], outsider):
            response = api(who).get(path)
            assert response.status_code == 200
            assert not list(_response_validator(openapi, path, "get", 200).iter_errors(response.json())), path


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/recall", {"query": "deploy", "tags": [0]}),
        ("/api/recall", {"query": "deploy", "limit": "5"}),
        ("/api/memories", {"content": "The freeze starts Friday.", "scope": "engineering", "tags": [7]}),
    ],
)
def test_json_values_of_the_wrong_type_are_refused_not_coerced(
    acme: dict[str, Any], api: Callable[..., Any], path: str, body: dict[str, Any]
) -> None:
    assert_envelope(api(acme["employee"]).post(path, body), 400, "VALIDATION_ERROR")


@pytest.mark.django_db
def test_a_boolean_given_as_a_number_is_refused_and_nothing_is_redacted(acme: dict[str, Any], api: Callable[..., Any]) -> None:
    memory = remember(acme["employee"], "The staging password rotates every ninety days.", scope="engineering")
    assert_envelope(api(acme["employee"]).post(f"/api/memories/{memory.pk}/redact", {"reason": "wrong", "urgent": 0}), 400)
    memory.refresh_from_db()
    assert memory.status == "active"


@pytest.mark.django_db
def test_a_scope_the_caller_cannot_see_is_a_404_like_a_missing_one(
    acme: dict[str, Any], api: Callable[..., Any], outsider: Any
) -> None:
    hidden = assert_envelope(api(acme["employee"]).post("/api/recall", {"query": "x", "scopes": ["sales"]}), 404, "UNKNOWN_SCOPE")
    missing = assert_envelope(api(acme["employee"]).post("/api/recall", {"query": "x", "scopes": ["nope"]}), 404, "UNKNOWN_SCOPE")
    assert hidden["message"].replace("sales", "X") == missing["message"].replace("nope", "X")
    assert_envelope(api(outsider).post("/api/recall", {"query": "x", "scopes": ["engineering"]}), 404, "UNKNOWN_SCOPE")


@pytest.mark.django_db
def test_a_repeated_wait_query_parameter_is_refused(acme: dict[str, Any], api: Callable[..., Any]) -> None:
    response = api(acme["employee"]).post("/api/memories/extract-decisions?wait=null&wait=null", {"summary": "We decided."})
    assert_envelope(response, 400, "INVALID_WAIT")


@pytest.mark.django_db
def test_an_empty_extract_decisions_body_is_documented_as_refused_and_is(
    openapi: dict[str, Any], acme: dict[str, Any], api: Callable[..., Any]
) -> None:
    # The body needs a summary or a transcript (anyOf), so an absent body is not schema-valid either.
    body = openapi["paths"]["/api/memories/extract-decisions"]["post"]["requestBody"]
    assert body["required"] is True
    assert_envelope(api(acme["employee"]).post("/api/memories/extract-decisions"), 400, "EMPTY_INPUT")


def test_extract_decisions_documents_its_bounded_wait(openapi: dict[str, Any]) -> None:
    operation = openapi["paths"]["/api/memories/extract-decisions"]["post"]
    [wait] = [p for p in operation["parameters"] if p["name"] == "wait"]
    assert (wait["schema"]["minimum"], wait["schema"]["maximum"]) == (0, 60)
    assert {"200", "202"} <= set(operation["responses"])


def test_meeting_brief_tags_are_documented_as_a_memorys_tags(openapi: dict[str, Any]) -> None:
    # schemathesis found a schema-valid tag (control characters) refused as INVALID_TAGS.
    schemas = openapi["components"]["schemas"]
    assert schemas["MeetingBriefInputRequest"]["properties"]["tags"] == schemas["MemoryCreateInputRequest"]["properties"]["tags"]


@pytest.mark.django_db
def test_a_meeting_brief_tag_outside_the_documented_pattern_is_a_400_and_stores_nothing(
    acme: dict[str, Any], api: Callable[..., Any]
) -> None:
    from memories.models import Memory

    before = Memory.objects.count()
    response = api(acme["employee"]).post(
        "/api/meeting-briefs", {"title": "Standup", "summary": "We decided to ship.", "tags": ["U\x1dB\x1b S"]}
    )
    # Refused as a memory's tag is (the schema says so now, so a 400 is the documented answer).
    assert_envelope(response, 400, "INVALID_TAGS")
    assert Memory.objects.count() == before


# Links on both sides of the rule (validation.clean_source_url): blank, http(s) with a host, at
# most 2,000 characters once stripped — and the ones schemathesis and an outside pass sent.
SOURCE_URLS = {
    "": True,
    "   ": True,
    "https://github.com/acme/api/pull/1": True,
    " HTTP://wiki.acme.test/a page ": True,
    "https://x" + "a" * 1991: True,
    "http://x" + "a" * 1992: True,
    "https://x" + "a" * 1992: False,
    "http://x" + "a" * 1993: False,
    "P_F\u00ca": False,
    "ftp://files.acme.test/a": False,
    "http://": False,
    "http:// ": False,
    "https:///path": False,
    "http://[not-an-ipv6": False,  # urlsplit raises on it: a 400, never a 500
}


def test_the_documented_source_url_pattern_says_what_the_api_accepts(openapi: dict[str, Any]) -> None:
    import re

    from cortex_site.errors import ValidationFailed
    from memories.services.memories import clean_source_url

    pattern = re.compile(openapi["components"]["schemas"]["MemoryCreateInputRequest"]["properties"]["source_url"]["pattern"])
    for url, accepted in SOURCE_URLS.items():
        assert bool(pattern.search(url)) is accepted, url[:40]
        try:
            clean_source_url(url)
        except ValidationFailed:
            assert not accepted, url[:40]
        else:
            assert accepted, url[:40]


@pytest.mark.django_db
def test_a_source_url_the_schema_refuses_is_a_400_and_stores_nothing(acme: dict[str, Any], api: Callable[..., Any]) -> None:
    from memories.models import Memory

    before = Memory.objects.count()
    for url in ("P_F\u00ca", "http://[not-an-ipv6"):
        response = api(acme["employee"]).post("/api/memories", {"content": "A link to somewhere.", "source_url": url})
        assert_envelope(response, 400, "INVALID_SOURCE_URL")
    assert Memory.objects.count() == before


@pytest.mark.django_db(transaction=True)
def test_a_path_holding_an_encoded_newline_reaches_django_and_its_json_envelope() -> None:
    # Through the application `make run` serves: such a path used to stop at the router in front of
    # Django (its Mount("/") did not match it) with a plain-text 404 no client could parse.
    from cortex_site.asgi import create_application

    answer = asgi_post(
        create_application(), "/api/memories/p\n1/redact", headers=[], chunks=0, raw_path=b"/api/memories/p%0A1/redact"
    )
    # Django's envelope (asgi_post checks the JSON content type): unauthenticated, so a 401.
    assert answer["status"] == 401 and answer["json"]["error_code"] == "NOT_AUTHENTICATED"
    assert answer["json"]["request_id"] == answer["headers"][b"x-request-id"].decode()


def test_every_free_text_query_parameter_is_documented_without_nul(openapi: dict[str, Any]) -> None:
    free_text = [
        (path, parameter["name"], parameter["schema"])
        for path, item in openapi["paths"].items()
        for operation in item.values()
        if isinstance(operation, dict)
        for parameter in operation.get("parameters", [])
        if parameter.get("in") == "query" and parameter["schema"].get("type") == "string"
    ]
    assert ("/api/entities", "q", {"type": "string", "pattern": "^[^\\x00]*$"}) in free_text
    assert all({"enum", "format", "pattern"} & schema.keys() for _path, _name, schema in free_text), free_text


@pytest.mark.django_db
def test_a_nul_in_a_query_parameter_is_a_400_not_a_500(acme: dict[str, Any], api: Callable[..., Any]) -> None:
    # schemathesis sent GET /api/entities?q=<…\x00…> and PostgreSQL refused the text: a 500.
    member, admin = api(acme["employee"]), api(acme["exec"])
    for response in (
        member.get("/api/entities", {"q": "a\x00b"}),
        member.get("/api/memories", {"tag": "\x00"}),
        member.get("/api/recall", {"q": "launch\x00"}),
        admin.get("/api/audit", {"actor": "x\x00"}),
    ):
        body = assert_envelope(response, 400, "INVALID_QUERY")
        assert "\x00" not in json.dumps(body)
    # Pages stay lenient (tests/memories/test_ui_memories.py: a cursor that is not ours starts at the
    # top): their NULs are dropped, so one pasted into the search box is no error either (it was a 500).
    page = signed_in(acme["employee"]).get("/memories/", {"q": "launch\x00 plan", "cursor": "x\x00"})
    assert page.status_code == 200


@pytest.mark.django_db
def test_a_blank_as_of_is_refused_as_the_schema_says(acme: dict[str, Any], api: Callable[..., Any]) -> None:
    # schemathesis (narrowed token): GET /api/recall?as_of= answered 200 although as_of is a date-time.
    client = api(acme["employee"])
    assert_envelope(client.get("/api/recall", {"q": "launch", "as_of": ""}), 400)
    assert client.get("/api/recall", {"q": "launch", "as_of": "2025-01-15T00:00:00Z"}).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/audit", "/api/audit/export"])
def test_a_blank_audit_outcome_means_any_as_the_schema_says(
    openapi: dict[str, Any], acme: dict[str, Any], api: Callable[..., Any], path: str
) -> None:
    # schemathesis (admin): GET /api/audit/export?outcome= answered 200 where the schema's enum had no blank.
    (outcome,) = [p for p in openapi["paths"][path]["get"]["parameters"] if p["name"] == "outcome"]
    assert "" in outcome["schema"]["enum"] and "ok" in outcome["schema"]["enum"]
    client = api(acme["exec"])
    assert client.get(path, {"outcome": ""}).status_code == 200
    assert_envelope(client.get(path, {"outcome": "maybe"}), 400, "INVALID_OUTCOME")
