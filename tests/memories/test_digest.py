"""The daily digest e-mail: opted-in members get their unseen Activity items (read rule applied,
absolute links, plain text and HTML), at most once a day; opted-out and deactivated members, and
days with nothing new, get nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone
from support import principal, remember, signed_in

from memories.models import Conflict, Membership
from memories.services.accounts import member_deactivate
from memories.services.digest import digest_preference_set, digests_send_due
from memories.services.memories import memory_redact, memory_supersede
from memories.tasks import send_daily_digests

pytestmark = pytest.mark.django_db

BASE = "https://cortex.example.test"


@pytest.fixture(autouse=True)
def _base_url(settings: Any) -> None:
    settings.CORTEX_BASE_URL = BASE
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


def _opt_in(membership: Membership) -> None:
    digest_preference_set(principal=principal(membership), enabled=True)


def _superseded(acme: dict[str, Any], title: str = "Staging deploys") -> Any:
    mine = remember(acme["employee"], f"{title} happen at 09:00.", title=title, scope="engineering")
    memory_supersede(principal=principal(acme["manager"]), memory_id=mine.pk, changes={"content": f"{title} at 10:00."})
    return mine


def _bodies(message: Any) -> tuple[str, str]:
    [(html, mimetype)] = message.alternatives
    assert mimetype == "text/html"
    return message.body, html


def test_an_opted_in_member_gets_their_unseen_items_with_absolute_links_in_text_and_html(acme: dict[str, Any]) -> None:
    mine = _superseded(acme)
    _opt_in(acme["employee"])
    assert send_daily_digests() == 1
    [message] = mail.outbox
    assert message.to == [acme["employee"].user.email]
    assert "1 new item" in message.subject and acme["org"].name in message.subject
    text, html = _bodies(message)
    link = f"{BASE}/memories/{mine.pk}/"
    assert link in text and f'href="{link}"' in html
    assert "Your memory “Staging deploys” was replaced" in text and "was replaced" in html
    assert f"{BASE}/activity/" in text and f"{BASE}/settings/?tab=account" in text


def test_an_item_the_reader_may_not_see_is_never_in_the_digest(acme: dict[str, Any]) -> None:
    employee = acme["employee"]
    mine = remember(employee, "Quarterly numbers are shared on the first Monday.", title="Quarterly numbers", scope="engineering")
    secret_title = "Board-only quarterly numbers"
    memory_supersede(
        principal=principal(acme["exec"]),
        memory_id=mine.pk,
        changes={"content": "Quarterly numbers go to the board first.", "title": secret_title, "clearance_min": "Executive"},
    )
    # A conflict between my memory and one above my clearance: not mine to see.
    own = remember(employee, "Deploys need one approval.", title="Deploy approvals", scope="engineering")
    hidden = remember(
        acme["manager"], "Deploys need two approvals.", title="Manager approvals", clearance_min="Manager", scope="engineering"
    )
    Conflict.objects.create(
        organization=acme["org"], new_memory=own, existing_memory=hidden, kind="contradiction", similarity=0.9, explanation="x"
    )
    # Someone else's memory redacted: not in my Activity at all.
    theirs = remember(acme["manager"], "Sales kickoff is in Lisbon.", title="Kickoff", scope="sales")
    memory_redact(principal=principal(acme["exec"]), memory_id=theirs.pk, reason="Not announced yet.")
    _opt_in(employee)
    send_daily_digests()
    [message] = mail.outbox
    text, html = _bodies(message)
    assert f"/memories/{mine.pk}/" in text
    for body in (text, html):
        assert secret_title not in body and "board first" not in body
        assert "Manager approvals" not in body and "/conflicts/" not in body
        assert "Kickoff" not in body and "Not announced yet." not in body and str(theirs.pk) not in body


def test_twice_in_one_day_sends_once_and_the_next_day_only_what_is_new(acme: dict[str, Any]) -> None:
    first = _superseded(acme, "Staging deploys")
    _opt_in(acme["employee"])
    now = timezone.now()
    assert digests_send_due(batch_size=10, now=now).sent == 1
    second = _superseded(acme, "Build cache")  # new, but today's digest is already sent
    assert digests_send_due(batch_size=10, now=now + timedelta(seconds=1)).sent == 0
    assert send_daily_digests() == 0
    assert len(mail.outbox) == 1
    tomorrow = now + timedelta(days=1)
    assert digests_send_due(batch_size=10, now=tomorrow).sent == 1
    text, _ = _bodies(mail.outbox[1])
    assert f"/memories/{second.pk}/" in text and f"/memories/{first.pk}/" not in text


def test_nothing_new_sends_nothing_and_a_visit_to_activity_counts_as_seen(acme: dict[str, Any]) -> None:
    _opt_in(acme["employee"])
    assert send_daily_digests() == 0
    _superseded(acme)
    signed_in(acme["employee"]).get("/activity/")
    assert send_daily_digests() == 0
    assert mail.outbox == []


def test_opted_out_members_get_nothing(acme: dict[str, Any]) -> None:
    _superseded(acme)  # the employee has something new, but never opted in
    assert send_daily_digests() == 0
    client = signed_in(acme["employee"])
    assert client.post("/settings/digest/", {"digest_email": "on"}).status_code == 302
    assert client.post("/settings/digest/", {}).status_code == 302  # and off again
    assert Membership.objects.get(pk=acme["employee"].pk).digest_email is False
    assert send_daily_digests() == 0
    assert mail.outbox == []


def test_deactivated_members_get_nothing(acme: dict[str, Any]) -> None:
    _superseded(acme)
    _opt_in(acme["employee"])
    member_deactivate(membership=acme["employee"], by=principal(acme["exec"]))
    assert send_daily_digests() == 0
    assert mail.outbox == []


def test_the_opt_in_is_on_the_settings_page_off_by_default_and_per_organization(acme: dict[str, Any], make_member: Any) -> None:
    page = signed_in(acme["employee"]).get("/settings/?tab=account").content.decode()
    assert 'name="digest_email"' in page and 'id="digest_email" checked' not in page
    signed_in(acme["employee"]).post("/settings/digest/", {"digest_email": "on"})
    page = signed_in(acme["employee"]).get("/settings/?tab=account").content.decode()
    assert 'id="digest_email" checked' in page
    # The opt-in changes only the member's own membership: nobody else's.
    assert list(Membership.objects.filter(digest_email=True)) == [acme["employee"]]


def test_a_full_batch_enqueues_the_next_and_every_due_member_is_served_once(
    acme: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    for title, who in (("Staging deploys", "employee"), ("Pricing", "contractor")):
        memory = remember(acme[who], f"{title} notes.", title=title, scope="public-docs")
        memory_redact(principal=principal(acme["exec"]), memory_id=memory.pk, reason="Outdated.")
        _opt_in(acme[who])
    with django_capture_on_commit_callbacks(execute=True):
        send_daily_digests(0, 1)
    assert sorted(m.to[0] for m in mail.outbox) == sorted([acme["employee"].user.email, acme["contractor"].user.email])
    with django_capture_on_commit_callbacks(execute=True):
        send_daily_digests(0, 1)
    assert len(mail.outbox) == 2


def test_each_digest_sent_and_each_opt_in_change_is_in_the_audit_chain_without_the_items(acme: dict[str, Any]) -> None:
    from audit.models import AuditEvent
    from audit.services import verify_chain

    _superseded(acme, "Staging deploys")
    client = signed_in(acme["employee"])
    client.post("/settings/digest/", {"digest_email": "on"})
    [opt_in] = AuditEvent.objects.filter(organization=acme["org"], action="digest.preference")
    assert opt_in.actor_user_id == acme["employee"].user_id and opt_in.details == {"enabled": True}
    assert send_daily_digests() == 1
    [sent] = AuditEvent.objects.filter(organization=acme["org"], action="digest.sent")
    assert sent.actor_kind == "system" and sent.target_id == str(acme["employee"].pk)
    assert sent.details == {"items": 1, "kinds": {"superseded": 1}}
    assert "Staging" not in str(sent.details)
    assert send_daily_digests() == 0  # nothing sent, nothing recorded
    assert AuditEvent.objects.filter(action="digest.sent").count() == 1
    assert verify_chain(acme["org"].pk).ok


def test_a_digest_the_mail_server_refuses_leaves_no_sent_event(acme: dict[str, Any], settings: Any) -> None:
    from audit.models import AuditEvent

    _superseded(acme)
    _opt_in(acme["employee"])
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 1  # nothing listens there
    assert send_daily_digests() == 0
    assert not AuditEvent.objects.filter(action="digest.sent").exists()
    assert Membership.objects.get(pk=acme["employee"].pk).digest_sent_at is None
