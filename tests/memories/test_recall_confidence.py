"""Absolute match strength: every result carries `match` (0–1, the same scale for every query) and a
`confidence` label; a recall with no confident match says so in REST, the selector and the search page,
instead of presenting the least-bad noise at relevance 1.00 (issue 14)."""

from __future__ import annotations

from typing import Any

import pytest
from support import principal, remember, signed_in

from memories.retrieval import scoring
from memories.selectors.recall import RecallQuery, recall

NOTES = [
    ("Discount policy", "Discount policy: partners get 15% off annual plans; discounts above 25% need the CFO."),
    ("Deploy freeze", "Deploy freeze: no production deploys between Dec 20 and Jan 2."),
    ("VPN", "The VPN moved to Tailscale; install the client from the self-service portal."),
    ("Incident INC-2025-031", "INC-2025-031: the dock API returned 429s for an hour after a rate-limit misconfiguration."),
]


@pytest.fixture
def notes(acme: dict[str, Any]) -> dict[str, Any]:
    return {title: remember(acme["exec"], content, title=title, scope="engineering") for title, content in NOTES}


def test_confidence_labels_follow_the_thresholds() -> None:
    limits = scoring.CONFIDENCE_THRESHOLDS
    assert 0 < limits.partial < limits.strong < 1
    assert scoring.confidence(limits.strong) is scoring.Confidence.STRONG
    assert scoring.confidence(limits.strong - 1e-6) is scoring.Confidence.PARTIAL
    assert scoring.confidence(limits.partial) is scoring.Confidence.PARTIAL
    assert scoring.confidence(limits.partial - 1e-6) is scoring.Confidence.WEAK
    assert scoring.confidence(0.0) is scoring.Confidence.WEAK


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("discount policy", "Discount policy"),
        ("deploy freeze", "Deploy freeze"),
        ("INC-2025-031", "Incident INC-2025-031"),
        ("vpn tailscale", "VPN"),
    ],
)
def test_a_genuine_answer_is_a_confident_match(acme: dict[str, Any], notes: dict[str, Any], query: str, title: str) -> None:
    result = recall(principal(acme["employee"]), RecallQuery(query), audit=False)
    assert result.hits[0].memory == notes[title]
    assert result.hits[0].confidence is not scoring.Confidence.WEAK
    assert result.confident


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["zxqv blorp frandle", "purple monkey dishwasher", "TICKET-99999", "banana bread walnuts"])
def test_nonsense_is_never_confident_and_says_so_over_rest(
    acme: dict[str, Any], notes: dict[str, Any], api: Any, query: str
) -> None:
    result = recall(principal(acme["employee"]), RecallQuery(query), audit=False)
    assert not result.confident
    assert all(h.confidence is scoring.Confidence.WEAK for h in result.hits)

    body = api(acme["employee"]).post("/api/recall", {"query": query}).json()
    assert body["confident"] is False
    assert all(
        hit["confidence"] == "weak" and 0 <= hit["match"] < scoring.CONFIDENCE_THRESHOLDS.partial for hit in body["results"]
    )


