"""Entity extraction after a write (best effort) and the permission-filtered entity graph."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import assert_envelope

from memories.analysis.entities import heuristic_extract
from memories.llm import LLMUnavailable
from memories.llm.fake import ScriptedLLM
from memories.models import Entity, EntityMention, Memory, Relation
from memories.services import entities as entity_services
from memories.services.memories import MemoryDraft, memory_create, memory_redact
from memories.services.post_write import run_post_write

INCIDENT = (
    "Incident PAY-1423: checkout failures for customer Globex Corp. @dana.w paged the payments team; "
    "Maria Chen owns the acme/checkout-api repository and rolled back the release."
)


@pytest.fixture
def write(principal_of: Callable[..., Any], django_capture_on_commit_callbacks: Any) -> Callable[..., Memory]:
    def write(membership: Any, content: str, **fields: Any) -> Memory:
        with django_capture_on_commit_callbacks(execute=True):
            return memory_create(principal=principal_of(membership), draft=MemoryDraft(content=content, **fields)).memory

    return write


def kinds(entities: Any) -> set[tuple[str, str]]:
    return {(e.kind, e.name) for e in entities}


def test_the_heuristic_finds_mentions_repos_tickets_teams_and_names() -> None:
    found = heuristic_extract(
        INCIDENT + " The search team owns the search-indexer repository. We renewed with vendor Datadog. UTF-8 only."
    )
    assert kinds(found.entities) >= {
        ("ticket", "PAY-1423"),
        ("customer", "Globex Corp"),
        ("person", "@dana.w"),
        ("team", "payments team"),
        ("person", "Maria Chen"),
        ("repo", "acme/checkout-api"),
        ("team", "search team"),
        ("repo", "search-indexer"),
        ("vendor", "Datadog"),
    }
    assert not any(e.name.startswith("UTF") for e in found.entities)
    stated = {(r.source.name, r.kind, r.target.name) for r in found.relations if r.kind != "mentioned_with"}
    assert stated == {("Maria Chen", "owns", "acme/checkout-api"), ("search team", "owns", "search-indexer")}


def test_a_write_records_its_entities_and_relations_and_a_rerun_adds_nothing(acme: dict[str, Any], write: Any) -> None:
    memory = write(acme["employee"], INCIDENT, title="Checkout incident")
    assert kinds(Entity.objects.filter(mentions__memory=memory)) >= {("ticket", "PAY-1423"), ("repo", "acme/checkout-api")}
    assert Relation.objects.filter(memory=memory, kind="owns").count() == 1
    counts = (Entity.objects.count(), EntityMention.objects.count(), Relation.objects.count())
    run_post_write(memory.pk)
    assert (Entity.objects.count(), EntityMention.objects.count(), Relation.objects.count()) == counts
    # A second memory naming the same repo reuses the entity.
    second = write(acme["employee"], "Deploys of acme/checkout-api are paused until PAY-1423 is closed.")
    repo = Entity.objects.get(kind="repo", key="acme/checkout-api")
    assert set(repo.mentions.values_list("memory_id", flat=True)) == {memory.pk, second.pk}


def test_extraction_failing_never_affects_the_memory(acme: dict[str, Any], write: Any, monkeypatch: Any) -> None:
    def broken(_text: str) -> Any:
        raise RuntimeError("extractor bug")

    monkeypatch.setattr(entity_services, "extract", broken)
    memory = write(acme["employee"], INCIDENT)
    memory.refresh_from_db()
    assert memory.status == "active" and memory.content == INCIDENT
    assert run_post_write(memory.pk)["extract_entities"] == "failed"
    assert not EntityMention.objects.exists()


def test_with_an_llm_only_entities_named_in_the_text_are_kept(acme: dict[str, Any], write: Any, monkeypatch: Any) -> None:
    llm = ScriptedLLM(
        [
            {
                "entities": [
                    {"name": "Maria Chen", "kind": "person"},
                    {"name": "acme/checkout-api", "kind": "repo"},
                    {"name": "Initech", "kind": "customer"},  # not in the text
                ],
                "relations": [
                    {"source": "Maria Chen", "target": "acme/checkout-api", "kind": "owns"},
                    {"source": "Initech", "target": "Maria Chen", "kind": "pays"},
                ],
            }
        ],
        name="gemini",
        model="flash-test",
    )
    monkeypatch.setattr(entity_services, "get_llm", lambda: llm)
    memory = write(acme["employee"], INCIDENT)
    assert kinds(Entity.objects.all()) == {("person", "Maria Chen"), ("repo", "acme/checkout-api")}
    assert set(EntityMention.objects.filter(memory=memory).values_list("extractor", flat=True)) == {"gemini:flash-test"}
    assert list(Relation.objects.values_list("kind", flat=True)) == ["owns"]


def test_an_unavailable_llm_falls_back_to_the_heuristic(acme: dict[str, Any], write: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(entity_services, "get_llm", lambda: ScriptedLLM([LLMUnavailable("down", retryable=True)]))
    memory = write(acme["employee"], INCIDENT)
    assert set(EntityMention.objects.filter(memory=memory).values_list("extractor", flat=True)) == {"heuristic"}


def test_memory_detail_lists_its_entities(acme: dict[str, Any], write: Any, api: Any) -> None:
    memory = write(acme["employee"], INCIDENT)
    body = api(acme["employee"]).get(f"/api/memories/{memory.pk}").json()
    assert ("repo", "acme/checkout-api") in {(e["kind"], e["name"]) for e in body["entities"]}


def test_the_entity_page_lists_only_memories_the_caller_may_read(
    acme: dict[str, Any], write: Any, api: Any, outsider: Any
) -> None:
    public = write(acme["employee"], INCIDENT)
    secret = write(acme["manager"], "Globex Corp asked for a 30% discount on the renewal.", scope="sales")
    globex = Entity.objects.get(key="globex corp")

    as_manager = api(acme["manager"]).get(f"/api/entities/{globex.pk}").json()
    assert {m["id"] for m in as_manager["memories"]} == {str(public.pk), str(secret.pk)}
    as_employee = api(acme["employee"]).get(f"/api/entities/{globex.pk}").json()
    assert [m["id"] for m in as_employee["memories"]] == [str(public.pk)]
    assert_envelope(api(outsider).get(f"/api/entities/{globex.pk}"), 404, "NOT_FOUND")
    assert globex.pk not in {e["id"] for e in api(outsider).get("/api/entities").json()["results"]}


def test_an_entity_only_hidden_memories_mention_does_not_exist_for_others(acme: dict[str, Any], write: Any, api: Any) -> None:
    write(acme["manager"], "Initech Global signed a letter of intent with vendor Hooli Cloud.", scope="sales")
    hooli = Entity.objects.get(key="hooli cloud")
    assert_envelope(api(acme["employee"]).get(f"/api/entities/{hooli.pk}"), 404)
    assert "Hooli Cloud" not in {e["name"] for e in api(acme["employee"]).get("/api/entities", {"q": "hooli"}).json()["results"]}
    assert "Hooli Cloud" in {e["name"] for e in api(acme["manager"]).get("/api/entities", {"q": "hooli"}).json()["results"]}


def test_redacting_a_memory_forgets_the_entities_only_it_mentioned(acme: dict[str, Any], write: Any, principal_of: Any) -> None:
    memory = write(acme["employee"], "Maria Chen owns the acme/checkout-api repository.")
    write(acme["employee"], "acme/checkout-api deploys are paused.")
    memory_redact(principal=principal_of(acme["exec"]), memory_id=memory.pk, reason="personal data")
    assert not Entity.objects.filter(key="maria chen").exists()
    assert Entity.objects.filter(key="acme/checkout-api").exists()
    assert not EntityMention.objects.filter(memory=memory).exists() and not Relation.objects.filter(memory=memory).exists()
