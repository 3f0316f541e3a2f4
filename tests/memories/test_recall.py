"""Recall: hybrid retrieval, the 70/30 blend, filters inside SQL, completeness under narrow visibility."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from support import assert_envelope

from audit.models import AuditEvent
from memories.access import Principal
from memories.models import Memory, Scope
from memories.selectors.recall import RecallQuery, recall
from memories.services.memories import MemoryDraft, memory_create


def _remember(client: Any, **body: Any) -> dict[str, Any]:
    response = client.post("/api/memories", body)
    assert response.status_code == 201, response.content
    return response.json()


def _ago(days: float) -> str:
    return (timezone.now() - timedelta(days=days)).isoformat()


def _results(client: Any, query: str, **extra: Any) -> list[dict[str, Any]]:
    response = client.post("/api/recall", {"query": query, **extra})
    assert response.status_code == 200, response.content
    return response.json()["results"]


@pytest.mark.django_db
def test_result_shape_and_score_formula(acme: dict[str, Any], api: Any, settings: Any) -> None:
    client = api(acme["employee"])
    _remember(
        client,
        title="Dock API retries",
        content="The Dock API client retries three times with jittered backoff.",
        scope="engineering",
        valid_from=_ago(30),
    )
    response = client.post("/api/recall", {"query": "dock api retries"})
    body = response.json()
    assert set(body) == {"results", "confident", "took_ms"}
    hit = body["results"][0]
    assert set(hit) == {
        "memory",
        "score",
        "relevance",
        "recency",
        "match",
        "confidence",
        "snippet",
        "chunk_index",
        "citation",
        "earlier_version",
    }
    assert 0 <= hit["match"] <= 1 and hit["confidence"] in {"strong", "partial", "weak"}
    assert 0 <= hit["relevance"] <= 1 and 0 <= hit["recency"] <= 1
    assert hit["score"] == pytest.approx(0.7 * hit["relevance"] + 0.3 * hit["recency"], abs=1e-5)
    assert hit["recency"] == pytest.approx(0.5, abs=0.01)  # 30 days = one half-life
    assert set(hit["citation"]) >= {"title", "source", "source_url", "author", "valid_from"}
    assert hit["citation"]["title"] == "Dock API retries"
    assert "retries" in hit["snippet"]


@pytest.mark.django_db
def test_half_life_is_configurable(acme: dict[str, Any], api: Any, settings: Any) -> None:
    settings.CORTEX_RECENCY_HALF_LIFE_DAYS = 10
    client = api(acme["employee"])
    _remember(client, content="Quarterly planning happens in the first week of the quarter.", valid_from=_ago(10))
    assert _results(client, "quarterly planning")[0]["recency"] == pytest.approx(0.5, abs=0.01)


@pytest.mark.django_db
def test_strong_exact_old_match_beats_recent_loosely_related_ones(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    exact = _remember(
        client,
        title="Pathfinder firmware rollback procedure",
        content="To roll back Pathfinder firmware run fwctl rollback --to 4.2 on the dock controller, then reboot the robot.",
        scope="engineering",
        valid_from=_ago(400),
    )
    for i in range(12):
        _remember(
            client,
            title=f"Weekly update {i}",
            content=f"Team notes {i}: the firmware team met; lunch was pizza; planning for week {i}.",
            valid_from=_ago(i % 3),
        )
    results = _results(client, "pathfinder firmware rollback procedure", limit=5)
    assert results[0]["memory"]["id"] == exact["id"]
    assert results[0]["recency"] < 0.01


@pytest.mark.django_db
def test_among_equally_relevant_memories_the_newer_ranks_first(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    older = _remember(
        client,
        title="On-call rotation",
        content="The SRE on-call rotation is weekly, handing over on Mondays.",
        scope="engineering",
        valid_from=_ago(200),
    )
    newer = _remember(
        client,
        title="On-call rotation",
        content="The SRE on-call rotation is weekly, handing over on Mondays.",
        valid_from=_ago(5),
    )
    results = _results(client, "SRE on-call rotation")
    assert [r["memory"]["id"] for r in results[:2]] == [newer["id"], older["id"]]
    assert results[0]["relevance"] == pytest.approx(results[1]["relevance"], abs=1e-6)


@pytest.mark.django_db
def test_exact_identifier_is_found(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    target = _remember(
        client, content="PLAT-1423: dock handshake times out with E_DOCK_TIMEOUT after the 4.2 upgrade.", scope="engineering"
    )
    _remember(client, content="PLAT-1432: update the dashboard colours.", scope="engineering")
    _remember(client, content="Dock handshakes are slow on Mondays.", scope="engineering")
    assert _results(client, "E_DOCK_TIMEOUT")[0]["memory"]["id"] == target["id"]
    assert _results(client, "PLAT-1423")[0]["memory"]["id"] == target["id"]


@pytest.mark.django_db
def test_unrelated_memories_are_not_returned(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    _remember(client, content="Expense reports are due on the fifth.")
    assert _results(client, "kubernetes ingress certificate") == []


@pytest.mark.django_db
def test_buried_fact_in_a_long_document_is_found_with_its_chunk_as_snippet(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    filler = "\n\n".join(
        f"Section {i}. The warehouse team reviews shelving layouts and pallet flows every quarter." for i in range(40)
    )
    doc = _remember(
        client,
        title="Warehouse handbook",
        content=filler + "\n\nThe fire marshal inspection code is FM-7731 and happens every March.\n\n" + filler,
    )
    hit = _results(client, "fire marshal inspection code")[0]
    assert hit["memory"]["id"] == doc["id"]
    assert hit["chunk_index"] > 0
    assert "FM-7731" in hit["snippet"]


@pytest.mark.django_db
def test_memory_appears_once_even_when_many_chunks_match(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    content = "\n\n".join(
        f"Robot battery swap procedure step {i}: remove the battery, check the battery contacts, insert the new battery."
        for i in range(30)
    )
    doc = _remember(client, title="Battery swap", content=content)
    ids = [r["memory"]["id"] for r in _results(client, "battery swap procedure")]
    assert ids.count(doc["id"]) == 1


@pytest.mark.django_db
def test_filters_scopes_category_tags_source(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["manager"])
    eng = _remember(
        client,
        content="Deploy window is Tuesday.",
        scope="engineering",
        category="policy",
        tags=["deploy", "ops"],
        source="GitHub",
    )
    sales = _remember(client, content="Deploy the new pricing Tuesday.", scope="sales", category="decision", tags=["deploy"])
    ids = lambda **f: {r["memory"]["id"] for r in _results(client, "deploy tuesday", **f)}  # noqa: E731
    assert ids() == {eng["id"], sales["id"]}
    assert ids(scopes=["sales"]) == {sales["id"]}
    assert ids(category="policy") == {eng["id"]}
    assert ids(tags=["deploy", "ops"]) == {eng["id"]}
    assert ids(tags=["deploy"]) == {eng["id"], sales["id"]}
    assert ids(source="github") == {eng["id"]}


@pytest.mark.django_db
def test_unreadable_scope_filter_is_unknown_like_a_missing_one(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    assert_envelope(client.post("/api/recall", {"query": "x", "scopes": ["sales"]}), 404, "UNKNOWN_SCOPE")
    assert_envelope(client.post("/api/recall", {"query": "x", "scopes": ["nope"]}), 404, "UNKNOWN_SCOPE")


@pytest.mark.django_db
def test_as_of_sees_the_past_validity_window(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    past = _remember(
        client, content="The VPN vendor is AnyConnect.", valid_from="2023-01-01T00:00:00Z", valid_until="2024-06-01T00:00:00Z"
    )
    current = _remember(client, content="The VPN vendor is Tailscale.", valid_from="2024-06-01T00:00:00Z")
    assert [r["memory"]["id"] for r in _results(client, "VPN vendor")] == [current["id"]]
    then = [r["memory"]["id"] for r in _results(client, "VPN vendor", as_of="2024-01-01T00:00:00Z")]
    assert then == [past["id"]]


@pytest.mark.django_db
def test_clearance_and_scope_filter_what_each_person_recalls(acme: dict[str, Any], outsider: Any, api: Any) -> None:
    top = _remember(
        api(acme["exec"]), content="Acquisition of Initech closes in May.", scope="engineering", clearance_min="Executive"
    )
    open_ = _remember(api(acme["exec"]), content="Initech integration starts with the dock API.", scope="engineering")
    sales = _remember(api(acme["exec"]), content="Initech renewal is worth $2M.", scope="sales")
    seen = {
        name: {r["memory"]["id"] for r in _results(api(acme[name]), "Initech")}
        for name in ("exec", "manager", "employee", "contractor")
    }
    assert seen["exec"] == {top["id"], open_["id"], sales["id"]}
    assert seen["manager"] == {open_["id"], sales["id"]}
    assert seen["employee"] == {open_["id"]}
    assert seen["contractor"] == {open_["id"]}
    assert _results(api(outsider), "Initech") == []
    assert {r["memory"]["id"] for r in _results(api(acme["exec"], scope_slugs=["sales"]), "Initech")} == {sales["id"]}


@pytest.mark.django_db
def test_each_recall_writes_one_audit_event(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    memory = _remember(client, content="Coffee machine on floor 3 is broken.")
    before = AuditEvent.objects.filter(action="memory.recall").count()
    _results(client, "coffee machine")
    events = AuditEvent.objects.filter(action="memory.recall").order_by("-id")
    assert events.count() == before + 1
    assert events[0].details["results"] == [memory["id"]]
    assert events[0].details["query"] == "coffee machine"


@pytest.mark.django_db
def test_get_form_matches_post(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["manager"])
    _remember(client, content="Hiring freeze until March.", scope="sales", tags=["hiring"])
    _remember(client, content="Hiring plan for engineering.", scope="engineering")
    post = [r["memory"]["id"] for r in _results(client, "hiring", scopes=["sales"], tags=["hiring"], limit=3)]
    get = client.get("/api/recall", {"q": "hiring", "scopes": "sales", "tags": "hiring", "limit": "3"})
    assert [r["memory"]["id"] for r in get.json()["results"]] == post


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"query": ""}, "EMPTY_QUERY"),
        ({"query": "   "}, "EMPTY_QUERY"),
        ({"query": "x" * 2001}, "QUERY_TOO_LONG"),
        ({"query": "x", "limit": 0}, "VALIDATION_ERROR"),
        ({"query": "x", "limit": 51}, "VALIDATION_ERROR"),
        ({"query": "x", "as_of": "not a date"}, "VALIDATION_ERROR"),
        ({"query": "x", "sort": "new"}, "VALIDATION_ERROR"),
        ({}, "VALIDATION_ERROR"),
    ],
)
def test_bad_recall_input(body: dict[str, Any], code: str, acme: dict[str, Any], api: Any) -> None:
    assert_envelope(api(acme["employee"]).post("/api/recall", body), 400, code)


@pytest.mark.django_db
@pytest.mark.parametrize("force_hnsw", [False, True])
def test_filtered_recall_is_complete_when_the_principal_sees_two_percent(
    force_hnsw: bool, make_org: Any, make_member: Any, make_scope: Any
) -> None:
    """245 memories in a scope the principal cannot read, 5 in one it can: asking for 5 returns all 5, also when
    the HNSW index is forced (its ef_search of 100 would hold ~2 visible chunks without iterative scans)."""
    org = make_org()
    make_scope(org, "hidden")
    make_scope(org, "visible")
    writer = Principal(make_member(org, "Executive", grants={"hidden": True, "visible": True}))
    reader = Principal(make_member(org, "Employee", grants={"visible": False}))
    visible_ids = set()
    for i in range(250):
        scope = "visible" if i % 50 == 7 else "hidden"
        draft = MemoryDraft(
            content=f"Robot fleet status report number {i}: battery health, dock usage and maintenance notes.", scope=scope
        )
        memory = memory_create(principal=writer, draft=draft).memory
        if scope == "visible":
            visible_ids.add(memory.pk)
    assert len(visible_ids) == 5
    with connection.cursor() as cursor:
        if force_hnsw:
            # Leave the planner no way but the HNSW index (DDL is rolled back with the test's transaction).
            # The unique (memory, index, organization) would serve `organization_id = %s` by a skip scan.
            # (Foreign keys checked now, as ALTER TABLE refuses a table with checks pending.)
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE memories_memorychunk DROP CONSTRAINT chunk_index_unique")
            cursor.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories_memorychunk' "
                "AND indexdef LIKE '%%USING btree%%' AND indexname NOT LIKE '%%pkey'"
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP INDEX "{name}"')
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("SET enable_bitmapscan = off")
        cursor.execute("ANALYZE memories_memorychunk")
    try:
        result = recall(reader, RecallQuery(query="robot fleet status report", limit=5))
        if force_hnsw:
            with connection.cursor() as cursor:
                cursor.execute("SELECT embedding::text FROM memories_memorychunk LIMIT 1")
                (probe,) = cursor.fetchone()
                cursor.execute(
                    "EXPLAIN SELECT id FROM memories_memorychunk c WHERE c.organization_id = %s AND c.scope_id = ANY(%s) "
                    "ORDER BY c.embedding <=> %s::vector LIMIT 40",
                    [org.pk, list(reader.readable_scope_ids), probe],
                )
                assert "chunk_embedding_hnsw" in " ".join(row[0] for row in cursor.fetchall())
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_bitmapscan")
    assert {hit.memory.pk for hit in result.hits} == visible_ids


@pytest.mark.django_db
def test_every_hit_is_rechecked_against_the_principal(acme: dict[str, Any], api: Any) -> None:
    """Defence in depth: even if a chunk's denormalised columns drifted, the memory row decides."""
    from memories.models import MemoryChunk

    writer = api(acme["exec"])
    secret = _remember(writer, content="Board meeting: reorg of the dock team.", scope="engineering", clearance_min="Executive")
    # Simulate drift: the chunk claims the lowest clearance while the memory says Executive.
    MemoryChunk.objects.filter(memory_id=secret["id"]).update(clearance_rank=0)
    assert _results(api(acme["contractor"]), "board meeting reorg dock team") == []


