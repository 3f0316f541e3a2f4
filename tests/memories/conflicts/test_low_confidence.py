"""Under the auto policy a verdict below LOW_CONFIDENCE waits for a person instead of superseding."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support import signed_in

from audit.models import AuditEvent
from memories.llm.fake import ScriptedLLM
from memories.models import Conflict, Memory
from memories.services.conflicts import LOW_CONFIDENCE, conflict_resolve, detection

LIMIT_100 = "The public API rate limit is 100 requests per minute per API key."
LIMIT_250 = "The public API rate limit is 250 requests per minute per API key."


def judgement(verdict: str, confidence: float, outdated: str = "neither") -> dict[str, Any]:
    return {
        "reasoning": "Both give the public API rate limit per key.",
        "same_subject": True,
        "verdict": verdict,
        "outdated": outdated,
        "confidence": confidence,
        "explanation": "The two memories give the rate limit of the same API.",
    }


@pytest.fixture
def llm_says(monkeypatch: Any) -> Any:
    def install(*responses: Any) -> ScriptedLLM:
        llm = ScriptedLLM(list(responses), name="anthropic", model="claude-test")
        monkeypatch.setattr(detection, "get_llm", lambda: llm)
        return llm

    return install


def write_pair(acme: dict[str, Any], write: Any) -> tuple[Memory, Memory]:
    older = write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=timezone.now() - timedelta(days=30))
    newer = write(acme["employee"], LIMIT_250, title="Public API rate limit")
    return older, newer


def statuses(*memories: Memory) -> list[str]:
    return [Memory.objects.get(pk=m.pk).status for m in memories]


@pytest.mark.parametrize(("verdict", "outdated"), [("contradiction", "neither"), ("stale", "existing"), ("duplicate", "neither")])
def test_an_unsure_verdict_of_any_kind_is_queued_and_supersedes_nothing(
    acme: dict[str, Any], write: Any, llm_says: Any, verdict: str, outdated: str
) -> None:
    llm_says(judgement(verdict, 0.69, outdated))
    older, newer = write_pair(acme, write)

    conflict = Conflict.objects.get()
    assert (conflict.kind, conflict.status, conflict.resolution, conflict.confidence) == (verdict, "open", "", 0.69)
    assert "unsure" in conflict.resolution_note and "0.69" in conflict.resolution_note
    assert statuses(older, newer) == ["active", "active"]
    assert not AuditEvent.objects.filter(action__in=["conflict.resolve", "memory.supersede"]).exists()


def test_at_the_threshold_the_policy_decides(acme: dict[str, Any], write: Any, llm_says: Any) -> None:
    llm_says(judgement("contradiction", LOW_CONFIDENCE))
    older, newer = write_pair(acme, write)

    conflict = Conflict.objects.get()
    assert (conflict.status, conflict.resolution, conflict.resolved_by_policy) == ("resolved", "keep_existing", "authority")
    assert statuses(older, newer) == ["active", "superseded"]


def test_the_manual_policy_queues_even_a_confident_verdict(acme: dict[str, Any], write: Any, llm_says: Any) -> None:
    acme["org"].conflict_policy = "manual"
    acme["org"].save(update_fields=["conflict_policy"])
    llm_says(judgement("contradiction", 0.99))
    older, newer = write_pair(acme, write)
    assert Conflict.objects.get().status == "open"
    assert statuses(older, newer) == ["active", "active"]


def test_a_queued_unsure_conflict_shows_why_and_a_person_decides_it(
    acme: dict[str, Any], write: Any, llm_says: Any, principal_of: Any, outsider: Any
) -> None:
    llm_says(judgement("contradiction", 0.4))
    older, newer = write_pair(acme, write)
    conflict = Conflict.objects.get()

    page = signed_in(acme["manager"]).get(f"/conflicts/{conflict.pk}/")
    assert page.status_code == 200
    assert "the classifier was unsure (confidence 0.40" in page.content.decode()
    # Someone of another organization sees nothing of it.
    assert signed_in(outsider).get(f"/conflicts/{conflict.pk}/").status_code == 404

    conflict_resolve(
        principal=principal_of(acme["manager"]), conflict_id=conflict.pk, resolution="keep_new", note="finance agreed"
    )
    decided = Conflict.objects.get(pk=conflict.pk)
    assert (decided.status, decided.resolution, decided.resolved_by_policy) == ("resolved", "keep_new", "")
    assert statuses(older, newer) == ["superseded", "active"]
