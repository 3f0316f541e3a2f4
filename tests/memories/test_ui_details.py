"""Edit details: tags, category, clearance and expiry changed in place through memory_patch —
audited, no new version — offered only to those who may write the memory."""

from __future__ import annotations

from typing import Any

from support import remember, signed_in

from audit.models import AuditEvent
from memories.models import Memory


def _memory(acme: dict[str, Any]) -> Memory:
    return remember(
        acme["employee"], "Deploys stop during wave releases.", scope="engineering", tags=["deploys"], clearance_min="Employee"
    )


def test_details_change_in_place_and_are_audited(acme: dict[str, Any]) -> None:
    memory = _memory(acme)
    client = signed_in(acme["employee"])
    detail = client.get(f"/memories/{memory.pk}/").content.decode()
    assert f'href="/memories/{memory.pk}/details/"' in detail
    form = client.get(f"/memories/{memory.pk}/details/")
    assert form.status_code == 200 and 'value="deploys"' in form.content.decode()
    response = client.post(
        f"/memories/{memory.pk}/details/",
        {"category": "Policy", "tags": "deploys, release", "clearance_min": "Employee", "valid_until": "2099-01-31T12:00"},
    )
    assert response.status_code == 302 and response["Location"] == f"/memories/{memory.pk}/"
    memory.refresh_from_db()
    assert (memory.category, memory.tags, memory.status) == ("policy", ["deploys", "release"], "active")
    assert memory.valid_until is not None and memory.valid_until.year == 2099
    assert Memory.objects.count() == 1  # no new version
    event = AuditEvent.objects.get(action="memory.patch", target_id=str(memory.pk))
    assert event.details["changed"]["category"] == {"from": "note", "to": "policy"}
    # Employee → Contractor: the Contractor, who could not open it, now can.
    assert signed_in(acme["contractor"]).get(f"/memories/{memory.pk}/").status_code == 404
    client.post(f"/memories/{memory.pk}/details/", {"category": "policy", "tags": "", "clearance_min": "Contractor"})
    assert signed_in(acme["contractor"]).get(f"/memories/{memory.pk}/").status_code == 200


def test_a_bad_expiry_is_refused_in_words_and_nothing_changes(acme: dict[str, Any]) -> None:
    memory = _memory(acme)
    response = signed_in(acme["employee"]).post(
        f"/memories/{memory.pk}/details/",
        {"category": "note", "tags": "deploys", "clearance_min": "Employee", "valid_until": "2001-01-01T00:00"},
    )
    assert response.status_code == 400
    text = response.content.decode()
    assert "Valid until must be after Valid from." in text and "valid_until" not in text.split("<form", 1)[1].split("name=")[0]
    memory.refresh_from_db()
    assert memory.valid_until is None
    assert not AuditEvent.objects.filter(action="memory.patch").exists()


def test_someone_who_may_not_write_it_is_refused_and_an_outsider_sees_nothing(acme: dict[str, Any], outsider: Any) -> None:
    memory = _memory(acme)
    body = {"category": "policy", "tags": "", "clearance_min": "Contractor"}
    manager = signed_in(acme["manager"])  # reads and writes engineering
    contractor = signed_in(acme["contractor"])  # reads engineering, cannot write it
    assert f"/memories/{memory.pk}/details/" in manager.get(f"/memories/{memory.pk}/").content.decode()
    open_to_all = remember(acme["employee"], "Everyone may read this.", scope="engineering")
    assert contractor.get(f"/memories/{open_to_all.pk}/").status_code == 200
    assert f"/memories/{open_to_all.pk}/details/" not in contractor.get(f"/memories/{open_to_all.pk}/").content.decode()
    assert contractor.post(f"/memories/{open_to_all.pk}/details/", body).status_code == 403
    for response in (
        signed_in(outsider).get(f"/memories/{memory.pk}/details/"),
        signed_in(outsider).post(f"/memories/{memory.pk}/details/", body),
    ):
        assert response.status_code == 404
    memory.refresh_from_db()
    assert memory.category == "note"
    assert not AuditEvent.objects.filter(action="memory.patch").exists()