@pytest.mark.django_db
def test_superseded_and_redacted_memories_are_not_recalled(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    old = _remember(client, content="Printer on floor 2 uses driver v1.")
    _new = client.post(f"/api/memories/{old['id']}/supersede", {"content": "Printer on floor 2 uses driver v2."}).json()
    gone = _remember(client, content="Printer on floor 4 password is in the vault.")
    client.post(f"/api/memories/{gone['id']}/redact", {"reason": "sensitive"})
    statuses = {r["memory"]["status"] for r in _results(client, "printer floor driver")}
    assert statuses == {"active"}
    assert Memory.objects.filter(status="superseded").count() == 1


@pytest.mark.django_db
def test_scopes_listing_for_recall_clients(acme: dict[str, Any], api: Any) -> None:
    rows = api(acme["contractor"]).get("/api/scopes").json()["results"]
    assert {(r["slug"], r["can_write"]) for r in rows} == {("engineering", False), ("public-docs", True), ("handbook", False)}
    assert Scope.objects.filter(organization=acme["org"]).count() == 4


@pytest.mark.django_db
def test_a_match_on_an_earlier_version_leads_to_the_current_one(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    old = _remember(
        client,
        title="Support tooling",
        content="All customer tickets live in Zendesk; phone calls are logged by hand.",
        valid_from=_ago(400),
    )
    new = client.post(
        f"/api/memories/{old['id']}/supersede",
        {
            "title": "Support moved to Freshdesk",
            "content": "We are live on Freshdesk now; macros were migrated and phones are built in.",
        },
    ).json()

    results = _results(client, "where do customer tickets live")

    # The current version answers, with the earlier one that matched named; the earlier one itself is not a result.
    assert [r["memory"]["id"] for r in results] == [new["id"]]
    assert results[0]["earlier_version"] == {"id": old["id"], "title": "Support tooling"}
    assert "Freshdesk" in results[0]["snippet"]
    # Without an earlier version in play, the field is null.
    plain = _remember(client, content="The office coffee machine is descaled every Friday.")
    assert [(r["memory"]["id"], r["earlier_version"]) for r in _results(client, "coffee machine descaled")] == [
        (plain["id"], None)
    ]


@pytest.mark.django_db
def test_an_earlier_version_leads_only_where_the_reader_may_follow(
    acme: dict[str, Any], api: Any, outsider: Any, principal_of: Any
) -> None:
    from memories.services.memories import memory_supersede_with_existing

    public_old = _remember(
        api(acme["exec"]), content="Visitor badges are printed at the front desk on floor 1.", scope="public-docs"
    )
    sales_new = _remember(api(acme["exec"]), content="Reception now hands out QR passes from the lobby kiosk.", scope="sales")
    memory_supersede_with_existing(
        loser_id=public_old["id"], winner_id=sales_new["id"], actor=principal_of(acme["exec"]).actor, reason="test"
    )
    secret_old = _remember(
        api(acme["exec"]), content="Parking permits for the Smallman lot come from Lena in facilities.", scope="sales"
    )
    public_new = _remember(
        api(acme["exec"]), content="Questions about the building go to the workplace team.", scope="public-docs"
    )
    memory_supersede_with_existing(
        loser_id=secret_old["id"], winner_id=public_new["id"], actor=principal_of(acme["exec"]).actor, reason="test"
    )

    # The contractor reads the old badge note but not its sales successor: nothing to show.
    assert _results(api(acme["contractor"]), "visitor badges printed front desk") == []
    # An executive follows the same chain.
    followed = _results(api(acme["exec"]), "visitor badges printed front desk")
    assert followed[0]["memory"]["id"] == sales_new["id"] and followed[0]["earlier_version"]["id"] == public_old["id"]
    # A version the reader cannot see lends nothing to one they can (no hint of what it said).
    hits = _results(api(acme["contractor"]), "parking permits Smallman lot Lena facilities")
    assert all(r["earlier_version"] is None for r in hits)
    assert _results(api(outsider), "visitor badges printed front desk") == []


@pytest.mark.django_db
def test_many_earlier_versions_do_not_crowd_other_memories_out(acme: dict[str, Any], api: Any) -> None:
    """An item edited many times (a synced page, say) leaves many superseded versions; they may lead
    to their current version but must not take the places of other current memories."""
    client = api(acme["employee"])
    item = _remember(client, content="Deploy window: production deploys happen on Tuesday afternoons, revision 0.")
    for revision in range(1, 46):
        item = client.post(
            f"/api/memories/{item['id']}/supersede",
            {"content": f"Deploy window: production deploys happen on Tuesday afternoons, revision {revision}."},
        ).json()
    others = [
        _remember(client, content="Deploy checklist: production deploys need a green build and a rollback plan."),
        _remember(client, content="Deploy freeze: no production deploys during the last week of December."),
    ]

    results = _results(client, "when do production deploys happen", limit=3)

    assert Memory.objects.filter(status="superseded").count() == 45
    assert {r["memory"]["id"] for r in results} == {item["id"], *(o["id"] for o in others)}
