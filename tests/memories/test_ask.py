"""Ask: an answer composed from the asker's visible memories, every sentence cited — REST and the
Ask page, with principals who may not read the answer and an outsider who must see nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from support import remember, signed_in

from audit.models import AuditEvent
from memories.analysis.answers import Source, extractive_answer

pytestmark = pytest.mark.django_db


@pytest.fixture
def knowledge(acme: dict[str, Any]) -> dict[str, Any]:
    return {
        "limits": remember(
            acme["employee"],
            "The public API allows 100 requests per minute per key. Bursts above that get HTTP 429 with Retry-After. "
            "Keys are issued by the platform team.",
            title="Public API rate limits",
            scope="engineering",
        ),
        "lunch": remember(acme["employee"], "The team lunch is on Fridays at noon in the atrium.", title="Team lunch"),
        "budget": remember(
            acme["exec"],
            "The leadership offsite budget is 50,000 dollars, approved by the board in March.",
            title="Offsite budget",
            scope="sales",
            clearance_min="Executive",
        ),
    }


def _ask(client: Client, question: str, **extra: Any) -> Any:
    return client.post("/api/ask", {"question": question, **extra}, content_type="application/json")


def test_an_answerable_question_is_answered_from_cited_visible_memories(acme: dict[str, Any], knowledge: dict[str, Any]) -> None:
    body = _ask(signed_in(acme["employee"]), "How many requests per minute does the public API allow?").json()
    assert body["confident"] is True
    assert body["composer"] == "extractive"
    assert "100 requests per minute" in body["answer"]
    numbers = {s["number"]: s for s in body["sources"]}
    assert body["sentences"] and all(set(s["citations"]) <= set(numbers) and s["citations"] for s in body["sentences"])
    cited_ids = {numbers[n]["id"] for s in body["sentences"] for n in s["citations"]}
    assert str(knowledge["limits"].pk) in cited_ids
    for sentence in body["sentences"]:  # extractive: every sentence is a quote of what it cites
        assert any(
            sentence["text"] in numbers[n]["snippet"] or sentence["text"] in knowledge["limits"].content
            for n in sentence["citations"]
        )


def test_nonsense_gets_i_dont_know_and_no_sources(acme: dict[str, Any], knowledge: dict[str, Any]) -> None:
    body = _ask(signed_in(acme["employee"]), "zebra quasar marmalade frequency").json()
    assert body["confident"] is False
    assert body["answer"].startswith("I don't know")
    assert body["sources"] == [] and body["sentences"] == []


def test_ask_never_cites_a_memory_the_asker_cannot_read(acme: dict[str, Any], knowledge: dict[str, Any]) -> None:
    question = "What is the leadership offsite budget?"
    executive = _ask(signed_in(acme["exec"]), question).json()
    assert executive["confident"] and "50,000" in executive["answer"]
    for member in ("manager", "employee", "contractor"):
        body = _ask(signed_in(acme[member]), question).json()
        assert "50,000" not in str(body), member
        assert str(knowledge["budget"].pk) not in {s["id"] for s in body["sources"]}, member


def test_an_outsider_gets_nothing_of_another_organization(
    acme: dict[str, Any], knowledge: dict[str, Any], make_org: Any, make_member: Any
) -> None:
    outsider = make_member(make_org("globex", "Globex"), "Executive", admin=True)
    body = _ask(signed_in(outsider), "How many requests per minute does the public API allow?").json()
    assert body["confident"] is False and body["sources"] == []
    assert "100 requests" not in str(body)


def test_bad_input_is_refused_and_nothing_is_audited(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    before = AuditEvent.objects.filter(action="memory.ask").count()
    for body in ({}, {"question": ""}, {"question": "x", "limit": 99}, {"question": "x", "colour": "blue"}):
        response = client.post("/api/ask", body, content_type="application/json")
        assert response.status_code == 400, body
        assert response.json()["error_code"]
    assert AuditEvent.objects.filter(action="memory.ask").count() == before
    assert Client().post("/api/ask", {"question": "x"}, content_type="application/json").status_code in (401, 403)


def test_the_question_its_sources_and_the_composer_are_audited(acme: dict[str, Any], knowledge: dict[str, Any]) -> None:
    _ask(signed_in(acme["employee"]), "How many requests per minute does the public API allow?")
    event = AuditEvent.objects.filter(action="memory.ask").latest("id")
    assert event.details["question"] == "How many requests per minute does the public API allow?"
    assert str(knowledge["limits"].pk) in event.details["sources"]
    assert event.details["composer"] == "extractive" and event.details["confident"] is True
    assert event.actor_user_id == acme["employee"].user_id


def test_the_ask_page_streams_an_answer_with_its_sources(acme: dict[str, Any], knowledge: dict[str, Any]) -> None:
    response = signed_in(acme["employee"]).get("/ask/", {"q": "How many requests per minute does the public API allow?"})
    assert response.status_code == 200 and response.streaming
    html = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    assert 'id="ask-answer"' in html and "100 requests per minute" in html
    assert "Public API rate limits" in html and 'href="#source-1"' in html
    dont_know = b"".join(signed_in(acme["contractor"]).get("/ask/", {"q": "offsite budget"}).streaming_content).decode()  # type: ignore[attr-defined]
    assert "50,000" not in dont_know and "Offsite budget" not in dont_know


def test_the_ask_page_needs_a_signed_in_member(acme: dict[str, Any]) -> None:
    assert Client().get("/ask/", {"q": "anything"}).status_code == 302


def test_extractive_answers_quote_the_sentences_sharing_rare_question_words() -> None:
    sources = [
        Source(1, "Deploys", "Deploys happen on Tuesdays. The deploy freeze starts on December 20. Rollbacks are manual."),
        Source(2, "Holidays", "The office closes for holidays. Everyone gets a card."),
    ]
    answer = extractive_answer("When does the deploy freeze start?", sources)
    assert [s.text for s in answer.sentences] == ["The deploy freeze starts on December 20."]
    assert all(s.citations == (1,) for s in answer.sentences)
    assert extractive_answer("astronomy telescopes", sources).sentences == []