@pytest.mark.django_db
def test_match_is_absolute_while_relevance_is_relative(acme: dict[str, Any], notes: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    strong = client.post("/api/recall", {"query": "discount policy"}).json()
    weak = client.post("/api/recall", {"query": "glorbnax wuzzle discount"}).json()
    # Both best results have relevance 1 (the best of their pool); only match tells them apart.
    assert strong["results"][0]["relevance"] == 1.0 == weak["results"][0]["relevance"]
    assert strong["results"][0]["match"] > weak["results"][0]["match"]
    assert strong["confident"] is True


@pytest.mark.django_db
def test_what_only_a_hidden_memory_matches_is_not_confident_for_the_reader(acme: dict[str, Any], notes: dict[str, Any]) -> None:
    # Executive-only: the contractor may not read it, so it neither appears nor makes their recall confident.
    secret = remember(
        acme["exec"],
        "Globex acquisition: the term sheet is signed.",
        title="Globex acquisition",
        scope="engineering",
        clearance_min="Executive",
    )
    contractor = recall(principal(acme["contractor"]), RecallQuery("Globex acquisition"), audit=False)
    assert secret not in [h.memory for h in contractor.hits]
    assert not contractor.confident
    executive = recall(principal(acme["exec"]), RecallQuery("Globex acquisition"), audit=False)
    assert executive.hits[0].memory == secret and executive.confident


@pytest.mark.django_db
def test_the_search_page_says_no_confident_match_and_shows_match_strength(
    acme: dict[str, Any], notes: dict[str, Any], outsider: Any
) -> None:
    client = signed_in(acme["employee"])
    noise = client.get("/memories/", {"q": "banana bread walnuts"}).content.decode()
    assert "No confident match — the closest memories" in noise
    assert "Weak match" in noise

    answer = client.get("/memories/", {"q": "discount policy"}).content.decode()
    assert "No confident match" not in answer
    assert "Strong match" in answer or "Partial match" in answer

    # An outsider (another organization) sees none of it.
    foreign = signed_in(outsider).get("/memories/", {"q": "discount policy"}).content.decode()
    assert "Discount policy" not in foreign and "Strong match" not in foreign


@pytest.mark.django_db
def test_naming_what_nobody_visible_holds_lowers_match_but_not_the_ranking(acme: dict[str, Any], notes: dict[str, Any]) -> None:
    reader = principal(acme["employee"])
    plain = recall(reader, RecallQuery("deploy freeze"), audit=False)
    named = recall(reader, RecallQuery("deploy freeze Cyberdyne"), audit=False)
    ticket = recall(reader, RecallQuery("deploy freeze DEPLOY-4242"), audit=False)
    assert plain.hits[0].memory == named.hits[0].memory == ticket.hits[0].memory == notes["Deploy freeze"]
    # A name or an id that occurs in nothing the reader may see: the deploy-freeze note is not the exact answer.
    assert named.hits[0].match < plain.hits[0].match and ticket.hits[0].match < plain.hits[0].match
    assert named.hits[0].confidence is not scoring.Confidence.STRONG


@pytest.mark.django_db
def test_a_repeated_query_is_embedded_once_per_process(acme: dict[str, Any], notes: dict[str, Any], monkeypatch: Any) -> None:
    from memories.embeddings.factory import get_embedder

    embedder = get_embedder()
    calls: list[list[str]] = []
    real = embedder.embed

    def counting(texts: list[str]) -> Any:
        calls.append(list(texts))
        return real(texts)

    monkeypatch.setattr(embedder, "embed", counting)
    first = recall(principal(acme["employee"]), RecallQuery("deploy freeze december unique-query-17"), audit=False)
    again = recall(principal(acme["employee"]), RecallQuery("deploy freeze december unique-query-17"), audit=False)
    assert calls == [["deploy freeze december unique-query-17"]]
    assert [(h.memory.pk, h.score, h.match) for h in first.hits] == [(h.memory.pk, h.score, h.match) for h in again.hits]


@pytest.mark.django_db
def test_a_rare_word_another_memory_holds_does_not_lower_the_answers_match(acme: dict[str, Any], notes: dict[str, Any]) -> None:
    # "fridays" is in one visible chunk, the canteen note's: ranking treats it as selective (a twin that
    # lacks it loses strength), but the absolute match of the deploy-freeze note does not pay for it...
    canteen = remember(acme["exec"], "The canteen closes early on fridays.", title="Canteen", scope="engineering")
    reader = principal(acme["employee"])
    hits = recall(reader, RecallQuery("deploy freeze fridays"), audit=False).hits
    assert [h.memory for h in hits[:2]] == [notes["Deploy freeze"], canteen]
    freeze = hits[0]
    assert freeze.match == round(scoring.fuse(freeze.dense, freeze.lexical), 6)
    # ...while lacking the ticket id another memory holds does: it is not the answer to that id.
    named = recall(reader, RecallQuery("deploy freeze INC-2025-031"), audit=False).hits
    freeze = next(h for h in named if h.memory == notes["Deploy freeze"])
    assert freeze.match == round(scoring.fuse(freeze.dense, freeze.lexical) * (1 - scoring.PARAMS.miss_penalty), 6)
    assert named[0].memory == notes["Incident INC-2025-031"]


@pytest.mark.django_db
def test_a_hyphenated_word_nobody_holds_is_not_a_name(acme: dict[str, Any], notes: dict[str, Any]) -> None:
    reader = principal(acme["employee"])
    worded = recall(reader, RecallQuery("deploy freeze e-scooter"), audit=False).hits[0]
    coded = recall(reader, RecallQuery("deploy freeze SCOOT-42"), audit=False).hits[0]
    assert worded.memory == coded.memory == notes["Deploy freeze"]
    # "e-scooter" occurs nowhere, but it is a word: no absent-name factor. SCOOT-42 is an id nobody holds.
    assert worded.match == round(scoring.fuse(worded.dense, worded.lexical), 6)
    assert coded.match == round(scoring.fuse(coded.dense, coded.lexical) * (1 - scoring.PARAMS.miss_penalty), 6)


@pytest.mark.django_db
def test_a_paraphrase_sharing_few_words_with_its_answer_is_confident(acme: dict[str, Any], use_embedder: Any) -> None:
    use_embedder("local")
    author = acme["exec"]
    vpn = remember(
        author,
        "Heads up: the VPN gateway is flaky since the firmware update, sessions time out every few minutes. "
        "Use the wired network until IT rolls it back.",
        title="VPN gateway flaky",
        scope="engineering",
    )
    # "dropping" is in this note only: a rare word the answer lacks.
    remember(author, "The plant in reception is dropping its leaves; please water it.", title="Plants", scope="engineering")
    remember(author, "Quarterly planning starts next week; bring your roadmap drafts.", title="Planning", scope="engineering")
    reader = principal(acme["employee"])
    result = recall(reader, RecallQuery("why does my remote connection keep dropping?"), audit=False)
    assert result.hits[0].memory == vpn
    assert result.hits[0].confidence is not scoring.Confidence.WEAK and result.confident
    # Nonsense against the same memories stays weak.
    assert not recall(reader, RecallQuery("zxqv blorp frandle"), audit=False).confident
